//! In-process workers plus a maintenance leader candidate, as `demo` and
//! `bench` run them, and the connection pools they share.

use crate::BoxError;
use crate::latency::{EndToEnd, LatencyRecorder, NoopHandler};
use awa_core::{QueueName, SchemaName};
use awa_exec::worker::{Stats, Worker, WorkerConfig};
use awa_maint::leader::{self, LeaderConfig, Role};
use awa_maint::tasks::{self, MaintSettings};
use sqlx::PgPool;
use sqlx::postgres::PgPoolOptions;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;
use tokio::sync::watch;
use tokio::task::JoinHandle;

/// sqlx pings a pooled connection (one extra round trip) every time it is
/// acquired unless told not to. The worker acquires once per claim and once
/// per finish batch, so the ping doubles its round trips; we leave it off
/// unless `bench --pool-ping` asks for sqlx's default.
static PING_ON_ACQUIRE: AtomicBool = AtomicBool::new(false);

pub fn set_ping_on_acquire(yes: bool) {
    PING_ON_ACQUIRE.store(yes, Ordering::Relaxed);
}

pub fn ping_on_acquire() -> bool {
    PING_ON_ACQUIRE.load(Ordering::Relaxed)
}

/// A pool connecting as Awa's own sessions do
/// (`awa_core::conninfo::connect_options`: the URL read as libpq reads it,
/// and `jit = off`), so the worker and the leader the bench runs are the
/// ones an application's `awa::Client` or `awa worker run` would run. The
/// baseline's sessions get the same options: both sides are measured with
/// JIT off.
pub async fn pool(url: &str, size: u32) -> Result<PgPool, BoxError> {
    let options = awa_core::conninfo::connect_options(url)?;
    Ok(PgPoolOptions::new()
        .max_connections(size)
        .test_before_acquire(ping_on_acquire())
        .acquire_timeout(Duration::from_secs(30))
        .connect_with(options.first().clone())
        .await?)
}

pub fn schema() -> SchemaName {
    SchemaName::default_schema()
}

#[derive(Debug, Clone)]
pub struct FleetConfig {
    pub queue: QueueName,
    pub workers: usize,
    /// Per worker.
    pub concurrency: usize,
    /// Also run a maintenance leader candidate with the standard task set
    /// at its default cadences (as `awa worker run` and the `awa` client
    /// do by default): one candidate for the fleet, so with nothing else
    /// on the database it is the one leader elected.
    pub leader: bool,
    /// Also record end-to-end latency (`ready_at` to the commit of each
    /// result, through a lifecycle hook).
    pub end_to_end: Option<Arc<EndToEnd>>,
    /// How long each job's handler waits (zero: a no-op).
    pub job_time: std::time::Duration,
}

/// Running workers (and leader candidate); stop with [`Fleet::stop`].
#[derive(Debug)]
pub struct Fleet {
    stop: watch::Sender<bool>,
    workers: Vec<JoinHandle<Result<awa_exec::worker::StatsSnapshot, awa_exec::ExecError>>>,
    stats: Vec<Arc<Stats>>,
    leader: Option<JoinHandle<Result<(), awa_maint::MaintError>>>,
    /// The candidate won the leader lock at some point.
    led: Arc<AtomicBool>,
}

/// What the workers did, summed.
#[derive(Debug, Clone, Copy, Default, serde::Serialize, serde::Deserialize)]
pub struct FleetTotals {
    pub claimed: u64,
    pub completed: u64,
    pub rejected: u64,
    pub released: u64,
    /// Claim calls, and those that took nothing.
    #[serde(default)]
    pub claim_calls: u64,
    #[serde(default)]
    pub empty_claims: u64,
    /// The fleet's maintenance leader candidate was elected leader while
    /// it ran (false without a candidate).
    #[serde(default)]
    pub leader_elected: bool,
}

impl Fleet {
    pub fn start(pool: &PgPool, config: &FleetConfig, latency: Arc<LatencyRecorder>) -> Fleet {
        let (stop, stop_rx) = watch::channel(false);
        let mut workers = Vec::new();
        let mut stats = Vec::new();
        for _ in 0..config.workers {
            let mut worker = Worker::new(
                pool.clone(),
                WorkerConfig::new(schema(), vec![(config.queue.clone(), config.concurrency)]),
            );
            worker.register_default(NoopHandler {
                latency: latency.clone(),
                end_to_end: config.end_to_end.clone(),
                job_time: config.job_time,
            });
            if let Some(e2e) = config.end_to_end.clone() {
                // Hooks run only for results whose finish call committed.
                worker.on_event(move |event| e2e.finished(event.job_id.0));
            }
            stats.push(worker.stats());
            let mut rx = stop_rx.clone();
            workers.push(tokio::spawn(worker.run(async move {
                let _ = rx.wait_for(|s| *s).await;
            })));
        }
        let led = Arc::new(AtomicBool::new(false));
        let leader = config.leader.then(|| {
            let (role_tx, mut role_rx) = watch::channel(Role::Candidate);
            let seen = led.clone();
            tokio::spawn(async move {
                while role_rx.changed().await.is_ok() {
                    if *role_rx.borrow() == Role::Leader {
                        seen.store(true, Ordering::Relaxed);
                    }
                }
            });
            let leader_config = LeaderConfig::new();
            let tasks = tasks::standard(
                &schema(),
                &MaintSettings::default(),
                &leader_config.instance_id.to_string(),
            );
            tokio::spawn(leader::run(
                leader_config,
                pool.clone(),
                tasks,
                stop_rx.clone(),
                Some(role_tx),
            ))
        });
        Fleet {
            stop,
            workers,
            stats,
            leader,
            led,
        }
    }

    pub fn completed(&self) -> u64 {
        self.stats
            .iter()
            .map(|s| s.completed.load(Ordering::Relaxed))
            .sum()
    }

    pub fn claimed(&self) -> u64 {
        self.stats
            .iter()
            .map(|s| s.claimed.load(Ordering::Relaxed))
            .sum()
    }

    /// Graceful shutdown of every worker and the leader candidate.
    pub async fn stop(self) -> Result<FleetTotals, BoxError> {
        let _ = self.stop.send(true);
        let mut totals = FleetTotals::default();
        for w in self.workers {
            let s = w.await??;
            totals.claimed += s.claimed;
            totals.completed += s.completed;
            totals.rejected += s.rejected;
            totals.released += s.released;
            totals.claim_calls += s.claim_calls;
            totals.empty_claims += s.empty_claims;
        }
        if let Some(leader) = self.leader {
            leader.await??;
        }
        totals.leader_elected = self.led.load(Ordering::Relaxed);
        Ok(totals)
    }
}
