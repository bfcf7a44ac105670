//! Scenario `pinned`: steady at 2,000 jobs/s twice, on fresh databases:
//! once as is, once while another connection holds
//! `BEGIN ISOLATION LEVEL REPEATABLE READ; SELECT count(*) FROM
//! awa.terminal_jobs;` open for the whole run (the long-running report or
//! forgotten session that keeps every dead row version alive).

use super::Ctx;
use super::steady::{self, SteadyOptions, SteadyRun};
use crate::BoxError;

pub const RATE: u64 = 2_000;

#[derive(Debug, Clone, serde::Serialize)]
pub struct PinnedReport {
    pub rate: u64,
    pub unpinned: SteadyRun,
    pub pinned: SteadyRun,
    /// pinned / unpinned completions per second.
    pub throughput_ratio: f64,
    /// pinned / unpinned latency.
    pub p50_ratio: f64,
    pub p95_ratio: f64,
    pub p99_ratio: f64,
}

pub async fn run(ctx: &Ctx) -> Result<PinnedReport, BoxError> {
    ctx.say(format!(
        "\n== pinned: steady {RATE}/s without, then with, a REPEATABLE READ snapshot held open"
    ));
    let mut opts = SteadyOptions::new(ctx, RATE);
    opts.label = format!("unpinned {RATE}/s");
    let unpinned = steady::run_rate(ctx, opts.clone()).await?;
    opts.label = format!("pinned {RATE}/s");
    opts.pin = true;
    let pinned = steady::run_rate(ctx, opts).await?;
    let ratio = |a: f64, b: f64| if b > 0.0 { a / b } else { f64::NAN };
    Ok(PinnedReport {
        rate: RATE,
        throughput_ratio: ratio(pinned.completions_per_s, unpinned.completions_per_s),
        p50_ratio: ratio(pinned.latency.p50, unpinned.latency.p50),
        p95_ratio: ratio(pinned.latency.p95, unpinned.latency.p95),
        p99_ratio: ratio(pinned.latency.p99, unpinned.latency.p99),
        unpinned,
        pinned,
    })
}
