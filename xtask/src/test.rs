//! `cargo xtask test`: one throwaway cluster for the whole suite.
//!
//! Without this, each test binary starts its own cluster (the harness does
//! that by itself); sharing one through DATABASE_URL saves a cluster start
//! per binary. Per-test databases keep tests isolated either way.

use crate::BoxError;
use awa_harness::PgServer;
use std::process::{Command, ExitCode};

pub async fn run(args: Vec<String>) -> Result<ExitCode, BoxError> {
    let server = PgServer::shared().await?;
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let status = Command::new(cargo)
        .args(["test", "--workspace"])
        .args(&args)
        .env("DATABASE_URL", server.url())
        .status()?;
    drop(server);
    Ok(if status.success() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}
