use std::time::Duration;

use sqlx::Connection as _;
use sqlx::postgres::PgConnection;

use crate::HarnessError;

/// Quotes `name` as an SQL identifier, for names that cannot be bound as
/// parameters (database names in `CREATE DATABASE` and the like).
pub fn quote_ident(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}

/// `url` with its database replaced by `database`. Keeps user, host, port and
/// query parameters, except a `dbname=` parameter, which would otherwise win
/// over the path.
pub(crate) fn replace_database(url: &str, database: &str) -> String {
    let (rest, fragment) = match url.find('#') {
        Some(i) => (&url[..i], Some(&url[i..])),
        None => (url, None),
    };
    let (rest, query) = match rest.find('?') {
        Some(i) => (&rest[..i], Some(&rest[i + 1..])),
        None => (rest, None),
    };
    let authority_start = rest.find("://").map_or(0, |i| i + 3);
    let path_start = rest[authority_start..]
        .find('/')
        .map_or(rest.len(), |i| i + authority_start);

    let mut out = String::with_capacity(url.len() + database.len());
    out.push_str(&rest[..path_start]);
    out.push('/');
    out.push_str(&percent_encode(database));
    if let Some(query) = query {
        let kept: Vec<&str> = query
            .split('&')
            .filter(|p| !p.is_empty() && !p.starts_with("dbname="))
            .collect();
        if !kept.is_empty() {
            out.push('?');
            out.push_str(&kept.join("&"));
        }
    }
    if let Some(fragment) = fragment {
        out.push_str(fragment);
    }
    out
}

fn percent_encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// sqlx has no connect timeout of its own for a single connection; without
/// one a black-holed host would hang a test forever.
pub(crate) async fn connect(url: &str, timeout: Duration) -> Result<PgConnection, sqlx::Error> {
    match tokio::time::timeout(timeout, PgConnection::connect(url)).await {
        Ok(result) => result,
        Err(_) => Err(sqlx::Error::Io(std::io::Error::new(
            std::io::ErrorKind::TimedOut,
            format!("connecting took longer than {timeout:?}"),
        ))),
    }
}

pub(crate) const CONNECT_TIMEOUT: Duration = Duration::from_secs(15);

/// Fails unless the server at `url` is PostgreSQL 14 or newer (the harness
/// relies on `DROP DATABASE .. WITH (FORCE)` and friends).
pub(crate) async fn check_version(conn: &mut PgConnection, url: &str) -> Result<(), HarnessError> {
    let (num, text): (String, String) = sqlx::query_as(
        "select current_setting('server_version_num'), current_setting('server_version')",
    )
    .fetch_one(&mut *conn)
    .await
    .map_err(|e| HarnessError::db("reading the server version", e))?;
    if num.parse::<u32>().unwrap_or(0) < 140_000 {
        return Err(HarnessError::UnsupportedVersion {
            found: text,
            url: redact(url),
        });
    }
    Ok(())
}

/// `url` without its password, for messages.
pub(crate) fn redact(url: &str) -> String {
    // One redaction for every form (user info, `?password=`, key=value
    // strings), shared with the CLI and xtask.
    awa_core::redact::redact_conninfo(url)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quote_ident_doubles_quotes() {
        assert_eq!(quote_ident("plain"), "\"plain\"");
        assert_eq!(quote_ident("a\"b"), "\"a\"\"b\"");
    }

    #[test]
    fn replace_database_variants() {
        assert_eq!(
            replace_database("postgres://u:p@h:5432/postgres", "x"),
            "postgres://u:p@h:5432/x"
        );
        assert_eq!(
            replace_database("postgres://u@h:5432", "x"),
            "postgres://u@h:5432/x"
        );
        assert_eq!(
            replace_database(
                "postgres://u@h/db?sslmode=disable&dbname=db&application_name=a",
                "x"
            ),
            "postgres://u@h/x?sslmode=disable&application_name=a"
        );
        assert_eq!(
            replace_database("postgresql://h/db?dbname=db", "x"),
            "postgresql://h/x"
        );
        assert_eq!(
            replace_database("postgres://h?host=/tmp", "x"),
            "postgres://h/x?host=/tmp"
        );
        assert_eq!(
            replace_database("postgres://h/db", "a b"),
            "postgres://h/a%20b"
        );
    }

    #[test]
    fn redact_hides_password() {
        assert_eq!(
            redact("postgres://u:secret@h:1/db"),
            "postgres://u:***@h:1/db"
        );
        assert_eq!(redact("postgres://u@h/db"), "postgres://u@h/db");
        assert_eq!(redact("postgres://h/db"), "postgres://h/db");
    }
}
