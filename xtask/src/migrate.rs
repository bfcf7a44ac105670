//! `cargo xtask migrate`

use crate::BoxError;
use awa_harness::{PgServer, ServerKind};
use std::process::ExitCode;

pub async fn run() -> Result<ExitCode, BoxError> {
    let server = PgServer::shared().await?;
    let url = server.url().to_string();
    if server.kind() != ServerKind::External {
        println!(
            "throwaway PostgreSQL at {} (removed when this command exits)",
            awa_core::redact::redact_conninfo(&url)
        );
    }
    let report = awa_maint::migrate(&url).await?;
    if report.applied.is_empty() {
        println!("schema is up to date at version {}", report.to);
    } else {
        println!(
            "applied migrations {:?}; schema is at version {}",
            report.applied, report.to
        );
    }
    Ok(ExitCode::SUCCESS)
}
