//! The worker runtime: claims jobs of its queues, runs the registered
//! handler for each, and finishes every attempt through the guarded path.
//!
//! One dispatcher task per queue claims ahead into a small bounded buffer
//! (claims sized by the work, not by the permits free this instant) and
//! starts a buffered job as each permit frees; one completer task batches
//! results; one listener task turns
//! `awa_ready` notifications into wake-ups, with polling as the fallback.
//! Shutdown stops claiming, lets in-flight jobs finish within a grace
//! period, releases buffered (claimed, not started) jobs at once and the
//! rest at the deadline, so they run again: never lost.
//!
//! Cancel (the cancel rule): an attempt that is no longer ours (an
//! operator cancelled it, maintenance rescued it) is learnt of at once
//! through `NOTIFY awa_cancel` (sent in the transaction that closed it),
//! else at the next heartbeat; its handler's [`JobContext::cancelled`]
//! resolves, and if the handler has not returned within
//! [`WorkerConfig::cancel_grace`] it is dropped and its slot freed. Each
//! step is logged once.

mod completer;
mod config;
mod dispatcher;
mod engine;
mod handler;

pub use config::{
    DEFAULT_CANCEL_GRACE, DEFAULT_CLAIM_BATCH, RECORD_GRACE, RESCUE_BOUND_ADOPTION,
    SETTINGS_REFRESH, WorkerConfig,
};
pub use handler::{Handler, HandlerResult, JobContext, JobError, Outcome};

use crate::{ExecError, ExecPlane, Finish, Finished, Frontier, PgExecPlane};
use awa_core::{AttemptToken, JobId, JobState, QueueName, Routing, RunLease, SchemaName};
use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;
use tokio::sync::{mpsc, watch};
use tokio_util::sync::CancellationToken;

/// Counters of what a worker did.
#[derive(Debug, Default)]
pub struct Stats {
    /// Claim round trips (including those that found nothing).
    pub claim_calls: AtomicU64,
    /// Claim round trips that took nothing (idle, or frontier not settled).
    pub empty_claims: AtomicU64,
    pub claimed: AtomicU64,
    pub completed: AtomicU64,
    pub retried: AtomicU64,
    pub snoozed: AtomicU64,
    pub cancelled: AtomicU64,
    pub failed: AtomicU64,
    pub dead_lettered: AtomicU64,
    pub released: AtomicU64,
    pub rejected: AtomicU64,
    /// Results the database refused even on their own: recorded as a retry
    /// with the default backoff instead, or left for rescue.
    pub unstorable: AtomicU64,
    /// Attempts given up because they were no longer ours (cancelled by an
    /// operator or rescued): buffered ones never started, and handlers
    /// dropped for not returning within the cancel grace. Whoever closed
    /// them recorded their end.
    pub dropped: AtomicU64,
}

impl Stats {
    fn record(&self, state: Option<JobState>) {
        let counter = match state {
            Some(JobState::Completed) => &self.completed,
            Some(JobState::Retryable) => &self.retried,
            Some(JobState::Snoozed) => &self.snoozed,
            Some(JobState::Cancelled) => &self.cancelled,
            Some(JobState::Failed) => &self.failed,
            Some(JobState::DeadLettered) => &self.dead_lettered,
            _ => &self.released,
        };
        counter.fetch_add(1, Ordering::Relaxed);
    }

    pub fn snapshot(&self) -> StatsSnapshot {
        let get = |c: &AtomicU64| c.load(Ordering::Relaxed);
        StatsSnapshot {
            claim_calls: get(&self.claim_calls),
            empty_claims: get(&self.empty_claims),
            claimed: get(&self.claimed),
            completed: get(&self.completed),
            retried: get(&self.retried),
            snoozed: get(&self.snoozed),
            cancelled: get(&self.cancelled),
            failed: get(&self.failed),
            dead_lettered: get(&self.dead_lettered),
            released: get(&self.released),
            rejected: get(&self.rejected),
            unstorable: get(&self.unstorable),
            dropped: get(&self.dropped),
        }
    }
}

/// A copy of the counters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct StatsSnapshot {
    /// Claim round trips (including those that found nothing).
    pub claim_calls: u64,
    /// Claim round trips that took nothing.
    pub empty_claims: u64,
    /// Jobs claimed.
    pub claimed: u64,
    /// Results recorded as completed.
    pub completed: u64,
    /// Results recorded as a retry.
    pub retried: u64,
    /// Results recorded as snoozed.
    pub snoozed: u64,
    /// Results recorded as cancelled.
    pub cancelled: u64,
    /// Results recorded as failed for good.
    pub failed: u64,
    /// Results recorded as dead-lettered.
    pub dead_lettered: u64,
    /// Attempts released unfinished (at shutdown) to run again.
    pub released: u64,
    /// Results the database rejected because the attempt was no longer
    /// current (cancelled, rescued or already finished).
    pub rejected: u64,
    /// Results the database refused even on their own: recorded as a retry
    /// with the default backoff instead, or left for rescue.
    pub unstorable: u64,
    pub dropped: u64,
}

/// One attempt's result, reported to lifecycle hooks once the finish call
/// that wrote it has committed. A result that was rejected (the attempt
/// was cancelled or rescued meanwhile), or whose write failed and rolled
/// back, is not reported; a write retried after a failure is reported once,
/// when it commits.
#[derive(Debug, Clone, PartialEq)]
pub struct JobEvent {
    /// The job.
    pub job_id: JobId,
    /// Which claim of the job the attempt was.
    pub run_lease: RunLease,
    /// Its queue.
    pub queue: QueueName,
    /// Its kind.
    pub kind: String,
    /// The attempt that ended (1 for the first run).
    pub attempt: i32,
    /// Where the job went: completed, retryable, snoozed, cancelled,
    /// failed or dead-lettered.
    pub state: JobState,
    /// The handler's error or cancel reason, when it gave one.
    pub error: Option<String>,
}

/// A lifecycle hook: called once per reported [`JobEvent`], in commit
/// order, on a task of its own (a slow hook delays other hooks, never
/// finishing). A panicking hook is logged and skipped.
pub type EventHook = Arc<dyn Fn(&JobEvent) + Send + Sync>;

/// Which dispatchers to wake for a queue's `awa_ready` notification: every
/// engine's dispatcher of that queue (payloads name the queue, not the
/// substrate). Here, not in `engine`, because the dispatchers hold it too.
pub(crate) type Wakers = Arc<std::sync::Mutex<HashMap<String, Vec<Arc<tokio::sync::Notify>>>>>;

/// What the completer needs to report an attempt's event.
#[derive(Debug)]
pub(crate) struct About {
    pub queue: QueueName,
    pub kind: String,
    pub attempt: i32,
}

/// A result on its way to the completer (`About` only when hooks exist).
pub(crate) type Done = (AttemptToken, Finish, Option<Arc<About>>);

/// What [`Worker::work_one`] did with the job it claimed.
#[derive(Debug, Clone)]
pub struct Worked {
    /// The job that was claimed and run.
    pub job: awa_core::ClaimedJob,
    /// What the handler's result became in the database.
    pub finished: Finished,
}

/// A worker: handlers by kind plus the queues to serve.
pub struct Worker {
    pool: sqlx::PgPool,
    config: WorkerConfig,
    handlers: HashMap<String, Arc<dyn Handler>>,
    hooks: Vec<EventHook>,
    stats: Arc<Stats>,
    routing: Option<watch::Receiver<Routing>>,
    /// Every dispatcher's wake-up, by queue (the listener's, and
    /// [`ClaimNow`]'s).
    wakers: Wakers,
}

/// Asks a running worker's dispatchers to claim at once instead of waiting
/// for a notification or their poll (see [`Worker::claim_now`]).
#[derive(Clone)]
pub struct ClaimNow(Wakers);

impl std::fmt::Debug for ClaimNow {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClaimNow").finish_non_exhaustive()
    }
}

impl ClaimNow {
    /// Wake every idle dispatcher, as a notification would: each makes a
    /// claim. A dispatcher not waiting keeps one wake-up for when it next
    /// idles, so asking many times at once makes at most two claims.
    pub fn claim_now(&self) {
        for list in self.0.lock().expect("wakers lock").values() {
            for wake in list {
                wake.notify_one();
            }
        }
    }
}

impl std::fmt::Debug for Worker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Worker")
            .field("config", &self.config)
            .field("kinds", &self.handlers.keys().collect::<Vec<_>>())
            .finish()
    }
}

/// Attempts this worker holds open, running or buffered (claimed, not yet
/// started), so heartbeats keep them alive and shutdown can release what
/// did not finish. The entry is removed by whoever finishes the attempt, so
/// each attempt is finished exactly once by this worker. Hashed with Fx,
/// not SipHash: three lookups per job, keys are ours (no flooding to
/// resist), and SipHash over a token's fields was 5% of a drain's worker
/// CPU.
pub(crate) type InFlight = Arc<std::sync::Mutex<rustc_hash::FxHashMap<AttemptToken, Running>>>;

/// One attempt this worker is running.
#[derive(Debug)]
pub(crate) struct Running {
    /// The job's task; none while the job waits in a dispatcher's buffer.
    pub abort: Option<tokio::task::AbortHandle>,
    /// When it was claimed: rescue counts staleness from the claim.
    pub since: std::time::Instant,
    /// Cancelled once the attempt is no longer ours (an `awa_cancel`
    /// notification, or a heartbeat that found it closed); the handler
    /// sees it through its context.
    pub cancel: CancellationToken,
}

/// Every engine's in-flight map, so the notification listener can find an
/// attempt by job and lease whichever substrate handed it out.
pub(crate) type Attempts = Arc<std::sync::Mutex<Vec<InFlight>>>;

/// Mark attempt `(job_id, run_lease)` cancelled if this worker holds it;
/// `why` is the notification's reason. Logged once per attempt.
pub(crate) fn cancel_attempt(attempts: &Attempts, job_id: i64, run_lease: i64, why: &str) {
    for map in attempts.lock().expect("attempts lock").iter() {
        let map = map.lock().expect("in-flight lock");
        let found = map
            .iter()
            .find(|(t, _)| t.job_id.0 == job_id && t.run_lease.0 == run_lease);
        if let Some((_, running)) = found {
            if !running.cancel.is_cancelled() {
                running.cancel.cancel();
                tracing::info!(
                    job_id,
                    run_lease,
                    why,
                    started = running.abort.is_some(),
                    "attempt is no longer ours; its handler is told to stop"
                );
            }
            return;
        }
    }
}

impl Worker {
    pub fn new(pool: sqlx::PgPool, config: WorkerConfig) -> Self {
        Self {
            pool,
            config,
            handlers: HashMap::new(),
            hooks: Vec::new(),
            stats: Arc::new(Stats::default()),
            routing: None,
            wakers: Default::default(),
        }
    }

    /// A handle that makes the dispatchers claim now, for a watcher that
    /// needs the worker's own word (an empty claim) that nothing is left,
    /// without waiting up to a poll interval for it (`awa worker run
    /// --exit-when-idle`). Works before and while [`Worker::run`] runs.
    pub fn claim_now(&self) -> ClaimNow {
        ClaimNow(self.wakers.clone())
    }

    /// Claim from the substrates `routing` reads, following its changes
    /// (see `awa_control::routing::follow`): an engine starts for each
    /// substrate that joins the reads and retires, once its running jobs
    /// are finished, for each that leaves. Without this the worker serves
    /// [`WorkerConfig::schema`] alone.
    pub fn follow_routing(&mut self, routing: watch::Receiver<Routing>) -> &mut Self {
        self.routing = Some(routing);
        self
    }

    /// Run `handler` for jobs of `kind`. A claimed job of a kind with no
    /// handler (and no default handler) fails permanently with a message
    /// naming the kind.
    pub fn register(&mut self, kind: impl Into<String>, handler: impl Handler) -> &mut Self {
        self.handlers.insert(kind.into(), Arc::new(handler));
        self
    }

    /// Run `handler` for every kind that has no handler of its own. (Kinds
    /// are never empty, so the empty key cannot collide with one.)
    pub fn register_default(&mut self, handler: impl Handler) -> &mut Self {
        self.handlers.insert(String::new(), Arc::new(handler));
        self
    }

    /// Call `hook` for every result once it has committed (see
    /// [`JobEvent`]): metrics and follow-up work.
    pub fn on_event(&mut self, hook: impl Fn(&JobEvent) + Send + Sync + 'static) -> &mut Self {
        self.hooks.push(Arc::new(hook));
        self
    }

    /// Claim one job of `queue`, run its handler inline, and record the
    /// result, without starting dispatchers, the completer or heartbeats:
    /// for tests of handlers against a real database. None when nothing of
    /// `queue` is runnable now. Lifecycle hooks are not called.
    pub async fn work_one(&self, queue: &QueueName) -> Result<Option<Worked>, ExecError> {
        let reads = match &self.routing {
            Some(r) => r.borrow().reads(),
            None => vec![self.config.schema.clone()],
        };
        for schema in reads {
            if let Some(worked) = self.work_one_in(&schema, queue).await? {
                return Ok(Some(worked));
            }
        }
        Ok(None)
    }

    async fn work_one_in(
        &self,
        schema: &SchemaName,
        queue: &QueueName,
    ) -> Result<Option<Worked>, ExecError> {
        let plane = Arc::new(PgExecPlane::new(schema.clone()));
        let mut frontier = Frontier::default();
        // A claim may see work before the claim frontier has settled past
        // it (a producer that just committed): look again briefly.
        let mut job = None;
        for _ in 0..50 {
            let mut conn = self.pool.acquire().await?;
            let mut claimed = plane
                .claim(
                    &mut conn,
                    queue,
                    1,
                    &mut frontier,
                    Some(self.config.instance_id),
                )
                .await?;
            drop(conn);
            if let Some(j) = claimed.pop() {
                job = Some(j);
                break;
            }
            if !frontier.is_waiting() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        let Some(job) = job else {
            return Ok(None);
        };
        self.stats.claimed.fetch_add(1, Ordering::Relaxed);
        let handler = self
            .handlers
            .get(&job.kind)
            .or_else(|| self.handlers.get(""))
            .cloned();
        let (_stop_tx, stop_rx) = watch::channel(false);
        let ctx = JobContext {
            job: job.clone(),
            pool: self.pool.clone(),
            plane: plane.clone(),
            shutdown: stop_rx,
            cancel: CancellationToken::new(),
        };
        // The same timeout as a running worker's: the handler's future is
        // dropped at the deadline and the attempt fails with a timeout error.
        let result = match dispatcher::timeout_of(&job, &self.config.kind_timeouts) {
            None => dispatcher::run_handler(handler, ctx).await,
            Some(after) => {
                let cancel = ctx.cancel.clone();
                match tokio::time::timeout(after, dispatcher::run_handler(handler.clone(), ctx))
                    .await
                {
                    Ok(result) => result,
                    Err(_) => {
                        cancel.cancel();
                        dispatcher::timed_out(handler.as_deref(), &job, after)
                    }
                }
            }
        };
        let finish = handler::finish_for(result);
        let mut conn = self.pool.acquire().await?;
        let finished = plane
            .finish(&mut conn, &[(job.token, finish)])
            .await?
            .pop()
            .expect("finish answers one row per attempt");
        if finished.accepted {
            self.stats.record(finished.next_state);
        } else {
            self.stats.rejected.fetch_add(1, Ordering::Relaxed);
        }
        Ok(Some(Worked { job, finished }))
    }

    /// Live counters, for progress displays.
    pub fn stats(&self) -> Arc<Stats> {
        self.stats.clone()
    }

    /// Serve until `shutdown` resolves, then shut down gracefully within
    /// the configured grace period.
    pub async fn run(
        self,
        shutdown: impl std::future::Future<Output = ()> + Send,
    ) -> Result<StatsSnapshot, ExecError> {
        let grace = self.config.shutdown_grace;
        self.run_with_grace(async move {
            shutdown.await;
            grace
        })
        .await
    }

    /// Serve until `shutdown` resolves to the grace period to shut down
    /// within (checked like [`WorkerConfig::shutdown_grace`]).
    pub async fn run_with_grace(
        mut self,
        shutdown: impl std::future::Future<Output = Duration> + Send,
    ) -> Result<StatsSnapshot, ExecError> {
        self.config.validate()?;
        let mut routing = self
            .routing
            .take()
            .unwrap_or_else(|| watch::channel(Routing::fixed(self.config.schema.clone())).1);
        let (stop_tx, stop_rx) = watch::channel(false);
        let events = !self.hooks.is_empty();
        let (event_tx, hook_task) = if events {
            let (tx, rx) = mpsc::unbounded_channel();
            (Some(tx), Some(tokio::spawn(run_hooks(rx, self.hooks))))
        } else {
            (None, None)
        };
        let shared = engine::Shared {
            pool: self.pool.clone(),
            config: self.config.clone(),
            handlers: Arc::new(self.handlers),
            semaphores: self
                .config
                .queues
                .iter()
                .map(|(_, c)| (Arc::new(tokio::sync::Semaphore::new(*c)), *c))
                .collect(),
            stats: self.stats.clone(),
            events: event_tx,
            wakers: self.wakers.clone(),
            attempts: Default::default(),
        };
        let listener = tokio::spawn(dispatcher::listen(
            self.pool.clone(),
            shared.wakers.clone(),
            shared.attempts.clone(),
            stop_rx.clone(),
        ));

        // One engine per substrate the routing reads; retired engines stay
        // until their last attempt is finished.
        let mut engines: Vec<engine::Engine> = Vec::new();
        let mut retired: Vec<engine::Engine> = Vec::new();
        let reconcile = |engines: &mut Vec<engine::Engine>,
                         retired: &mut Vec<engine::Engine>,
                         routing: &Routing| {
            let reads = routing.reads();
            let mut i = 0;
            while i < engines.len() {
                if reads.contains(&engines[i].schema) {
                    i += 1;
                } else {
                    let e = engines.swap_remove(i);
                    tracing::info!(schema = %e.schema, "substrate left the routing; no new claims from it");
                    e.stop_claiming(&shared.wakers);
                    retired.push(e);
                }
            }
            for schema in reads {
                if !engines.iter().any(|e| e.schema == schema) {
                    tracing::info!(schema = %schema, "claiming from substrate");
                    engines.push(engine::Engine::start(&shared, schema));
                }
            }
        };
        let current = routing.borrow_and_update().clone();
        reconcile(&mut engines, &mut retired, &current);

        let mut routing_open = true;
        let mut sweep = tokio::time::interval(Duration::from_millis(500));
        sweep.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        tokio::pin!(shutdown);
        let grace = loop {
            tokio::select! {
                grace = &mut shutdown => break grace,
                changed = routing.changed(), if routing_open => {
                    if changed.is_err() {
                        // A fixed routing, or its follower is gone: keep the last one.
                        routing_open = false;
                        continue;
                    }
                    let current = routing.borrow_and_update().clone();
                    reconcile(&mut engines, &mut retired, &current);
                }
                _ = sweep.tick() => {
                    let mut i = 0;
                    while i < retired.len() {
                        if retired[i].is_idle() {
                            let e = retired.swap_remove(i);
                            let deadline = tokio::time::Instant::now() + RECORD_GRACE;
                            if !e.finish(deadline).await {
                                tracing::warn!("a retired substrate's results could not be recorded in time; \
                                    maintenance rescues those attempts once stale");
                            }
                        } else {
                            i += 1;
                        }
                    }
                }
            }
        };
        self.config.shutdown_grace = match awa_core::bounds::SHUTDOWN_GRACE.check(grace) {
            Ok(grace) => grace,
            Err(err) => {
                tracing::warn!(error = %err, "shutdown grace out of bounds; using the configured one");
                self.config.shutdown_grace
            }
        };
        tracing::info!(grace = ?self.config.shutdown_grace, "worker shutting down: no new claims");
        let grace_over = tokio::time::Instant::now() + self.config.shutdown_grace;
        let _ = stop_tx.send(true);
        engines.append(&mut retired);
        for e in &engines {
            e.stop_claiming(&shared.wakers);
        }
        // A dispatcher stuck in a claim the database does not answer is
        // dropped at the deadline; a claim that did commit is rescued.
        for e in &mut engines {
            e.join_dispatchers(grace_over).await;
        }
        listener.abort();

        // Wait for in-flight jobs, up to the grace period (still
        // heartbeating them, so a short rescue bound does not take them).
        let drained = tokio::time::timeout_at(grace_over, async {
            for (semaphore, concurrency) in &shared.semaphores {
                let _ = semaphore.acquire_many(*concurrency as u32).await;
            }
        })
        .await
        .is_ok();
        // Whatever is still held: running jobs past the grace period, and
        // the buffer of a dispatcher dropped at the deadline (a stopping
        // dispatcher releases its own buffer at once).
        let left: usize = engines.iter_mut().map(|e| e.release_all()).sum();
        if left > 0 {
            if drained {
                tracing::warn!(jobs = left, "releasing buffered jobs");
            } else {
                tracing::warn!(jobs = left, "grace period over; releasing unfinished jobs");
            }
        }
        drop(shared);
        let record_over = tokio::time::Instant::now().max(grace_over) + RECORD_GRACE;
        let mut recorded = true;
        for e in engines {
            recorded &= e.finish(record_over).await;
        }
        if !recorded {
            tracing::error!(
                grace = ?self.config.shutdown_grace,
                "results could not be recorded within the shutdown grace period; giving up: \
                 maintenance rescues those attempts once they are stale"
            );
        }
        // The completers are gone, so the hooks' channel is closed: they
        // finish what was reported, within the record grace.
        if let Some(hooks) = hook_task {
            let abort = hooks.abort_handle();
            if tokio::time::timeout_at(record_over, hooks).await.is_err() {
                abort.abort();
                tracing::warn!("lifecycle hooks did not finish within the shutdown grace period");
            }
        }
        Ok(self.stats.snapshot())
    }
}

/// Call every hook for each event, in order. A panic in a hook is logged
/// and does not stop the others.
async fn run_hooks(mut rx: mpsc::UnboundedReceiver<JobEvent>, hooks: Vec<EventHook>) {
    while let Some(event) = rx.recv().await {
        for hook in &hooks {
            let call = std::panic::AssertUnwindSafe(|| hook(&event));
            if std::panic::catch_unwind(call).is_err() {
                tracing::error!(job_id = %event.job_id, state = %event.state.as_str(),
                    "a lifecycle hook panicked; skipping it for this event");
            }
        }
    }
}

/// How often a worker engine rewrites its buffer row when nothing in it
/// changed, so [`BUFFER_ROW_EXPIRY`] never removes a live engine's row.
pub const BUFFER_REFRESH: Duration = Duration::from_secs(300);

/// Buffer rows not refreshed for this long belong to engines that died;
/// each engine removes them as it starts.
pub const BUFFER_ROW_EXPIRY: Duration = Duration::from_secs(3600);

/// What an engine last said it holds buffered.
#[derive(Default)]
struct BufferReport {
    said: Vec<i64>,
    at: Option<std::time::Instant>,
}

impl BufferReport {
    /// Publish the engine's buffered (claimed, not started, still ours)
    /// jobs when they changed, or when a non-empty report is due for a
    /// refresh: one statement at most per call, none while nothing changes.
    async fn publish(
        &mut self,
        pool: &sqlx::PgPool,
        plane: &PgExecPlane,
        instance_id: uuid::Uuid,
        in_flight: &InFlight,
    ) {
        let mut now: Vec<i64> = in_flight
            .lock()
            .expect("in-flight lock")
            .iter()
            .filter(|(_, r)| r.abort.is_none() && !r.cancel.is_cancelled())
            .map(|(t, _)| t.job_id.0)
            .collect();
        now.sort_unstable();
        let refresh_due = !now.is_empty() && self.at.is_none_or(|t| t.elapsed() >= BUFFER_REFRESH);
        if now == self.said && !refresh_due {
            return;
        }
        let written = async {
            let mut conn = pool.acquire().await?;
            if now.is_empty() {
                plane.clear_buffer(&mut conn, instance_id).await
            } else {
                plane.publish_buffer(&mut conn, instance_id, &now).await
            }
        }
        .await;
        match written {
            Ok(()) => {
                self.said = now;
                self.at = Some(std::time::Instant::now());
            }
            Err(err) => tracing::debug!(error = %err,
                "could not publish the buffered jobs; will retry"),
        }
    }
}

/// Keep long attempts alive. Short jobs finish before their first
/// heartbeat is due and never touch the lease ring. The cadence follows the
/// rescue bound the substrate publishes (a third of it, at most `at_most`),
/// re-read every `SETTINGS_REFRESH`, so maintenance in another process with
/// a short `--rescue-after` does not take healthy long jobs. Each round
/// also publishes which claimed jobs wait in the buffer, not started
/// ([`PgExecPlane::publish_buffer`]), when that changed.
async fn heartbeat_long_jobs(
    pool: sqlx::PgPool,
    plane: Arc<PgExecPlane>,
    in_flight: InFlight,
    at_most: Duration,
    instance_id: uuid::Uuid,
) {
    use crate::ExecPlane;
    let mut cadence = at_most;
    let mut read_at: Option<tokio::time::Instant> = None;
    let mut beaten: HashMap<AttemptToken, std::time::Instant> = HashMap::new();
    let mut report = BufferReport::default();
    let gc = async {
        let mut conn = pool.acquire().await?;
        plane.gc_buffers(&mut conn, BUFFER_ROW_EXPIRY).await
    }
    .await;
    if let Err(err) = gc {
        tracing::debug!(error = %err, "could not remove expired buffer rows");
    }
    loop {
        if read_at.is_none_or(|t| t.elapsed() >= SETTINGS_REFRESH) {
            read_at = Some(tokio::time::Instant::now());
            let bound = async {
                let mut conn = pool.acquire().await?;
                plane.rescue_bound(&mut conn).await
            }
            .await;
            match bound {
                Ok(bound) => {
                    let next =
                        bound.map_or(at_most, |b| awa_core::bounds::heartbeat_cadence(b, at_most));
                    if next != cadence {
                        tracing::info!(rescue_after = ?bound, cadence = ?next,
                            "heartbeat cadence follows the substrate's rescue bound");
                        cadence = next;
                    }
                }
                Err(err) => tracing::warn!(error = %err,
                    "could not read the rescue bound; keeping the current heartbeat cadence"),
            }
        }
        // An attempt already known to be lost is not heartbeated again (its
        // handler has the cancel grace left, then it is dropped).
        let due: Vec<(AttemptToken, CancellationToken)> = {
            let running = in_flight.lock().expect("in-flight lock");
            beaten.retain(|t, _| running.contains_key(t));
            running
                .iter()
                .filter(|(_, r)| !r.cancel.is_cancelled())
                .filter(|(t, r)| beaten.get(t).copied().unwrap_or(r.since).elapsed() >= cadence)
                .map(|(t, r)| (*t, r.cancel.clone()))
                .collect()
        };
        for (token, cancel) in due {
            let alive = async {
                let mut conn = pool.acquire().await?;
                plane
                    .heartbeat(&mut conn, &token, &Default::default())
                    .await
            }
            .await;
            match alive {
                Ok(true) => {
                    beaten.insert(token, std::time::Instant::now());
                }
                Ok(false) => {
                    // Once per attempt: it is skipped from now on.
                    if !cancel.is_cancelled() {
                        cancel.cancel();
                        tracing::warn!(job_id = %token.job_id, run_lease = %token.run_lease,
                            "a heartbeat found the attempt is no longer ours (cancelled or rescued); \
                             its handler is told to stop and its result will be rejected");
                    }
                }
                Err(err) => tracing::warn!(error = %err, "heartbeat failed; will retry"),
            }
        }
        report.publish(&pool, &plane, instance_id, &in_flight).await;
        tokio::time::sleep(cadence.min(SETTINGS_REFRESH)).await;
    }
}
