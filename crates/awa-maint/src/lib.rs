//! Composition of the planes: the migration set, the substrate installer,
//! and (from the job path on) the maintenance leader.
//!
//! Owns: the ordered list of migrations and the SQL helper
//! `awa.install_queue_storage_substrate(...)`, which calls each plane's
//! installer. It is the only crate that issues DDL at run time.
//!
//! Does not own: any table. Every table is declared by the plane that owns
//! it; this crate decides only the order in which they are installed.

pub mod connect;
pub mod cron;
mod error;
pub mod leader;
pub mod migrate;
mod shutdown;
pub mod substrate;
pub mod tasks;

pub use error::MaintError;
pub use migrate::{LATEST_VERSION, MigrateReport, Migration, migrate, migrate_to, migrations};
pub use shutdown::shutdown_signal;

/// A fresh, migrated database for one test (feature `test-support`).
#[cfg(feature = "test-support")]
pub async fn migrated_test_db() -> Result<awa_harness::TestDb, awa_harness::HarnessError> {
    let key = format!("awa-migrated-{}", migrate::fingerprint());
    awa_harness::TestDb::new(&key, |url| async move {
        migrate(&url)
            .await
            .map(|_| ())
            .map_err(|e| Box::new(e) as Box<dyn std::error::Error + Send + Sync>)
    })
    .await
}
