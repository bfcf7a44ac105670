//! Scenario `procs`: steady load the way applications produce it. A
//! producer *process* commits one job per transaction (`BEGIN`, enqueue one
//! job, `COMMIT`) at an offered rate, and a separate worker *process* (one
//! worker at concurrency 16, plus the maintenance leader for ours) runs
//! them; neither shares a runtime or a connection pool with the other or
//! with the bench. Both are this binary, started again with the hidden
//! subcommand `bench-proc producer|worker`; they report on stdout, one
//! JSON object per line (progress every 50 ms, then a summary).
//!
//! The producer is open-loop: job `i` is due at `start + i / rate`, and
//! each of its connections takes the next job, waits until it is due and
//! sends it. It has one connection per 50 jobs/s offered (4 to 32), as an
//! application's pool grows with its request rate, unless
//! `--procs-connections` fixes the number. With every connection busy,
//! jobs go late (`start lag`), and the achieved rate falls below the
//! offered one. Latency is the same as
//! steady's: `ready_at` (the baseline's `run_at`) to handler start, which
//! for a job enqueued in a transaction includes its commit.
//!
//! Rates 200, 500 and 1,000/s always run; then 2,000, 3,000, 5,000, ... for
//! each system while it keeps up (the producer offered 95 % of its jobs and
//! the worker completed 95 % of the offered rate). The headline is the
//! highest rate kept up with p95 below 50 ms. Each run has a fresh
//! database; with scenario `baseline` the baseline's run follows ours.
//!
//! * `wire` — what the bench and its two child processes say to each
//!   other: the children's command line and the JSON lines they print
//! * `child` — the children's side (`bench-proc producer|worker`)
//! * `parent` — the bench's side: one run at one rate

mod child;
mod parent;
mod wire;

use super::Ctx;
use super::climb::{RateRun, at, best_rate, climb};
use super::fmt;
use super::pgstats::{self, Cost};
use crate::BoxError;
use crate::fleet::FleetTotals;
use crate::latency::Percentiles;

pub use child::child;
pub use parent::run_rate;
pub use wire::ProcArgs;

/// The worker process's concurrency.
pub const CONCURRENCY: usize = 16;
/// Connections of the producer process by default, each one transaction
/// at a time: one per this many jobs/s offered, within the bounds below.
const JOBS_PER_S_PER_CONNECTION: u64 = 50;
const MIN_CONNECTIONS: usize = 4;
const MAX_CONNECTIONS: usize = 32;
/// Rates always run (500/s places the limit when 1,000/s is not kept up).
const RATES: &[u64] = &[200, 500, 1_000];
/// Then these, while the system keeps up.
const STEPS: &[u64] = &[2_000, 3_000, 5_000, 7_500, 10_000, 15_000];
const QUICK_RATES: &[u64] = &[200];
const SECONDS: u64 = 10;
const QUICK_SECONDS: u64 = 1;
/// Kept up: offered and completed at least this fraction of the rate.
const KEPT_UP: f64 = 0.95;
/// The headline: highest rate kept up with p95 below this.
pub const HEADLINE_P95_MS: f64 = 50.0;
const QUEUE: &str = "procs";

#[derive(Debug, Clone, serde::Serialize)]
pub struct ProcsRun {
    pub offered_rate: u64,
    /// Connections of the producer process.
    pub producer_connections: usize,
    /// How long the producer ran.
    pub seconds: f64,
    pub enqueued: u64,
    pub enqueued_per_s: f64,
    /// Completed while the producer ran, per second: the achieved rate.
    pub completions_per_s: f64,
    /// completions_per_s / offered_rate.
    pub achieved_vs_offered: f64,
    pub drained: bool,
    /// Time after the producer stopped until the last completion.
    pub drain_s: f64,
    /// ready_at -> handler start, every completed job (ms).
    pub latency: Percentiles,
    /// ready_at -> the commit of the job's result (ms): the whole trip, as
    /// the worker's lifecycle hook (ours) or the completion statement's
    /// return (the baseline's) sees it.
    pub end_to_end: Percentiles,
    /// The producer's transactions, `BEGIN` to `COMMIT` done (ms).
    pub transaction: Percentiles,
    /// How late the producer started each job against its schedule (ms).
    pub start_lag: Percentiles,
    pub max_depth: u64,
    pub kept_up: bool,
    pub totals: FleetTotals,
    pub producer_cpu_s: Option<f64>,
    pub worker_cpu_s: Option<f64>,
    /// Client CPU includes both child processes.
    pub cost: Cost,
    /// With `--explain` (pg_stat_statements preloaded): the statements
    /// that took the most server time during the run, top-level and
    /// nested, busiest first.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub statements: Vec<pgstats::StatementCost>,
}

impl RateRun for ProcsRun {
    fn rated(&self) -> (u64, bool, f64) {
        (self.offered_rate, self.kept_up, self.latency.p95)
    }
}

#[derive(Debug, Clone, serde::Serialize)]
pub struct ProcsReport {
    /// Fixed by `--procs-connections`; else one per 50 jobs/s offered.
    pub producer_connections: Option<usize>,
    pub worker_concurrency: usize,
    pub runs: Vec<ProcsRun>,
    /// Highest offered rate kept up with p95 < 50 ms.
    pub highest_kept_up: Option<u64>,
    /// At 1,000/s: kept up with p95 < 5 ms.
    pub p95_under_5ms_at_1000: Option<bool>,
}

/// The producer's connections at `rate`: `--procs-connections`, else one
/// per 50 jobs/s offered, 4 to 32.
pub fn connections_for(ctx: &Ctx, rate: u64) -> usize {
    ctx.procs_connections.unwrap_or_else(|| {
        ((rate / JOBS_PER_S_PER_CONNECTION) as usize).clamp(MIN_CONNECTIONS, MAX_CONNECTIONS)
    })
}

/// Ours, and the baseline's when scenario `baseline` is on.
pub async fn run(ctx: &Ctx) -> Result<(ProcsReport, Option<ProcsReport>), BoxError> {
    let (rates, steps, seconds): (&[u64], &[u64], u64) = if ctx.quick {
        (QUICK_RATES, &[], QUICK_SECONDS)
    } else {
        (RATES, STEPS, SECONDS)
    };
    let fixed = ctx.procs_connections;
    let connections = |rate: u64| connections_for(ctx, rate);
    ctx.say(format!(
        "\n== procs: a producer process committing one job per transaction (connections: {}) \
         and a worker process (1 x {CONCURRENCY} + maintenance leader); offered \
         {}/s, then up while kept up; {seconds} s per rate",
        match fixed {
            Some(n) => n.to_string(),
            None => format!(
                "1 per {JOBS_PER_S_PER_CONNECTION} jobs/s offered, {MIN_CONNECTIONS} to \
                 {MAX_CONNECTIONS}"
            ),
        },
        fmt::list(rates)
    ));
    let runs = climb(ctx, rates, steps, async |system, rate| {
        run_rate(ctx, system, rate, seconds, connections(rate)).await
    })
    .await?;
    let mut reports = runs.into_iter().map(|runs| ProcsReport {
        producer_connections: fixed,
        worker_concurrency: CONCURRENCY,
        highest_kept_up: best_rate(&runs, HEADLINE_P95_MS),
        p95_under_5ms_at_1000: at(&runs, 1_000).map(|r| r.kept_up && r.latency.p95 < 5.0),
        runs,
    });
    let ours = reports.next().expect("ours always runs");
    Ok((ours, reports.next()))
}
