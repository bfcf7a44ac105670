//! Scenario `steady`: a producer offers jobs at a fixed rate while a worker
//! and a maintenance leader run; completions per second, end-to-end
//! latency (`ready_at` -> handler start) and the deepest queue seen. Each
//! rate runs on a fresh database.
//!
//! The producer wakes every 5 ms and enqueues, in one call, every job due
//! by then (rate x elapsed), so it offers the rate smoothly without one
//! round trip per job. Queue depth is sampled every 250 ms as jobs
//! committed by the producer minus jobs claimed by the worker, counted in
//! process: `queue_stats` reads the `jobs` view, whose cost grows with the
//! history kept, and would disturb what it measures.
//!
//! With scenario `baseline`, the baseline's run at each rate follows ours
//! at once; faster rates go on for each system while it keeps up.

use super::Ctx;
use super::climb::{RateRun, best_rate, climb};
use super::fmt;
use super::pgstats::{self, Cost};
use super::system::System;
use crate::BoxError;
use crate::fleet::{self, FleetConfig, FleetTotals};
use crate::latency::{LatencyRecorder, Percentiles};
use awa_core::QueueName;
use sqlx::{Connection, PgConnection};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

const TICK: Duration = Duration::from_millis(5);
const MAX_BATCH: u64 = 5_000;
const SAMPLE: Duration = Duration::from_millis(250);
pub const WORKERS: usize = 1;
pub const CONCURRENCY: usize = 64;
/// Rates always run (normal mode); faster ones follow while sustained.
const RATES: &[u64] = &[200, 1_000, 2_000, 5_000, 10_000];
const MORE_RATES: &[u64] = &[15_000, 20_000, 30_000, 40_000, 60_000, 80_000, 100_000];
const QUICK_RATES: &[u64] = &[200, 1_000];
/// Sustained: the producer kept up, and completions kept up with it.
const KEPT_UP: f64 = 0.95;
/// The headline: highest rate sustained with p95 below this.
pub const HEADLINE_P95_MS: f64 = 100.0;

#[derive(Debug, Clone)]
pub struct SteadyOptions {
    pub label: String,
    pub rate: u64,
    pub duration: Duration,
    /// Stop after this many jobs (soak); default rate x duration.
    pub jobs: Option<u64>,
    /// Hold a REPEATABLE READ snapshot open for the whole run.
    pub pin: bool,
    /// Also sample dead tuples and sizes this often (soak).
    pub stats_every: Option<Duration>,
    pub drain_timeout: Duration,
}

impl SteadyOptions {
    pub fn new(ctx: &Ctx, rate: u64) -> Self {
        Self {
            label: format!("steady {rate}/s"),
            rate,
            duration: if ctx.quick {
                Duration::from_secs(1)
            } else {
                Duration::from_secs(10)
            },
            jobs: None,
            pin: false,
            stats_every: None,
            drain_timeout: if ctx.quick {
                Duration::from_secs(10)
            } else {
                Duration::from_secs(30)
            },
        }
    }
}

#[derive(Debug, Clone, serde::Serialize)]
pub struct SteadyRun {
    pub offered_rate: u64,
    pub pinned: bool,
    /// How long the producer ran.
    pub seconds: f64,
    pub enqueued: u64,
    pub enqueued_per_s: f64,
    /// Completed while the producer ran, per second.
    pub completions_per_s: f64,
    /// Every enqueued job completed within the drain timeout afterwards.
    pub drained: bool,
    /// Time after the producer stopped until the last completion.
    pub drain_s: f64,
    /// ready_at -> handler start, every completed job (ms).
    pub latency: Percentiles,
    /// The producer's enqueue calls, round trip including commit (ms): the
    /// part of the latency before the worker can see a job at all.
    pub enqueue_call: Percentiles,
    pub max_depth: u64,
    pub sustained: bool,
    pub totals: FleetTotals,
    pub cost: Cost,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub samples: Vec<Sample>,
}

impl RateRun for SteadyRun {
    fn rated(&self) -> (u64, bool, f64) {
        (self.offered_rate, self.sustained, self.latency.p95)
    }
}

/// A soak sample (statistics may lag by up to ~10 s; see pgstats).
#[derive(Debug, Clone, serde::Serialize)]
pub struct Sample {
    pub t_s: f64,
    pub enqueued: u64,
    pub completed: u64,
    pub depth: u64,
    pub dead_tuples: i64,
    pub awa_bytes: i64,
}

#[derive(Debug, Clone, serde::Serialize)]
pub struct SteadyReport {
    pub workers: usize,
    pub concurrency: usize,
    pub runs: Vec<SteadyRun>,
    /// Highest offered rate sustained with p95 < 100 ms.
    pub headline_rate: Option<u64>,
    /// Highest offered rate sustained with p95 < 50 ms.
    pub rate_p95_under_50ms: Option<u64>,
}

/// Ours, and the baseline's when scenario `baseline` is on.
pub async fn run(ctx: &Ctx) -> Result<(SteadyReport, Option<SteadyReport>), BoxError> {
    let (rates, more): (&[u64], &[u64]) = if ctx.quick {
        (QUICK_RATES, &[])
    } else {
        (RATES, MORE_RATES)
    };
    ctx.say(format!(
        "\n== steady: offered rates {}, then up until saturated; {WORKERS} worker x \
         {CONCURRENCY} + maintenance leader",
        fmt::list(rates)
    ));
    let runs = climb(ctx, rates, more, async |system, rate| {
        run_rate(ctx, system, SteadyOptions::new(ctx, rate)).await
    })
    .await?;
    let mut reports = runs.into_iter().map(|runs| SteadyReport {
        workers: WORKERS,
        concurrency: CONCURRENCY,
        headline_rate: best_rate(&runs, HEADLINE_P95_MS),
        rate_p95_under_50ms: best_rate(&runs, 50.0),
        runs,
    });
    let ours = reports.next().expect("ours always runs");
    Ok((ours, reports.next()))
}

/// Holds `BEGIN ISOLATION LEVEL REPEATABLE READ;` and the system's pin
/// query (for ours `SELECT count(*) FROM awa.terminal_jobs;`) open: the
/// oldest snapshot in the database.
async fn pin(url: &str, system: System) -> Result<PgConnection, BoxError> {
    let mut conn = PgConnection::connect(url).await?;
    sqlx::raw_sql("BEGIN ISOLATION LEVEL REPEATABLE READ")
        .execute(&mut conn)
        .await?;
    let _: i64 = sqlx::query_scalar(system.pin_query())
        .fetch_one(&mut conn)
        .await?;
    Ok(conn)
}

pub async fn run_rate(
    ctx: &Ctx,
    system: System,
    opts: SteadyOptions,
) -> Result<SteadyRun, BoxError> {
    let db = ctx.fresh_db(system).await?;
    let queue = QueueName::new("steady")?;
    let total = opts
        .jobs
        .unwrap_or((opts.rate as f64 * opts.duration.as_secs_f64()) as u64);
    let duration = opts.jobs.map_or(opts.duration, |j| {
        Duration::from_secs_f64(j as f64 / opts.rate as f64)
    });
    let before = pgstats::settled(ctx, &db).await?;
    let pinned = match opts.pin {
        true => Some(pin(db.url(), system).await?),
        false => None,
    };
    let pool = fleet::pool(db.url(), 12).await?;
    let latency = LatencyRecorder::new();
    let fleet_ = system.start(
        &pool,
        &FleetConfig {
            queue: queue.clone(),
            workers: WORKERS,
            concurrency: CONCURRENCY,
            leader: true,
            end_to_end: None,
            job_time: std::time::Duration::ZERO,
        },
        latency.clone(),
    );
    // Let the worker connect and LISTEN, and the leader get elected.
    tokio::time::sleep(Duration::from_millis(500)).await;

    let bar = ctx.bar(total, opts.label.clone());
    let produced = Arc::new(AtomicU64::new(0));
    let calls = Arc::new(std::sync::Mutex::new(Vec::new()));
    let producer = tokio::spawn(produce(
        pool.clone(),
        Offer {
            system,
            queue,
            rate: opts.rate,
            total,
            duration,
        },
        produced.clone(),
        calls.clone(),
    ));
    let started = Instant::now();
    let completed_at_start = fleet_.completed();
    let mut max_depth = 0u64;
    let mut samples = Vec::new();
    let mut next_stats = opts.stats_every.map(|every| started + every);
    let mut next_sample = started;
    let window = loop {
        if producer.is_finished() {
            break producer.await??;
        }
        if Instant::now() < next_sample {
            tokio::time::sleep(Duration::from_millis(5)).await;
            continue;
        }
        next_sample += SAMPLE;
        let depth = produced
            .load(Ordering::Relaxed)
            .saturating_sub(fleet_.claimed());
        max_depth = max_depth.max(depth);
        bar.set_position(fleet_.completed());
        if let Some(at) = next_stats
            && Instant::now() >= at
        {
            let snap = pgstats::now(ctx, &db).await?;
            samples.push(Sample {
                t_s: started.elapsed().as_secs_f64(),
                enqueued: produced.load(Ordering::Relaxed),
                completed: fleet_.completed(),
                depth,
                dead_tuples: snap.dead_tuples(),
                awa_bytes: snap.awa_bytes(),
            });
            next_stats = opts.stats_every.map(|every| at + every);
        }
    };
    let completed_in_window = fleet_.completed() - completed_at_start;
    let enqueued = produced.load(Ordering::Relaxed);
    max_depth = max_depth.max(enqueued.saturating_sub(fleet_.claimed()));

    let stopped = Instant::now();
    let mut drained = false;
    while stopped.elapsed() < opts.drain_timeout {
        let done = fleet_.completed();
        bar.set_position(done);
        if done >= enqueued {
            drained = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let drain_s = stopped.elapsed().as_secs_f64();
    bar.finish_and_clear();
    let totals = fleet_.stop().await?;
    if let Some(mut conn) = pinned {
        let _ = sqlx::raw_sql("ROLLBACK").execute(&mut conn).await;
        let _ = conn.close().await;
    }
    pool.close().await;
    let after = pgstats::settled(ctx, &db).await?;

    let seconds = window.as_secs_f64();
    let lat = latency.percentiles();
    let sustained = enqueued as f64 >= KEPT_UP * opts.rate as f64 * duration.as_secs_f64()
        && completed_in_window as f64 >= KEPT_UP * enqueued as f64;
    let run = SteadyRun {
        offered_rate: opts.rate,
        pinned: opts.pin,
        seconds,
        enqueued,
        enqueued_per_s: enqueued as f64 / seconds,
        completions_per_s: completed_in_window as f64 / seconds,
        drained,
        drain_s,
        latency: lat,
        enqueue_call: Percentiles::of(&mut calls.lock().expect("calls lock")),
        max_depth,
        sustained,
        totals,
        cost: pgstats::cost(&before, &after, totals.completed),
        samples,
    };
    ctx.say(format!(
        "   {:<22} offered {:>7.0}/s  completed {:>7.0}/s  p50 {:>7.2} ms  p95 {:>7.2} ms  \
         p99 {:>7.2} ms  max depth {:>6}{}{}{}",
        opts.label,
        run.enqueued_per_s,
        run.completions_per_s,
        lat.p50,
        lat.p95,
        lat.p99,
        max_depth,
        if sustained { "" } else { "  (not sustained)" },
        fmt::undrained(drained, opts.drain_timeout),
        system.tag()
    ));
    Ok(run)
}

/// What the steady producer offers: `rate` jobs/s of `queue` to `system`
/// until `total` are in or `duration` is over.
struct Offer {
    system: System,
    queue: QueueName,
    rate: u64,
    total: u64,
    duration: Duration,
}

/// Runs the offer; returns how long it ran.
async fn produce(
    pool: sqlx::PgPool,
    offer: Offer,
    produced: Arc<AtomicU64>,
    calls: Arc<std::sync::Mutex<Vec<u32>>>,
) -> Result<Duration, BoxError> {
    let Offer {
        system,
        queue,
        rate,
        total,
        duration,
    } = offer;
    let mut conn = pool.acquire().await?;
    let mut tick = tokio::time::interval(TICK);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let start = Instant::now();
    let mut sent = 0u64;
    loop {
        tick.tick().await;
        let elapsed = start.elapsed();
        let due = ((rate as f64 * elapsed.as_secs_f64()) as u64).min(total);
        if due > sent {
            let n = (due - sent).min(MAX_BATCH);
            let batch = system.batch(&queue, sent..sent + n);
            let call = Instant::now();
            batch.send(&mut conn).await?;
            let micros = call.elapsed().as_micros().min(u128::from(u32::MAX)) as u32;
            calls.lock().expect("calls lock").push(micros);
            sent += n;
            produced.store(sent, Ordering::Relaxed);
        }
        if sent >= total || elapsed >= duration {
            return Ok(start.elapsed());
        }
    }
}
