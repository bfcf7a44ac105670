//! Connecting, with errors that say what to check.

use crate::error::CliError;
use awa_core::SchemaName;
use awa_core::conninfo::Conninfo;
use awa_maint::connect::ConnectError;
use sqlx::PgConnection;
use sqlx::postgres::{PgPool, PgPoolOptions};
use std::time::Duration;

const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// The URL to connect to, refused before any connection is tried when it
/// is missing or not a PostgreSQL URL.
pub fn require_url(url: &Option<String>) -> Result<&str, CliError> {
    let url = url
        .as_deref()
        .filter(|u| !u.trim().is_empty())
        .ok_or(CliError::NoDatabaseUrl)?;
    options(url)?;
    Ok(url)
}

/// What sqlx connects with, per listed host: `sslmode`, `sslrootcert`,
/// `target_session_attrs` and the rest of the URL read as libpq reads them
/// (see `awa_core::conninfo`).
fn options(url: &str) -> Result<Conninfo, CliError> {
    Ok(awa_core::conninfo::connect_options(url)?)
}

/// The substrates a command works on: the one named by `--schema` /
/// `AWA_SCHEMA` (which must be a prepared substrate), or the storage
/// routing as the transition state in the database has it now.
pub async fn routing(
    cli: &crate::cli::Cli,
    conn: &mut PgConnection,
) -> Result<awa_core::Routing, CliError> {
    match pinned(cli)? {
        Some(schema) => {
            require_substrate(conn, &schema).await?;
            Ok(awa_core::Routing::fixed(schema))
        }
        None => Ok(awa_control::routing::read(conn).await?),
    }
}

/// The `--schema` / `AWA_SCHEMA` substrate, validated, if one was given.
pub fn pinned(cli: &crate::cli::Cli) -> Result<Option<SchemaName>, CliError> {
    Ok(cli
        .schema
        .as_deref()
        .filter(|s| !s.is_empty())
        .map(SchemaName::new)
        .transpose()?)
}

/// The `--schema` / `AWA_SCHEMA` substrate, if one was given, checked to
/// be a prepared substrate: what every command that does not otherwise
/// read the routing calls before its first write, so a pin naming nothing
/// is refused with nothing written (even where the command's work is
/// database-wide, such as cron schedules and queue settings).
pub async fn check_pinned(
    cli: &crate::cli::Cli,
    conn: &mut PgConnection,
) -> Result<Option<SchemaName>, CliError> {
    let pinned = pinned(cli)?;
    if let Some(schema) = &pinned {
        require_substrate(conn, schema).await?;
    }
    Ok(pinned)
}

/// Refuse a schema that is not a prepared substrate.
pub async fn require_substrate(
    conn: &mut PgConnection,
    schema: &SchemaName,
) -> Result<(), CliError> {
    if awa_maint::substrate::is_substrate(conn, schema).await? {
        Ok(())
    } else {
        Err(CliError::NotFound(format!(
            "schema {schema} is not a prepared substrate (prepare it with \
             `awa storage prepare-queue-storage-schema --schema {schema}`, or leave out \
             --schema / AWA_SCHEMA to follow the storage routing)"
        )))
    }
}

/// A connection failure as the user should read it (a refusal by the
/// server, such as a wrong password or database, is a database error; a
/// failed TLS handshake says what to check in the URL).
fn describe(err: &ConnectError) -> String {
    const TLS_ADVICE: &str = "with sslmode=verify-ca or verify-full, sslrootcert must name \
         the CA that signed the server's certificate (for a self-signed one, the certificate \
         itself), and verify-full also needs the certificate to name the host in the URL";
    match err.driver_error() {
        // OpenSSL refusing the server's certificate (or a root certificate
        // it cannot read) reaches us as sqlx's TLS error; its text carries
        // OpenSSL's reason ("hostname mismatch", "unable to get local
        // issuer certificate").
        Some(sqlx::Error::Tls(tls)) => {
            format!("TLS failed: {tls} (check sslmode and sslrootcert in the URL; {TLS_ADVICE})")
        }
        Some(other) => awa_core::db_error::Described(other).to_string(),
        None => err.to_string(),
    }
}

fn unreachable(url: &str, reason: String) -> CliError {
    CliError::Unreachable {
        url: redact(url),
        // In case the driver quoted part of the string back.
        reason: awa_core::redact::scrub(&reason, url),
    }
}

/// One connection, to the first listed host whose session qualifies.
pub async fn connect(url: &str) -> Result<PgConnection, CliError> {
    awa_maint::connect::connect(&options(url)?)
        .await
        .map_err(|err| unreachable(url, describe(&err)))
}

/// A connection to a database this binary may touch job data in: migrated
/// to this binary's version.
pub async fn connect_migrated(url: &str) -> Result<PgConnection, CliError> {
    let mut conn = connect(url).await?;
    ensure_migrated(&mut conn).await?;
    Ok(conn)
}

/// A pool for long-running commands, checked like `connect_migrated`. From
/// a host list it follows a failover to the new primary for as long as the
/// process runs (`awa_maint::connect::pool`).
pub async fn pool_migrated(url: &str, size: u32) -> Result<PgPool, CliError> {
    // No ping on every acquire: it would add a round trip to each claim and
    // each finish; a broken connection shows up as a failed statement, which
    // the worker retries anyway.
    let options = PgPoolOptions::new()
        .max_connections(size)
        .acquire_timeout(CONNECT_TIMEOUT)
        .test_before_acquire(false);
    let (pool, watch) = awa_maint::connect::pool(&self::options(url)?, options)
        .await
        .map_err(|err| unreachable(url, describe(&err)))?;
    // The pool lives as long as the command.
    watch.until_closed();
    let mut conn = pool.acquire().await?;
    ensure_migrated(&mut conn).await?;
    Ok(pool)
}

/// Migrated to exactly this binary's version: an older database would lack
/// what this binary's statements call, a newer one may have changed it.
async fn ensure_migrated(conn: &mut PgConnection) -> Result<(), CliError> {
    awa_maint::migrate::require_current(conn).await?;
    Ok(())
}

/// The connection string without its passwords, for messages (every form:
/// URL user info, `?password=`, key=value strings).
pub fn redact(url: &str) -> String {
    awa_core::redact::redact_conninfo(url)
}

#[cfg(test)]
mod tests {
    #[test]
    fn redacts_password() {
        assert_eq!(
            super::redact("postgres://u:secret@h:5432/db"),
            "postgres://u:***@h:5432/db"
        );
        assert_eq!(super::redact("postgres://h/db"), "postgres://h/db");
        assert_eq!(super::redact("postgres://u@h/db"), "postgres://u@h/db");
        assert_eq!(
            super::redact("host=h password='a b'"),
            "host=h password=***"
        );
    }
}
