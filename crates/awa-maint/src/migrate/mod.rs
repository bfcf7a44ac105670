//! Versioned, forward-only migrations, embedded in the binary.
//!
//! Two ways reach the newest version, and a test proves they agree:
//!
//! - an empty database gets a **fresh install** of the current sources
//!   (every plane's `.sql` files, [`fresh_install`]), recorded as the newest
//!   version;
//! - a database at version `k` gets the **numbered steps** `k+1 ..= newest`
//!   ([`steps`], frozen files in `crates/awa-maint/migrations/`), each in a
//!   transaction of its own.
//!
//! `tests/maint/upgrade.rs` brings a database from version 1 through every step
//! and compares its catalog ([`schema_snapshot`]: tables, columns,
//! constraints, indexes, functions, grants, templates) with a fresh
//! install; it fails when a source changed without a step that carries the
//! change. A session advisory lock serializes migrators, so many processes
//! starting at once is safe; a database newer than this binary is refused
//! rather than touched.

pub mod draft;
mod fresh;
mod steps;

use crate::MaintError;
use sha2::{Digest, Sha256};
use sqlx::{Connection, PgConnection};
use std::path::{Path, PathBuf};
use tracing::Instrument;

/// One migration: a numbered step, or the fresh install of a version.
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

/// The description recorded for a fresh install, which stands for every
/// step up to its version at once.
pub const FRESH_INSTALL: &str = "fresh install";

/// The numbered steps, oldest first, as released.
pub fn steps() -> Vec<Migration> {
    steps::STEPS
        .iter()
        .map(|(version, description, sql)| Migration {
            version: *version,
            description,
            sql: (*sql).to_string(),
        })
        .collect()
}

/// The numbered steps (kept under its old name: the migration set an
/// external runner applies in order).
pub fn migrations() -> Vec<Migration> {
    steps()
}

/// The newest schema version this binary knows.
pub const LATEST_VERSION: i32 = steps::STEPS.len() as i32;

/// A fresh install of the newest version, from the current sources.
pub fn fresh_install() -> Migration {
    Migration {
        version: LATEST_VERSION,
        description: FRESH_INSTALL,
        sql: fresh::sql(),
    }
}

/// What `migrate` did.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct MigrateReport {
    /// Version before migrating (`None`: a fresh database).
    pub from: Option<i32>,
    pub to: i32,
    /// Versions applied: the steps, or the newest version alone for a
    /// fresh install.
    pub applied: Vec<i32>,
}

/// A digest of the fresh install and every step: changes whenever any of
/// them does, so cached template databases are never stale.
pub fn fingerprint() -> String {
    let mut hasher = Sha256::new();
    hasher.update(fresh::sql().as_bytes());
    for m in steps() {
        hasher.update(m.sql.as_bytes());
    }
    hasher
        .finalize()
        .iter()
        .take(8)
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// The fresh install as one script for an empty database (`awa migrate
/// --sql`), in one transaction, recording the newest version.
pub fn full_sql() -> String {
    format!("BEGIN;\n{}COMMIT;\n", fresh_install().script())
}

/// Steps `from + 1 ..= to` as one script, each in its own transaction
/// (`awa migrate --sql --from N --to M`; `from` 0 is an empty database).
pub fn steps_sql(from: i32, to: i32) -> Result<String, MaintError> {
    if from < 0 || to > LATEST_VERSION || from >= to {
        return Err(MaintError::StepRange {
            from,
            to,
            known: LATEST_VERSION,
        });
    }
    Ok(steps()
        .iter()
        .filter(|m| m.version > from && m.version <= to)
        .map(|m| format!("BEGIN;\n{}COMMIT;\n\n", m.script()))
        .collect())
}

/// Write one file per numbered step into `dir` (`awa migrate
/// --extract-to`): an external runner applies them in order, on an empty
/// database as on one it migrated before. Each file records its own
/// version so the runner leaves the database in the state `awa migrate`
/// would.
pub fn extract_to(dir: &Path) -> Result<Vec<PathBuf>, MaintError> {
    std::fs::create_dir_all(dir)?;
    let mut written = Vec::new();
    for m in steps() {
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

/// What processes that run jobs need: a database at exactly this binary's
/// version (not migrated, older and newer are each refused with what to
/// do).
pub async fn require_current(conn: &mut PgConnection) -> Result<i32, MaintError> {
    match check_compatible(conn).await? {
        None => Err(MaintError::NotMigrated),
        Some(found) if found < LATEST_VERSION => Err(MaintError::SchemaTooOld {
            found,
            known: LATEST_VERSION,
        }),
        Some(found) => Ok(found),
    }
}

/// Bring the database at `database_url` to the newest version: a fresh
/// install when it is empty, else the missing steps.
///
/// `database_url` is read as [`awa_core::conninfo::connect_options`] says:
/// a `postgres://` or `postgresql://` URL whose `sslmode` and `sslrootcert`
/// behave as in libpq, and whose host list is tried in order
/// ([`crate::connect`]).
pub async fn migrate(database_url: &str) -> Result<MigrateReport, MaintError> {
    with_lock(database_url, |conn| {
        Box::pin(async move { migrate_locked(conn, None).await })
    })
    .await
}

/// Bring the database to `target` through the numbered steps only, also
/// from empty (version 1 first). The upgrade test's path, and an operator's
/// way to stop at an intermediate version; never goes backwards.
pub async fn migrate_to(database_url: &str, target: i32) -> Result<MigrateReport, MaintError> {
    if !(1..=LATEST_VERSION).contains(&target) {
        return Err(MaintError::StepRange {
            from: 0,
            to: target,
            known: LATEST_VERSION,
        });
    }
    with_lock(database_url, |conn| {
        Box::pin(async move { migrate_locked(conn, Some(target)).await })
    })
    .await
}

type Locked<'a> = std::pin::Pin<
    Box<dyn std::future::Future<Output = Result<MigrateReport, MaintError>> + Send + 'a>,
>;

async fn with_lock(
    database_url: &str,
    work: impl for<'a> FnOnce(&'a mut PgConnection) -> Locked<'a>,
) -> Result<MigrateReport, MaintError> {
    // A dedicated connection: the session lock must not travel back into a
    // pool while held.
    let info = awa_core::conninfo::connect_options(database_url)?;
    let mut conn = crate::connect::connect(&info).await?;
    sqlx::query(include_str!("../../sql/migration_lock.sql"))
        .execute(&mut conn)
        .await?;
    let result = work(&mut conn).await;
    // Closing the session would release the lock too; unlocking explicitly
    // keeps a reused connection (none today) honest.
    let _ = sqlx::query(include_str!("../../sql/migration_unlock.sql"))
        .execute(&mut conn)
        .await;
    let _ = conn.close().await;
    result
}

/// `target`: `None` for the newest version by the shortest path (a fresh
/// install when empty), `Some(v)` for version `v` through the steps.
async fn migrate_locked(
    conn: &mut PgConnection,
    target: Option<i32>,
) -> Result<MigrateReport, MaintError> {
    let from = check_compatible(conn).await?;
    let to = target.unwrap_or(LATEST_VERSION);
    if from.is_none() && target.is_none() {
        let span = tracing::info_span!("migration", version = LATEST_VERSION, fresh = true);
        apply(conn, &fresh_install()).instrument(span).await?;
        return Ok(MigrateReport {
            from,
            to,
            applied: vec![LATEST_VERSION],
        });
    }
    if from.is_some() {
        warn_on_drift(conn).await?;
    }
    let mut applied = Vec::new();
    for m in steps() {
        if m.version <= from.unwrap_or(0) || m.version > to {
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
        to: to.max(from.unwrap_or(0)),
        applied,
    })
}

/// A recorded step whose text differs from this binary's copy was edited
/// after release: say so (the database keeps what was applied).
async fn warn_on_drift(conn: &mut PgConnection) -> Result<(), MaintError> {
    let applied: Vec<(i32, String, String)> =
        sqlx::query_as(include_str!("../../sql/applied_migrations.sql"))
            .fetch_all(&mut *conn)
            .await?;
    for (version, description, checksum) in applied {
        if description == FRESH_INSTALL {
            continue;
        }
        if let Some(m) = steps().iter().find(|m| m.version == version)
            && m.checksum() != checksum
        {
            tracing::warn!(
                version,
                "applied migration differs from this binary's copy; the database keeps what was applied"
            );
        }
    }
    Ok(())
}

/// One migration and its record, in one transaction.
async fn apply(conn: &mut PgConnection, m: &Migration) -> Result<(), MaintError> {
    let mut tx = conn.begin().await?;
    sqlx::raw_sql(sqlx::AssertSqlSafe(m.sql.clone()))
        .execute(&mut *tx)
        .await?;
    sqlx::query(include_str!("../../sql/record_migration.sql"))
        .bind(m.version)
        .bind(m.description)
        .bind(m.checksum())
        .execute(&mut *tx)
        .await?;
    tx.commit().await?;
    tracing::info!("applied");
    Ok(())
}

/// Everything a migration can change in this database, one sorted line per
/// fact (see `sql/schema_snapshot.sql`): two databases with equal
/// snapshots have the same schema, functions, grants and templates.
pub async fn schema_snapshot(conn: &mut PgConnection) -> Result<Vec<String>, MaintError> {
    Ok(
        sqlx::query_scalar(include_str!("../../sql/schema_snapshot.sql"))
            .fetch_all(conn)
            .await?,
    )
}
