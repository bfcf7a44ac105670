//! Versioned, forward-only migrations, embedded in the binary.
//!
//! Each migration runs in its own transaction; a session advisory lock
//! serializes migrators so many processes starting at once is safe; a
//! database whose version is newer than the newest migration here is
//! refused rather than touched.
//!
//! Once a version has shipped its text is frozen: changes go into a new
//! version. The recorded checksum shows drift.

use crate::MaintError;
use sha2::{Digest, Sha256};
use sqlx::{Connection, PgConnection};
use std::path::{Path, PathBuf};
use tracing::Instrument;

/// One migration.
#[derive(Debug, Clone)]
pub struct Migration {
    pub version: i32,
    pub description: &'static str,
    pub sql: String,
}

impl Migration {
    pub fn checksum(&self) -> String {
        let digest = Sha256::digest(self.sql.as_bytes());
        digest.iter().map(|b| format!("{b:02x}")).collect()
    }

    /// File name for external runners (Flyway's `V<n>__<desc>.sql`, which
    /// sqitch and Liquibase can also be pointed at).
    pub fn file_name(&self) -> String {
        format!(
            "V{}__{}.sql",
            self.version,
            self.description.replace(' ', "_")
        )
    }
}

/// Version 1: the control objects, every plane's installer, the substrate
/// helper, and the default substrate in schema `awa`.
fn v1() -> Migration {
    let parts = [
        awa_control::CONTROL_SCHEMA_SQL,
        awa_control::TRANSITION_SQL,
        awa_control::INSTALL_SQL,
        awa_ready::INSTALL_SQL,
        awa_deferred::INSTALL_SQL,
        awa_exec::INSTALL_SQL,
        awa_history::INSTALL_SQL,
        awa_dlq::INSTALL_SQL,
        include_str!("../sql/install_queue_storage_substrate.sql"),
        include_str!("../sql/grant_runtime_role.sql"),
    ];
    let mut sql = parts.join("\n\n");
    sql.push_str(&function_templates());
    sql.push_str(include_str!("../sql/install_default_substrate.sql"));
    Migration {
        version: 1,
        description: "queue storage substrate",
        sql,
    }
}

/// Every plane's runtime functions, in install order.
fn all_functions() -> impl Iterator<Item = &'static (&'static str, &'static str)> {
    awa_ready::FUNCTIONS
        .iter()
        .chain(awa_deferred::FUNCTIONS)
        .chain(awa_exec::FUNCTIONS)
        .chain(awa_dlq::FUNCTIONS)
        .chain(awa_history::FUNCTIONS)
        .chain(awa_control::FUNCTIONS)
}

/// Statements storing the runtime function templates for the installer.
fn function_templates() -> String {
    const QUOTE: &str = "$awa_template$";
    let mut out = String::from("\n-- Runtime function templates, instantiated per substrate.\n");
    for (ord, (name, body)) in all_functions().enumerate() {
        assert!(
            !body.contains(QUOTE),
            "function template {name} must not contain {QUOTE}"
        );
        out.push_str(&format!(
            "INSERT INTO awa.substrate_functions (name, ord, body) VALUES ('{name}', {ord}, {QUOTE}{body}{QUOTE})\n\
             ON CONFLICT (name) DO UPDATE SET ord = EXCLUDED.ord, body = EXCLUDED.body;\n"
        ));
    }
    out.push('\n');
    out
}

/// Every migration, oldest first.
pub fn migrations() -> Vec<Migration> {
    vec![v1()]
}

/// The newest schema version this binary knows.
pub const LATEST_VERSION: i32 = 1;

/// What `migrate` did.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct MigrateReport {
    /// Version before migrating (`None`: a fresh database).
    pub from: Option<i32>,
    pub to: i32,
    pub applied: Vec<i32>,
}

/// A digest of the whole migration set: changes whenever any migration
/// does, so cached template databases are never stale.
pub fn fingerprint() -> String {
    let mut hasher = Sha256::new();
    for m in migrations() {
        hasher.update(m.sql.as_bytes());
    }
    hasher
        .finalize()
        .iter()
        .take(8)
        .map(|b| format!("{b:02x}"))
        .collect()
}

impl Migration {
    /// The migration as a standalone script that also records itself in
    /// `awa.schema_version`, so an external runner leaves the database in
    /// the state `awa migrate` would. Descriptions are our own constants
    /// without quotes.
    pub fn script(&self) -> String {
        format!(
            "-- Awa migration {v}: {d}\n{sql}\nINSERT INTO awa.schema_version (version, description, checksum) VALUES ({v}, '{d}', '{c}');\n",
            v = self.version,
            d = self.description,
            sql = self.sql.trim_end(),
            c = self.checksum()
        )
    }
}

/// The whole migration set as one script (`awa migrate --sql`), each
/// migration in its own transaction.
pub fn full_sql() -> String {
    migrations()
        .iter()
        .map(|m| format!("BEGIN;\n{}COMMIT;\n\n", m.script()))
        .collect()
}

/// Write one file per migration into `dir` (`awa migrate --extract-to`).
/// Each file records its own version so an external runner leaves the
/// database in the state `awa migrate` would.
pub fn extract_to(dir: &Path) -> Result<Vec<PathBuf>, MaintError> {
    std::fs::create_dir_all(dir)?;
    let mut written = Vec::new();
    for m in migrations() {
        let path = dir.join(m.file_name());
        std::fs::write(&path, m.script())?;
        written.push(path);
    }
    Ok(written)
}

/// Refuse a database newer than this binary, without taking any lock.
pub async fn check_compatible(conn: &mut PgConnection) -> Result<Option<i32>, MaintError> {
    let found = awa_control::status::schema_version(conn).await?;
    if let Some(found) = found
        && found > LATEST_VERSION
    {
        return Err(MaintError::SchemaTooNew {
            found,
            known: LATEST_VERSION,
        });
    }
    Ok(found)
}

/// Bring the database at `database_url` to the newest version.
///
/// `database_url` is read as [`awa_core::conninfo::connect_options`] says:
/// a `postgres://` or `postgresql://` URL whose `sslmode` and `sslrootcert`
/// behave as in libpq, and whose host list is tried in order
/// ([`crate::connect`]).
pub async fn migrate(database_url: &str) -> Result<MigrateReport, MaintError> {
    // A dedicated connection: the session lock must not travel back into a
    // pool while held.
    let info = awa_core::conninfo::connect_options(database_url)?;
    let mut conn = crate::connect::connect(&info).await?;
    sqlx::query(include_str!("../sql/migration_lock.sql"))
        .execute(&mut conn)
        .await?;
    let result = migrate_locked(&mut conn).await;
    // Closing the session would release the lock too; unlocking explicitly
    // keeps a reused connection (none today) honest.
    let _ = sqlx::query(include_str!("../sql/migration_unlock.sql"))
        .execute(&mut conn)
        .await;
    let _ = conn.close().await;
    result
}

async fn migrate_locked(conn: &mut PgConnection) -> Result<MigrateReport, MaintError> {
    let from = check_compatible(conn).await?;
    let applied_rows: Vec<(i32, String)> = if from.is_some() {
        sqlx::query_as(include_str!("../sql/applied_migrations.sql"))
            .fetch_all(&mut *conn)
            .await?
    } else {
        Vec::new()
    };
    let mut applied = Vec::new();
    for m in migrations() {
        if let Some((_, checksum)) = applied_rows.iter().find(|(v, _)| *v == m.version) {
            if *checksum != m.checksum() {
                tracing::warn!(
                    version = m.version,
                    "applied migration differs from this binary's copy; the database keeps what was applied"
                );
            }
            continue;
        }
        let span = tracing::info_span!(
            "migration",
            version = m.version,
            description = m.description
        );
        apply(conn, &m).instrument(span).await?;
        applied.push(m.version);
    }
    Ok(MigrateReport {
        from,
        to: LATEST_VERSION,
        applied,
    })
}

/// One migration and its record, in one transaction.
async fn apply(conn: &mut PgConnection, m: &Migration) -> Result<(), MaintError> {
    let mut tx = conn.begin().await?;
    sqlx::raw_sql(sqlx::AssertSqlSafe(m.sql.clone()))
        .execute(&mut *tx)
        .await?;
    sqlx::query(include_str!("../sql/record_migration.sql"))
        .bind(m.version)
        .bind(m.description)
        .bind(m.checksum())
        .execute(&mut *tx)
        .await?;
    tx.commit().await?;
    tracing::info!("applied");
    Ok(())
}
