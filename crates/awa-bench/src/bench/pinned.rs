//! Scenario `pinned`: steady at 2,000 jobs/s twice, on fresh databases:
//! once as is, once while another connection holds
//! `BEGIN ISOLATION LEVEL REPEATABLE READ; SELECT count(*) FROM
//! awa.terminal_jobs;` open for the whole run (the long-running report or
//! forgotten session that keeps every dead row version alive). With
//! scenario `baseline`, the baseline's run of each follows ours at once (its
//! pinning session reads its own jobs table; not with `--quick`).

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

/// Ours, and the baseline's when scenario `baseline` is on.
pub async fn run(ctx: &Ctx) -> Result<(PinnedReport, Option<PinnedReport>), BoxError> {
    ctx.say(format!(
        "\n== pinned: steady {RATE}/s without, then with, a REPEATABLE READ snapshot held open"
    ));
    let systems = ctx.systems_unless_quick();
    let mut opts = SteadyOptions::new(ctx, RATE);
    opts.label = format!("unpinned {RATE}/s");
    let mut unpinned = Vec::new();
    for &system in &systems {
        unpinned.push(steady::run_rate(ctx, system, opts.clone()).await?);
    }
    opts.label = format!("pinned {RATE}/s");
    opts.pin = true;
    let mut reports = Vec::new();
    for (&system, unpinned) in systems.iter().zip(unpinned) {
        let pinned = steady::run_rate(ctx, system, opts.clone()).await?;
        reports.push(report(unpinned, pinned));
    }
    let mut reports = reports.into_iter();
    let ours = reports.next().expect("ours always runs");
    Ok((ours, reports.next()))
}

fn report(unpinned: SteadyRun, pinned: SteadyRun) -> PinnedReport {
    let ratio = |a: f64, b: f64| if b > 0.0 { a / b } else { f64::NAN };
    PinnedReport {
        rate: RATE,
        throughput_ratio: ratio(pinned.completions_per_s, unpinned.completions_per_s),
        p50_ratio: ratio(pinned.latency.p50, unpinned.latency.p50),
        p95_ratio: ratio(pinned.latency.p95, unpinned.latency.p95),
        p99_ratio: ratio(pinned.latency.p99, unpinned.latency.p99),
        unpinned,
        pinned,
    }
}
