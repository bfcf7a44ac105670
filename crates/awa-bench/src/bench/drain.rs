//! Scenarios `drain` and `drain-1m`: N no-op jobs enqueued up front (1,000
//! per call), the database vacuumed and analyzed (as autovacuum would have
//! after such an enqueue), then one worker (concurrency 64 or
//! `--drain-concurrency`, default claim batch; `--drain-workers N` for N of
//! them, `--drain-job-ms` for handlers that wait) with its maintenance
//! leader candidate, as `awa worker run` starts by default, completes them
//! as fast as it can. Also the enqueue+drain cost per job. With scenario
//! `baseline`, the baseline's drain of as many jobs follows ours at once,
//! on the same server, vacuumed and analyzed the same way.
//!
//! `drain` drains 200,000 jobs, then runs its dead-tuple phase: 100,000
//! jobs on a database whose tables have autovacuum turned off
//! (`autovacuum_enabled = false`) and which is only analyzed (a VACUUM
//! would remove what it counts), so its dead-tuple count is what the job
//! path leaves behind. `drain-1m` drains 1,000,000.

use super::Ctx;
use super::pgstats::{self, Cost};
use super::system::System;
use crate::BoxError;
use crate::fleet::{self, FleetConfig, FleetTotals};
use crate::latency::LatencyRecorder;
use awa_core::QueueName;
use std::time::{Duration, Instant};

pub const JOBS: u64 = 200_000;
pub const MILLION: u64 = 1_000_000;
/// The dead-tuple phase (the size every drain had before).
pub const DEAD_TUPLE_JOBS: u64 = 100_000;
pub const QUICK_JOBS: u64 = 5_000;
pub const QUICK_MILLION: u64 = 20_000;
pub const QUICK_DEAD_TUPLE_JOBS: u64 = 2_000;
const PRELOAD_BATCH: u64 = 1_000;
const CONCURRENCY: usize = 64;
const STALL: Duration = Duration::from_secs(60);

/// Which drain a run is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// Autovacuum as the server has it; `VACUUM ANALYZE` after the preload.
    Measured,
    /// Autovacuum off on the database's tables; `ANALYZE` only.
    DeadTuples,
}

#[derive(Debug, Clone, serde::Serialize)]
pub struct DrainReport {
    pub jobs: u64,
    pub workers: usize,
    pub concurrency: usize,
    pub claim_batch: usize,
    /// Autovacuum could run on the database's tables (false: the
    /// dead-tuple phase, or a server with autovacuum off).
    pub autovacuum: bool,
    /// What ran between the preload and the drain: `VACUUM ANALYZE`, or
    /// `ANALYZE` in the dead-tuple phase.
    pub analyzed: &'static str,
    pub analyze_s: f64,
    /// A maintenance leader candidate ran with the workers.
    pub leader: bool,
    /// Completed jobs per second, worker start to last completion.
    pub jobs_per_s: f64,
    pub seconds: f64,
    pub completed: u64,
    pub totals: FleetTotals,
    pub preload_jobs_per_s: f64,
    /// The preload (batched enqueue) alone.
    pub enqueue_cost: Cost,
    /// The drain alone.
    pub drain_cost: Cost,
    /// Enqueue + drain: what one job costs end to end.
    pub total_cost: Cost,
}

/// Ours, and the baseline's when scenario `baseline` is on: `jobs` jobs
/// drained in `phase`.
pub async fn run(
    ctx: &Ctx,
    jobs: u64,
    phase: Phase,
) -> Result<(DrainReport, Option<DrainReport>), BoxError> {
    let concurrency = ctx.drain_concurrency.unwrap_or(CONCURRENCY);
    let workers = ctx.drain_workers.unwrap_or(1);
    ctx.say(format!(
        "\n== drain: {jobs} pre-enqueued no-op jobs, {workers} worker x {concurrency} + \
         maintenance leader; {}",
        match phase {
            Phase::Measured => "VACUUM ANALYZE after the preload",
            Phase::DeadTuples =>
                "dead-tuple phase: autovacuum off on the database's tables, ANALYZE after the \
                 preload",
        }
    ));
    let ours = run_system(ctx, System::Awa, jobs, workers, concurrency, phase).await?;
    let baseline = match ctx.baseline {
        Some(completion) => Some(
            run_system(
                ctx,
                System::Baseline(completion),
                jobs,
                workers,
                concurrency,
                phase,
            )
            .await?,
        ),
        None => None,
    };
    if let Some(b) = &baseline {
        ctx.say(format!(
            "   drain of {jobs}: ours {:.0} jobs/s, baseline {:.0} jobs/s: {:.2}x",
            ours.jobs_per_s,
            b.jobs_per_s,
            ours.jobs_per_s / b.jobs_per_s
        ));
    }
    Ok((ours, baseline))
}

async fn run_system(
    ctx: &Ctx,
    system: System,
    jobs: u64,
    workers: usize,
    concurrency: usize,
    phase: Phase,
) -> Result<DrainReport, BoxError> {
    let db = ctx.fresh_db(system).await?;
    let queue = QueueName::new("drain")?;
    let autovacuum = match phase {
        Phase::Measured => ctx.autovacuum,
        Phase::DeadTuples => {
            ctx.autovacuum_off(&db).await?;
            false
        }
    };
    let s0 = pgstats::settled(ctx, &db).await?;

    let pool = fleet::pool(db.url(), 2).await?;
    let bar = ctx.bar(jobs, "preload");
    let started = Instant::now();
    {
        let mut conn = pool.acquire().await?;
        let mut sent = 0;
        while sent < jobs {
            let n = PRELOAD_BATCH.min(jobs - sent);
            system.enqueue(&mut conn, &queue, sent..sent + n).await?;
            sent += n;
            bar.inc(n);
        }
    }
    let preload_s = started.elapsed().as_secs_f64();
    bar.finish_and_clear();
    pool.close().await;
    let (analyzed, analyze_s) = match phase {
        Phase::Measured => ("VACUUM ANALYZE", ctx.vacuum_analyze(&db).await?),
        Phase::DeadTuples => ("ANALYZE", ctx.analyze(&db).await?),
    };
    let s1 = pgstats::settled(ctx, &db).await?;

    let claim_batch = awa_exec::worker::WorkerConfig::new(fleet::schema(), Vec::new()).claim_batch;
    // Eight connections a worker, as the one worker always had, and two
    // for the leader's tasks.
    let pool = fleet::pool(db.url(), 8 * workers as u32 + 2).await?;
    let bar = ctx.bar(jobs, "drain");
    let started = Instant::now();
    let fleet_ = system.start(
        &pool,
        &FleetConfig {
            queue,
            workers,
            concurrency,
            leader: true,
            end_to_end: None,
            job_time: ctx.drain_job_time,
        },
        LatencyRecorder::new(),
    );
    let mut last = (0, Instant::now());
    let mut ticks = 0u32;
    let seconds = loop {
        let done = fleet_.completed();
        if done >= jobs {
            break started.elapsed().as_secs_f64();
        }
        if done != last.0 {
            last = (done, Instant::now());
        } else if last.1.elapsed() > STALL {
            ctx.note(format!(
                "drain: no job completed for {}s; stopped at {done} of {jobs}",
                STALL.as_secs()
            ));
            break last.1.duration_since(started).as_secs_f64();
        }
        ticks += 1;
        if ticks.is_multiple_of(20) {
            bar.set_position(done);
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    };
    bar.finish_and_clear();
    let totals = fleet_.stop().await?;
    pool.close().await;
    let s2 = pgstats::settled(ctx, &db).await?;
    let completed = totals.completed;
    let report = DrainReport {
        jobs,
        workers,
        concurrency,
        claim_batch,
        autovacuum,
        analyzed,
        analyze_s,
        // The baseline has no maintenance to run.
        leader: system == System::Awa,
        jobs_per_s: completed.min(jobs) as f64 / seconds,
        seconds,
        completed,
        totals,
        preload_jobs_per_s: jobs as f64 / preload_s,
        enqueue_cost: pgstats::cost(&s0, &s1, jobs),
        drain_cost: pgstats::cost(&s1, &s2, jobs),
        total_cost: pgstats::cost(&s0, &s2, jobs),
    };
    // (A drain shorter than the leader's fencing wait, 2 s, ends before
    // its tasks start: --quick's.)
    if system == System::Awa && !report.totals.leader_elected && !ctx.quick {
        ctx.note(format!(
            "drain of {jobs}: the maintenance leader candidate was not elected while the \
             workers ran"
        ));
    }
    ctx.say(format!(
        "   drained {} jobs in {:.2} s: {:.0} jobs/s ({analyzed} {analyze_s:.1} s before); \
         enqueue+drain {:.0} WAL bytes/job, {:.3} commits/job, {} dead tuples (autovacuum {}){}",
        report.completed,
        report.seconds,
        report.jobs_per_s,
        report.total_cost.wal_bytes_per_job,
        report.total_cost.commits_per_job,
        report.total_cost.dead_tuples,
        if autovacuum { "on" } else { "off" },
        system.tag()
    ));
    Ok(report)
}
