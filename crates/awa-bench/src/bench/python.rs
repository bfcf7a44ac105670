//! Scenario `python` (only when asked for: `--scenario python`): no-op
//! handler throughput of the Python client against the Rust runtime's
//! own, in one Python process on one fresh database: a Rust no-op
//! handler, then Python sync and async no-op handlers, each draining a
//! queue filled before its worker starts
//! (`crates/awa-python/bench/noop_throughput.py`). The wheel is built
//! into `target/py-venv` first, in the profile of this xtask build.

use super::Ctx;
use super::fmt::num;
use super::system::System;
use crate::BoxError;

const JOBS: u64 = 20_000;
const QUICK_JOBS: u64 = 500;
const CONCURRENCY: usize = 32;

#[derive(Debug, Clone, serde::Deserialize, serde::Serialize)]
pub struct ModeRun {
    pub jobs: u64,
    pub seconds: f64,
    pub jobs_per_s: f64,
}

#[derive(Debug, Clone, serde::Serialize)]
pub struct PythonReport {
    pub jobs: u64,
    pub concurrency: usize,
    /// The wheel's cargo profile (debug or release).
    pub profile: &'static str,
    pub rust: ModeRun,
    pub python_sync: ModeRun,
    pub python_async: ModeRun,
    /// Python jobs/s over Rust jobs/s.
    pub sync_ratio: f64,
    pub async_ratio: f64,
}

#[derive(serde::Deserialize)]
struct Measured {
    rust: ModeRun,
    python_sync: ModeRun,
    python_async: ModeRun,
}

pub async fn run(ctx: &Ctx) -> Result<PythonReport, BoxError> {
    let jobs = if ctx.quick { QUICK_JOBS } else { JOBS };
    let release = !cfg!(debug_assertions);
    ctx.say(format!(
        "\n== python: {jobs} no-op jobs each on a Rust handler, a sync and an async Python \
         handler (concurrency {CONCURRENCY}, one process)"
    ));
    let venv = tokio::task::spawn_blocking(move || -> Result<_, String> {
        let venv = crate::python::ensure_venv().map_err(|e| e.to_string())?;
        crate::python::install_wheel(&venv, release).map_err(|e| e.to_string())?;
        Ok(venv)
    })
    .await??;
    let db = ctx.fresh_db(System::Awa).await?;
    let out = tokio::process::Command::new(crate::python::python(&venv))
        .arg(crate::python::crate_dir().join("bench/noop_throughput.py"))
        .arg(db.url())
        .arg(jobs.to_string())
        .arg(CONCURRENCY.to_string())
        .stderr(std::process::Stdio::inherit())
        .output()
        .await?;
    if !out.status.success() {
        return Err(format!("the Python benchmark failed ({})", out.status).into());
    }
    let m: Measured = serde_json::from_slice(&out.stdout)
        .map_err(|e| format!("the Python benchmark printed no result: {e}"))?;
    let ratio = |p: &ModeRun| {
        if m.rust.jobs_per_s > 0.0 {
            p.jobs_per_s / m.rust.jobs_per_s
        } else {
            0.0
        }
    };
    let report = PythonReport {
        jobs,
        concurrency: CONCURRENCY,
        profile: if release { "release" } else { "debug" },
        sync_ratio: ratio(&m.python_sync),
        async_ratio: ratio(&m.python_async),
        rust: m.rust,
        python_sync: m.python_sync,
        python_async: m.python_async,
    };
    for (name, run) in [
        ("rust no-op", &report.rust),
        ("python sync no-op", &report.python_sync),
        ("python async no-op", &report.python_async),
    ] {
        ctx.say(format!(
            "  {name:<20} {} jobs in {:.2} s: {} jobs/s",
            run.jobs,
            run.seconds,
            num(run.jobs_per_s)
        ));
    }
    ctx.say(format!(
        "  python / rust: sync {:.2}, async {:.2}",
        report.sync_ratio, report.async_ratio
    ));
    Ok(report)
}
