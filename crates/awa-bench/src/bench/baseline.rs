//! Scenario `baseline`: what a user writes instead of adopting a queue, run
//! beside ours in the same bench run.
//!
//! One plain jobs table (`crates/awa-bench/sql/baseline/`, one statement per file),
//! claimed with `FOR UPDATE SKIP LOCKED` and completed by `UPDATE` (or
//! `DELETE`, `--baseline-complete delete`), in a fresh database of its own
//! per run. It is driven by the same producers (same batch sizes,
//! payload, rates and durations) and by a worker of the same shape as ours
//! (one dispatcher claiming its free concurrency, at most 128 per claim;
//! one task per job; one completer batching whatever has accumulated, at
//! most 128 per statement; LISTEN for wake-ups with a 250 ms poll as the
//! fallback), and measured by the same code (`pgstats`, `latency`).
//!
//! What the baseline does not do, in its favour: no maintenance (no rescue
//! of stuck jobs, no cleanup of finished rows), no unique keys, no history
//! beyond the row itself, no shutdown release of unfinished jobs.

use crate::BoxError;
use crate::fleet::{FleetConfig, FleetTotals};
use crate::latency::{EndToEnd, LatencyRecorder};
use chrono::{DateTime, Utc};
use sqlx::{PgConnection, PgPool};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;
use tokio::sync::{Notify, Semaphore, mpsc, watch};
use tokio::task::JoinHandle;

/// The schema every baseline statement names.
pub const SCHEMA: &str = "bench_baseline";
const CHANNEL: &str = "bench_baseline";

/// The baseline's DDL, in order.
const DDL: &[&str] = &[
    include_str!("../../sql/baseline/create_schema.sql"),
    include_str!("../../sql/baseline/create_table.sql"),
    include_str!("../../sql/baseline/create_index.sql"),
];
const ENQUEUE: &str = include_str!("../../sql/baseline/enqueue.sql");
const CLAIM: &str = include_str!("../../sql/baseline/claim.sql");
const COMPLETE_UPDATE: &str = include_str!("../../sql/baseline/complete_update.sql");
const COMPLETE_DELETE: &str = include_str!("../../sql/baseline/complete_delete.sql");
pub const PIN: &str = include_str!("../../sql/baseline/pin.sql");

/// Our completer's cap (private to awa-exec's `worker::completer`). The
/// claim batch and poll interval are read from `WorkerConfig::new`.
const COMPLETE_BATCH: usize = 128;
const POLL_ON_ERROR: Duration = Duration::from_millis(250);

/// How the baseline completes a job.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, clap::ValueEnum, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Completion {
    /// `UPDATE ... SET state = 'completed'`: the row stays as history.
    #[default]
    Update,
    /// `DELETE`: no history at all.
    Delete,
}

impl Completion {
    fn statement(self) -> &'static str {
        match self {
            Completion::Update => COMPLETE_UPDATE,
            Completion::Delete => COMPLETE_DELETE,
        }
    }
}

/// Template key for the baseline's databases: changes with its DDL.
pub fn template_key() -> String {
    super::ddl::template_key("baseline", DDL)
}

/// Creates the baseline's schema, table and index (idempotent).
pub async fn install(url: &str) -> Result<(), BoxError> {
    super::ddl::install(url, DDL).await
}

/// Enqueues jobs of one queue in one statement (autocommit).
pub async fn enqueue(
    conn: &mut PgConnection,
    queue: &str,
    kinds: &[&str],
    args: &[serde_json::Value],
) -> Result<Vec<i64>, BoxError> {
    Ok(sqlx::query_scalar(ENQUEUE)
        .bind(queue)
        .bind(kinds)
        .bind(args)
        .fetch_all(conn)
        .await?)
}

#[derive(Debug, Default)]
struct Counters {
    claimed: AtomicU64,
    completed: AtomicU64,
    rejected: AtomicU64,
}

/// A job the baseline claimed.
#[derive(Debug)]
struct Claimed {
    id: i64,
    attempt: i32,
    #[allow(dead_code)]
    kind: String,
    #[allow(dead_code)]
    args: serde_json::Value,
    run_at: DateTime<Utc>,
}

// By hand: sqlx's FromRow derive needs its `derive` feature (a host copy of
// sqlx-postgres and more to compile; docs/development.md "Compile once").
impl<'r> sqlx::FromRow<'r, sqlx::postgres::PgRow> for Claimed {
    fn from_row(row: &'r sqlx::postgres::PgRow) -> Result<Self, sqlx::Error> {
        use sqlx::Row as _;
        Ok(Self {
            id: row.try_get("id")?,
            attempt: row.try_get("attempt")?,
            kind: row.try_get("kind")?,
            args: row.try_get("args")?,
            run_at: row.try_get("run_at")?,
        })
    }
}

/// Baseline workers, started like [`crate::fleet::Fleet`]; stop with
/// [`BaselineFleet::stop`].
#[derive(Debug)]
pub struct BaselineFleet {
    stop: watch::Sender<bool>,
    workers: Vec<JoinHandle<()>>,
    counters: Arc<Counters>,
}

impl BaselineFleet {
    /// `config.leader` is ignored: the baseline has no maintenance.
    pub fn start(
        pool: &PgPool,
        config: &FleetConfig,
        completion: Completion,
        latency: Arc<LatencyRecorder>,
    ) -> Self {
        let (stop, stop_rx) = watch::channel(false);
        let counters = Arc::new(Counters::default());
        let workers = (0..config.workers)
            .map(|_| {
                tokio::spawn(worker(
                    pool.clone(),
                    config.clone(),
                    completion,
                    Recorders {
                        pickup: latency.clone(),
                        end_to_end: config.end_to_end.clone(),
                    },
                    counters.clone(),
                    stop_rx.clone(),
                ))
            })
            .collect();
        Self {
            stop,
            workers,
            counters,
        }
    }

    pub fn completed(&self) -> u64 {
        self.counters.completed.load(Ordering::Relaxed)
    }

    pub fn claimed(&self) -> u64 {
        self.counters.claimed.load(Ordering::Relaxed)
    }

    /// Stops claiming, waits for running jobs and their completions.
    pub async fn stop(self) -> Result<FleetTotals, BoxError> {
        let _ = self.stop.send(true);
        for w in self.workers {
            w.await?;
        }
        let get = |c: &AtomicU64| c.load(Ordering::Relaxed);
        Ok(FleetTotals {
            claimed: get(&self.counters.claimed),
            completed: get(&self.counters.completed),
            rejected: get(&self.counters.rejected),
            ..FleetTotals::default()
        })
    }
}

/// What the baseline's worker records: pickup latency, and end-to-end
/// latency when asked.
struct Recorders {
    pickup: Arc<LatencyRecorder>,
    end_to_end: Option<Arc<EndToEnd>>,
}

/// One worker: dispatcher, listener and completer, as ours has.
async fn worker(
    pool: PgPool,
    config: FleetConfig,
    completion: Completion,
    recorders: Recorders,
    counters: Arc<Counters>,
    mut stop: watch::Receiver<bool>,
) {
    let Recorders {
        pickup: latency,
        end_to_end,
    } = recorders;
    let FleetConfig {
        queue,
        concurrency,
        job_time,
        ..
    } = config;
    let queue = queue.as_str().to_string();
    let wake = Arc::new(Notify::new());
    let listener = tokio::spawn(listen(pool.clone(), queue.clone(), wake.clone()));
    let (done_tx, done_rx) = mpsc::unbounded_channel::<(i64, i32)>();
    let completer = tokio::spawn(complete(
        pool.clone(),
        completion,
        done_rx,
        counters.clone(),
        end_to_end.clone(),
    ));
    let semaphore = Arc::new(Semaphore::new(concurrency));
    let instance = format!("baseline-{}", std::process::id());
    let ours = awa_exec::worker::WorkerConfig::new(crate::fleet::schema(), Vec::new());
    let (claim_batch, poll) = (ours.claim_batch, ours.poll_interval);
    loop {
        if *stop.borrow() {
            break;
        }
        let free = semaphore.available_permits();
        if free == 0 {
            tokio::select! {
                permit = semaphore.clone().acquire_owned() => drop(permit),
                _ = stop.changed() => {}
            }
            continue;
        }
        let want = free.min(claim_batch) as i64;
        let claimed: Result<Vec<Claimed>, sqlx::Error> = sqlx::query_as(CLAIM)
            .bind(&queue)
            .bind(want)
            .bind(&instance)
            .fetch_all(&pool)
            .await;
        let jobs = match claimed {
            Ok(jobs) => jobs,
            Err(err) => {
                tracing::error!(error = %err, "baseline claim failed; retrying after the poll interval");
                tokio::select! {
                    _ = tokio::time::sleep(POLL_ON_ERROR) => {}
                    _ = stop.changed() => {}
                }
                continue;
            }
        };
        let got = jobs.len();
        counters.claimed.fetch_add(got as u64, Ordering::Relaxed);
        for job in jobs {
            let permit = semaphore
                .clone()
                .try_acquire_owned()
                .expect("claimed no more jobs than free permits");
            let done = done_tx.clone();
            let latency = latency.clone();
            let end_to_end = end_to_end.clone();
            tokio::spawn(async move {
                // The no-op handler: record pickup latency, wait the job's
                // time if it has one, complete.
                latency.record_since(job.run_at);
                if let Some(e2e) = &end_to_end {
                    e2e.started(job.id, job.run_at);
                }
                if !job_time.is_zero() {
                    tokio::time::sleep(job_time).await;
                }
                let _ = done.send((job.id, job.attempt));
                drop(permit);
            });
        }
        if got > 0 {
            continue;
        }
        tokio::select! {
            _ = wake.notified() => {}
            _ = tokio::time::sleep(poll) => {}
            _ = stop.changed() => {}
        }
    }
    listener.abort();
    // Running jobs finish (they are no-ops), then the completer drains.
    let _ = semaphore.acquire_many(concurrency as u32).await;
    drop(done_tx);
    let _ = completer.await;
}

/// Wakes the dispatcher when the enqueue statement's NOTIFY names its queue.
async fn listen(pool: PgPool, queue: String, wake: Arc<Notify>) {
    loop {
        let mut listener = match sqlx::postgres::PgListener::connect_with(&pool).await {
            Ok(l) => l,
            Err(err) => {
                tracing::warn!(error = %err, "baseline LISTEN connection failed; polling");
                tokio::time::sleep(Duration::from_secs(1)).await;
                continue;
            }
        };
        if let Err(err) = listener.listen(CHANNEL).await {
            tracing::warn!(error = %err, "baseline LISTEN failed; polling");
            tokio::time::sleep(Duration::from_secs(1)).await;
            continue;
        }
        while let Ok(n) = listener.recv().await {
            if n.payload() == queue {
                wake.notify_one();
            }
        }
    }
}

/// Batches completions into one statement per batch, as our completer does.
async fn complete(
    pool: PgPool,
    completion: Completion,
    mut rx: mpsc::UnboundedReceiver<(i64, i32)>,
    counters: Arc<Counters>,
    end_to_end: Option<Arc<EndToEnd>>,
) {
    let mut ids = Vec::with_capacity(COMPLETE_BATCH);
    let mut attempts = Vec::with_capacity(COMPLETE_BATCH);
    while let Some((id, attempt)) = rx.recv().await {
        ids.push(id);
        attempts.push(attempt);
        while ids.len() < COMPLETE_BATCH {
            match rx.try_recv() {
                Ok((id, attempt)) => {
                    ids.push(id);
                    attempts.push(attempt);
                }
                Err(_) => break,
            }
        }
        let mut delay = Duration::from_millis(50);
        loop {
            let result = sqlx::query(completion.statement())
                .bind(&ids)
                .bind(&attempts)
                .execute(&pool)
                .await;
            match result {
                Ok(done) => {
                    // Committed (autocommit): the end of each job's trip.
                    if let Some(e2e) = &end_to_end {
                        for id in &ids {
                            e2e.finished(*id);
                        }
                    }
                    let n = done.rows_affected();
                    counters.completed.fetch_add(n, Ordering::Relaxed);
                    counters
                        .rejected
                        .fetch_add(ids.len() as u64 - n, Ordering::Relaxed);
                    break;
                }
                Err(err) => {
                    tracing::error!(error = %err, "baseline completion failed; retrying");
                    tokio::time::sleep(delay).await;
                    delay = (delay * 2).min(Duration::from_secs(5));
                }
            }
        }
        ids.clear();
        attempts.clear();
    }
}
