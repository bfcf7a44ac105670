//! Scenario `enqueue`: how fast producers put jobs in, one job per
//! transaction and 1,000 per round trip, with one and with four
//! producers, and 10,000 per call through the COPY path from one producer
//! (the baseline sends the same batches as its multi-row insert). One job
//! per transaction runs twice: in autocommit (one round trip per job) and
//! inside an explicit transaction (`BEGIN`, the enqueue, `COMMIT`: three
//! round trips per job, what an application enqueueing inside its own
//! transaction pays). Each variant gets its own fresh database. With
//! scenario `baseline`, the baseline's run of each variant follows ours at
//! once.
//!
//! A one-job transaction is bound by how fast the server can flush WAL
//! (`synchronous_commit=on` by default), so the report sets it next to the
//! disk's `fdatasync` rate from `pg_test_fsync`.

use super::Ctx;
use super::pgstats::{self, Cost};
use super::system::System;
use crate::BoxError;
use crate::fleet;
use awa_core::QueueName;
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};
use tokio::io::AsyncBufReadExt;

const JOBS: u64 = 100_000;
const QUICK_JOBS: u64 = 5_000;
/// Jobs of the explicit-transaction variants (each as slow as one job per
/// commit allows, so fewer than the others to keep the scenario short).
const TX_JOBS: u64 = 30_000;
const BATCH: usize = 1_000;
/// Jobs per call of the COPY variant.
const COPY_BATCH: usize = 10_000;
/// One-job-per-transaction variants stop here if N jobs take longer.
const CAP: Duration = Duration::from_secs(60);
const QUICK_CAP: Duration = Duration::from_secs(1);

#[derive(Debug, Clone, serde::Serialize)]
pub struct EnqueueRun {
    pub name: String,
    pub producers: usize,
    /// Jobs per round trip (and per transaction).
    pub batch: usize,
    /// Sent through `PgReadyPlane::enqueue_copy` (ours; the baseline sends
    /// its multi-row insert).
    pub copy: bool,
    /// Each job in an explicit transaction of its own (`BEGIN`, the call,
    /// `COMMIT`) rather than in autocommit.
    pub explicit_tx: bool,
    /// Ours pinned to its substrate instead of routed (the A/B of the
    /// routing check; every other run is routed).
    #[serde(default)]
    pub pinned: bool,
    pub jobs: u64,
    pub seconds: f64,
    pub jobs_per_s: f64,
    /// Stopped at the time cap before N jobs.
    pub capped: bool,
    pub cost: Cost,
}

#[derive(Debug, Clone, serde::Serialize)]
pub struct EnqueueReport {
    pub runs: Vec<EnqueueRun>,
    /// `pg_test_fsync -s 2`, one 8 kB write, fdatasync (ops/s).
    pub fdatasync_ops_per_s: Option<f64>,
    /// One producer, one job per transaction, as a fraction of that rate.
    pub one_per_tx_vs_fdatasync: Option<f64>,
}

impl EnqueueReport {
    /// The autocommit run of this shape.
    pub fn find(&self, producers: usize, batch: usize) -> Option<&EnqueueRun> {
        self.runs
            .iter()
            .find(|r| r.producers == producers && r.batch == batch && !r.explicit_tx && !r.pinned)
    }

    /// The pinned (unrouted) one-job autocommit run, if it ran.
    pub fn find_pinned(&self) -> Option<&EnqueueRun> {
        self.runs.iter().find(|r| r.pinned)
    }

    /// The one-job-per-explicit-transaction run with this many producers.
    pub fn find_tx(&self, producers: usize) -> Option<&EnqueueRun> {
        self.runs
            .iter()
            .find(|r| r.producers == producers && r.explicit_tx)
    }

    /// The run of the same shape as `run` (for the comparison).
    pub fn same_as(&self, run: &EnqueueRun) -> Option<&EnqueueRun> {
        self.runs.iter().find(|r| {
            (r.producers, r.batch, r.copy, r.explicit_tx, r.pinned)
                == (
                    run.producers,
                    run.batch,
                    run.copy,
                    run.explicit_tx,
                    run.pinned,
                )
        })
    }
}

/// Ours, and the baseline's when scenario `baseline` is on.
pub async fn run(ctx: &Ctx) -> Result<(EnqueueReport, Option<EnqueueReport>), BoxError> {
    let jobs = if ctx.quick { QUICK_JOBS } else { JOBS };
    let cap = if ctx.quick { QUICK_CAP } else { CAP };
    ctx.say(format!(
        "\n== enqueue: {jobs} jobs per variant, small JSON payload"
    ));
    let mut runs = Vec::new();
    let mut baseline_runs = Vec::new();
    for (producers, batch, mode) in [
        (1, 1, Mode::Call),
        (1, 1, Mode::Tx),
        (1, BATCH, Mode::Call),
        (4, 1, Mode::Call),
        (4, 1, Mode::Tx),
        (4, BATCH, Mode::Call),
        (1, COPY_BATCH, Mode::Copy),
        (1, 1, Mode::Pinned),
    ] {
        // --quick runs the baseline with one producer only; the pinned
        // variant is ours only.
        let systems = if mode == Mode::Pinned {
            vec![System::Awa]
        } else if producers == 1 {
            ctx.systems()
        } else {
            ctx.systems_unless_quick()
        };
        for system in systems {
            let jobs = if mode == Mode::Tx && !ctx.quick {
                TX_JOBS
            } else {
                jobs
            };
            let run = variant(ctx, system, jobs, producers, batch, mode, cap).await?;
            ctx.say(format!(
                "   {:<28} {:>9.0} jobs/s{}{}",
                run.name,
                run.jobs_per_s,
                if run.capped {
                    format!(" (stopped at {}s after {} jobs)", cap.as_secs(), run.jobs)
                } else {
                    String::new()
                },
                if system == System::Awa {
                    ""
                } else {
                    "  [baseline]"
                }
            ));
            match system {
                System::Awa => runs.push(run),
                System::Baseline(_) | System::Plain => baseline_runs.push(run),
            }
        }
    }
    let fdatasync = if ctx.quick {
        None
    } else {
        match fdatasync_rate(ctx).await {
            Ok(rate) => rate,
            Err(err) => {
                ctx.note(format!("pg_test_fsync failed: {err}"));
                None
            }
        }
    };
    let report = |runs: Vec<EnqueueRun>| {
        let one = runs
            .iter()
            .find(|r| r.producers == 1 && r.batch == 1 && !r.explicit_tx)
            .map(|r| r.jobs_per_s);
        EnqueueReport {
            one_per_tx_vs_fdatasync: fdatasync.zip(one).map(|(f, o)| o / f),
            fdatasync_ops_per_s: fdatasync,
            runs,
        }
    };
    if let (Some(routed), Some(pinned)) = (
        runs.iter()
            .find(|r| r.producers == 1 && r.batch == 1 && !r.explicit_tx && !r.pinned),
        runs.iter().find(|r| r.pinned),
    ) {
        ctx.say(format!(
            "   routing check: routed {:.0} vs pinned {:.0} jobs/s ({:.3}x)",
            routed.jobs_per_s,
            pinned.jobs_per_s,
            routed.jobs_per_s / pinned.jobs_per_s
        ));
    }
    let baseline = ctx.baseline.map(|_| report(baseline_runs));
    Ok((report(runs), baseline))
}

/// How a variant sends its jobs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    /// One call in autocommit.
    Call,
    /// One call inside `BEGIN` ... `COMMIT`.
    Tx,
    /// Ours through the COPY path (the baseline: its multi-row insert).
    Copy,
    /// Ours in autocommit, pinned to the substrate: no routing check.
    Pinned,
}

async fn variant(
    ctx: &Ctx,
    system: System,
    jobs: u64,
    producers: usize,
    batch: usize,
    mode: Mode,
    cap: Duration,
) -> Result<EnqueueRun, BoxError> {
    let name = format!(
        "{producers} producer{} x {}",
        if producers == 1 { "" } else { "s" },
        match mode {
            Mode::Call if batch == 1 => "1 job/tx (autocommit)".to_string(),
            Mode::Call => format!("{batch} jobs/call"),
            Mode::Tx => format!("{batch} job/tx (BEGIN..COMMIT)"),
            Mode::Copy => format!("{batch} jobs/COPY"),
            Mode::Pinned => "1 job/tx (autocommit, pinned)".to_string(),
        }
    );
    let db = ctx.fresh_db(system).await?;
    let suffix = match mode {
        Mode::Tx => "-tx",
        Mode::Pinned => "-pinned",
        _ => "",
    };
    let queue = QueueName::new(format!("enqueue-{producers}x{batch}{suffix}"))?;
    let before = pgstats::settled(ctx, &db).await?;
    let pool = fleet::pool(db.url(), producers as u32).await?;
    let bar = ctx.bar(jobs, format!("enqueue {name}"));
    let done = Arc::new(AtomicU64::new(0));
    let started = Instant::now();
    let deadline = started + cap;
    let mut tasks = Vec::new();
    for p in 0..producers as u64 {
        let share = jobs / producers as u64 + u64::from(p < jobs % producers as u64);
        let pool = pool.clone();
        let queue = queue.clone();
        let bar = bar.clone();
        let done = done.clone();
        tasks.push(tokio::spawn(async move {
            let mut conn = pool.acquire().await?;
            let mut sent = 0u64;
            while sent < share {
                // Only one-job transactions are slow enough to need a cap.
                if batch == 1 && Instant::now() > deadline {
                    break;
                }
                let n = (batch as u64).min(share - sent);
                let keys = (sent..sent + n).map(|i| p << 40 | i);
                let jobs = system.batch(&queue, keys);
                match mode {
                    Mode::Call => jobs.send(&mut conn).await?,
                    Mode::Tx => jobs.send_in_tx(&mut conn).await?,
                    Mode::Copy => jobs.send_copy(&mut conn).await?,
                    Mode::Pinned => jobs.send_pinned(&mut conn).await?,
                }
                sent += n;
                done.fetch_add(n, Ordering::Relaxed);
                bar.inc(n);
            }
            Ok::<_, BoxError>(())
        }));
    }
    for t in tasks {
        t.await??;
    }
    let seconds = started.elapsed().as_secs_f64();
    bar.finish_and_clear();
    pool.close().await;
    let enqueued = done.load(Ordering::Relaxed);
    let after = pgstats::settled(ctx, &db).await?;
    Ok(EnqueueRun {
        name,
        producers,
        batch,
        copy: mode == Mode::Copy,
        explicit_tx: mode == Mode::Tx,
        pinned: mode == Mode::Pinned,
        jobs: enqueued,
        seconds,
        jobs_per_s: enqueued as f64 / seconds,
        capped: enqueued < jobs,
        cost: pgstats::cost(&before, &after, enqueued),
    })
}

/// Where pg_test_fsync is: next to the server binaries (following the
/// symlinks some installs put on PATH), else on PATH.
pub(super) fn pg_tool(ctx: &Ctx, tool: &str) -> PathBuf {
    if let Some(dir) = ctx.server.bin_dir() {
        for base in [
            dir.join("postgres").canonicalize().ok(),
            Some(dir.join("x")),
        ]
        .into_iter()
        .flatten()
        {
            if let Some(candidate) = base.parent().map(|d| d.join(tool))
                && candidate.exists()
            {
                return candidate;
            }
        }
    }
    PathBuf::from(tool)
}

pub(super) fn psql(ctx: &Ctx) -> PathBuf {
    pg_tool(ctx, "psql")
}

/// `pg_test_fsync -s 2`, first section (one 8 kB write), fdatasync line;
/// the remaining sections are not needed and the tool is stopped there.
async fn fdatasync_rate(ctx: &Ctx) -> Result<Option<f64>, BoxError> {
    let tool = pg_tool(ctx, "pg_test_fsync");
    let file = std::env::temp_dir().join(format!("awa-bench-fsync-{}.out", std::process::id()));
    ctx.say(format!(
        "   running {} -s 2 -f {} (disk flush rate)",
        tool.display(),
        file.display()
    ));
    let mut child = tokio::process::Command::new(&tool)
        .args(["-s", "2", "-f"])
        .arg(&file)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| format!("cannot run {}: {e}", tool.display()))?;
    let stdout = child.stdout.take().ok_or("no stdout")?;
    let mut lines = tokio::io::BufReader::new(stdout).lines();
    let found = tokio::time::timeout(Duration::from_secs(60), async {
        while let Some(line) = lines.next_line().await? {
            let words: Vec<&str> = line.split_whitespace().collect();
            if words.first() == Some(&"fdatasync") && words.get(2) == Some(&"ops/sec") {
                return Ok::<_, std::io::Error>(words[1].parse::<f64>().ok());
            }
        }
        Ok(None)
    })
    .await;
    let _ = child.kill().await;
    let _ = std::fs::remove_file(&file);
    match found {
        Ok(Ok(Some(rate))) => {
            ctx.say(format!("   fdatasync: {rate:.0} ops/s"));
            Ok(Some(rate))
        }
        Ok(Ok(None)) => Err("no fdatasync line in its output".into()),
        Ok(Err(e)) => Err(e.into()),
        Err(_) => Err("timed out".into()),
    }
}
