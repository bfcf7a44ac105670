//! Scenario `cost`: the price of one job. At 200/s and 1,000/s, one job per
//! transaction from a separate producer process to a separate worker
//! process (scenario `procs`' shape, 10 s per rate), then a plain INSERT +
//! COMMIT of the same payload at the same rate from the same producer with
//! nothing running the rows (`plain.rs`), then, with scenario `baseline`,
//! the baseline. Each in a fresh database, one after another on the same
//! server.
//!
//! Server CPU per job is the cluster's own accounting, not the client's:
//! user + system time of the postmaster and every child process, live and
//! reaped, from /proc before and after the run (`pgstats`), over the jobs
//! completed (ours, the baseline) or inserted (plain). Background
//! processes (checkpointer, WAL writer, ...) are included on both sides, as
//! is our maintenance leader's work. Without a local cluster (a
//! DATABASE_URL server elsewhere) there is no CPU figure.
//!
//! Latency is reported twice: pickup (`ready_at` to handler start) and end
//! to end (`ready_at` to the commit of the job's result). `ready_at` is
//! stamped inside the producer's transaction, before its commit.
//!
//! With `--explain`, each of our runs lists the statements that took the
//! most server time (pg_stat_statements, top-level and nested).

use super::Ctx;
use super::procs::{self, ProcsRun};
use super::system::System;
use crate::BoxError;

/// Rates measured (the issue's: a few hundred jobs a second, one per
/// request transaction, and 1,000/s).
const RATES: &[u64] = &[200, 1_000];
const QUICK_RATES: &[u64] = &[200];
const SECONDS: u64 = 10;
const QUICK_SECONDS: u64 = 1;

#[derive(Debug, Clone, serde::Serialize)]
pub struct CostRun {
    pub offered_rate: u64,
    pub ours: ProcsRun,
    /// The plain INSERT + COMMIT at the same rate.
    pub plain: ProcsRun,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub baseline: Option<ProcsRun>,
    /// Server CPU per job, ours / plain (None without CPU figures).
    pub ours_vs_plain: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub baseline_vs_plain: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ours_vs_baseline: Option<f64>,
}

impl CostRun {
    /// Server CPU per job of one side, in microseconds.
    pub fn cpu_us(run: &ProcsRun) -> Option<f64> {
        run.cost.cpu_postgres_us_per_job
    }
}

#[derive(Debug, Clone, serde::Serialize)]
pub struct CostReport {
    /// The worker process's concurrency.
    pub worker_concurrency: usize,
    pub runs: Vec<CostRun>,
}

impl CostReport {
    pub fn at(&self, rate: u64) -> Option<&CostRun> {
        self.runs.iter().find(|r| r.offered_rate == rate)
    }
}

fn ratio(a: Option<f64>, b: Option<f64>) -> Option<f64> {
    match (a, b) {
        (Some(a), Some(b)) if b > 0.0 => Some(a / b),
        _ => None,
    }
}

pub async fn run(ctx: &Ctx) -> Result<CostReport, BoxError> {
    let (rates, seconds) = if ctx.quick {
        (QUICK_RATES, QUICK_SECONDS)
    } else {
        (RATES, SECONDS)
    };
    ctx.say(format!(
        "\n== cost: one job per transaction from a producer process to a worker process \
         (1 x {} + maintenance leader), then a plain INSERT + COMMIT of the same payload \
         at the same rate; {} /s; {seconds} s each; server CPU from the cluster's processes",
        procs::CONCURRENCY,
        rates
            .iter()
            .map(u64::to_string)
            .collect::<Vec<_>>()
            .join(", ")
    ));
    if ctx.postmaster_pid.is_none() {
        ctx.note(
            "cost: the server is not a local cluster this process can see in /proc, so there \
             is no server CPU figure",
        );
    }
    let mut runs = Vec::new();
    for &rate in rates {
        let connections = procs::connections_for(ctx, rate);
        let ours = procs::run_rate(ctx, System::Awa, rate, seconds, connections).await?;
        let plain = procs::run_rate(ctx, System::Plain, rate, seconds, connections).await?;
        let baseline = match ctx.baseline {
            Some(completion) => Some(
                procs::run_rate(
                    ctx,
                    System::Baseline(completion),
                    rate,
                    seconds,
                    connections,
                )
                .await?,
            ),
            None => None,
        };
        let (o, p) = (CostRun::cpu_us(&ours), CostRun::cpu_us(&plain));
        let b = baseline.as_ref().and_then(CostRun::cpu_us);
        let run = CostRun {
            offered_rate: rate,
            ours_vs_plain: ratio(o, p),
            baseline_vs_plain: baseline.as_ref().and(ratio(b, p)),
            ours_vs_baseline: baseline.as_ref().and(ratio(o, b)),
            ours,
            plain,
            baseline,
        };
        ctx.say(format!(
            "   cost {}/s: server CPU per job ours {} us, plain insert {} us{}: {}",
            super::fmt::rate(rate),
            o.map_or("-".into(), |v| format!("{v:.0}")),
            p.map_or("-".into(), |v| format!("{v:.0}")),
            b.map_or(String::new(), |v| format!(", baseline {v:.0} us")),
            run.ours_vs_plain
                .map_or("-".into(), |x| format!("{x:.1}x the plain insert")),
        ));
        runs.push(run);
    }
    Ok(CostReport {
        worker_concurrency: procs::CONCURRENCY,
        runs,
    })
}
