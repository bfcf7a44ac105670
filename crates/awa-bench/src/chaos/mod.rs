//! `cargo xtask chaos`: real `awa` worker processes under load while
//! faults are injected (kill -9 of workers and of the maintenance leader,
//! an immediate PostgreSQL restart, a primary failover to a synchronous
//! standby), plus poison results and an orphan job; every job carries a
//! unique id `n`, and the run fails unless each id completed exactly once.
//! `cargo xtask test` runs the short form.
//!
//! * `scenario` — the named scenarios and their short/long plans
//! * `runner` — one run, start to verdict
//! * `procs`, `faults`, `load` — workers, faults, producer
//! * `servers` — the run's PostgreSQL servers (a primary and standby for
//!   the failover scenario) and the failover itself
//! * `ledger` (+ `sql/chaos/`) — trigger-fed tables no ring reclaims
//! * `tally`, `report` — counting and the summary

mod awa_bin;
mod error;
mod faults;
mod ledger;
mod load;
mod procs;
mod report;
mod runner;
mod scenario;
mod servers;
mod tally;

use crate::BoxError;
use awa_harness::{ClusterOptions, HarnessError, PgServer};
use error::ChaosError;
use scenario::Scenario;
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Debug, clap::Args)]
pub struct ChaosArgs {
    /// Minutes instead of seconds: a longer load and more faults.
    #[arg(long)]
    long: bool,
    /// Length of the load window in seconds (overrides the default of the
    /// short or long form).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..=3600))]
    seconds: Option<u64>,
    /// Run only these scenarios (repeatable). By default every scenario.
    #[arg(long = "scenario", value_enum)]
    scenarios: Vec<Scenario>,
    /// Use this `awa` binary instead of building one.
    #[arg(long, value_name = "PATH")]
    awa: Option<PathBuf>,
}

/// The `awa` binary for a later `chaos --awa PATH` (`cargo xtask test`):
/// built now, and copied out of cargo's way, so that a build running
/// meanwhile cannot replace the file the suite starts processes from.
pub fn awa_binary() -> Result<PathBuf, BoxError> {
    let built = awa_bin::build()?;
    let dir = crate::python::target_dir().join("chaos");
    std::fs::create_dir_all(&dir)?;
    let copy = dir.join("awa");
    // Remove first: the old copy may still be running (ETXTBSY on write).
    let _ = std::fs::remove_file(&copy);
    std::fs::copy(&built, &copy)?;
    Ok(copy)
}

pub async fn run(args: ChaosArgs) -> Result<ExitCode, BoxError> {
    let chosen: Vec<Scenario> = if args.scenarios.is_empty() {
        Scenario::ALL.to_vec()
    } else {
        args.scenarios.clone()
    };
    let bin = match &args.awa {
        Some(path) => path.clone(),
        None => awa_bin::build()?,
    };
    let server = server().await?;
    let mut failed = false;
    for scenario in chosen {
        let plan = scenario.plan(args.long, args.seconds);
        let dir = tempfile::Builder::new()
            .prefix("awa-chaos-")
            .tempdir()
            .map_err(|e| format!("creating a run directory: {e}"))?;
        let report = match runner::run(scenario, &plan, &server, &bin, dir.path()).await {
            Ok(report) => report,
            // A standby needs local server binaries; DATABASE_URL alone
            // cannot give one.
            Err(ChaosError::Harness(e @ HarnessError::NoServer { .. }))
                if scenario == Scenario::Failover =>
            {
                println!("chaos {}: skipped: {e}", scenario.name());
                continue;
            }
            Err(e) => return Err(e.into()),
        };
        print!("{}", report.summary());
        if !report.ok() {
            failed = true;
            println!("  worker logs kept in {}", dir.keep().display());
        }
    }
    Ok(if failed {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
}

/// A cluster of our own, which the restart fault may crash, with commits
/// flushed (the test settings' `synchronous_commit=off` would lose
/// acknowledged jobs in a crash, by design). With DATABASE_URL set, that
/// server, and the restart fault is skipped.
async fn server() -> Result<PgServer, BoxError> {
    if std::env::var("DATABASE_URL").is_ok_and(|u| !u.trim().is_empty()) {
        println!("chaos: using DATABASE_URL; the PostgreSQL restart fault will be skipped");
        return Ok(PgServer::shared().await?);
    }
    let opts = ClusterOptions::for_tests().setting("synchronous_commit", "on");
    Ok(PgServer::start(opts).await?)
}
