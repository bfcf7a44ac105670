//! Per-queue claiming into a small local buffer, and the notification
//! listener that wakes it.
//!
//! The dispatcher claims ahead of free permits: it keeps up to a bounded
//! number of claimed jobs waiting (sized from the observed job duration,
//! at most `max(claim_batch, 2 x concurrency)` jobs and about one claim
//! batch of bytes), refills when half of them are gone, and starts one as
//! each permit frees, with the claim call itself running concurrently.
//! While claims come back full, a second claim is sent behind the one in
//! flight (`CLAIMS_IN_FLIGHT`): the server hands it the lane as the first
//! commits, so the claim stream does not wait for the worker.
//! Buffered jobs hold open batch items: they are in the in-flight map from
//! the moment they are claimed, so they are heartbeated like running
//! ones, released on shutdown, and rescued if the worker dies.

use super::{About, Done, InFlight, Stats, handler::*};
use crate::{ExecError, Finish, Frontier, PgExecPlane};
use awa_core::QueueName;
use futures::stream::{FuturesOrdered, StreamExt};
use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;
use tokio::sync::{Notify, Semaphore, mpsc, watch};
use tokio_util::sync::CancellationToken;

pub(crate) struct Dispatcher {
    pub pool: sqlx::PgPool,
    pub plane: Arc<PgExecPlane>,
    pub queue: QueueName,
    pub semaphore: Arc<Semaphore>,
    /// The queue's concurrency (the semaphore's size).
    pub concurrency: usize,
    pub batch: usize,
    pub poll_interval: Duration,
    pub instance_id: uuid::Uuid,
    pub handlers: Arc<HashMap<String, Arc<dyn Handler>>>,
    pub wake: Arc<Notify>,
    pub stop: watch::Receiver<bool>,
    pub done: mpsc::UnboundedSender<Done>,
    /// Lifecycle hooks are registered: send what they report with results.
    pub events: bool,
    pub in_flight: InFlight,
    pub stats: Arc<Stats>,
    /// How long a cancelled attempt's handler may run on before it is
    /// dropped (`WorkerConfig::cancel_grace`).
    pub cancel_grace: Duration,
    /// Each kind's default timeout (`WorkerConfig::kind_timeouts`).
    pub kind_timeouts: Arc<HashMap<String, Duration>>,
}

/// While work is visible but the claim frontier has not settled past it,
/// look again after this long, doubling up to `SETTLE_MAX`.
const SETTLE_FIRST: Duration = Duration::from_millis(1);
const SETTLE_MAX: Duration = Duration::from_millis(32);

/// How long a claimed job should wait in the local buffer before a permit
/// frees for it. The buffer is sized from the observed job duration to
/// about this much work, so short jobs are claimed in large batches (one
/// claim round trip serves many jobs) while long jobs are barely buffered
/// and stay available to other workers.
const BUFFER_HORIZON: Duration = Duration::from_millis(50);

/// Most stored args plus metadata held in the buffer before claiming
/// stops: the byte bound of one claim batch (`ready_take`), so the buffer
/// holds at most about two batches' worth of bytes.
const MAX_BUFFER_BYTES: usize = 8 << 20;

/// A claim that came back short with at least this many bytes of args and
/// metadata may have been cut by the claim batch's byte bound (8 MiB of
/// stored size, `ready_take`), not by the queue running dry: claim again
/// rather than wait for a notification.
const CUT_BY_BYTES: usize = 4 << 20;

/// Weight of the newest job duration in the running average (1/8).
const DURATION_WEIGHT_SHIFT: u32 = 3;

/// Claimed jobs not yet started, oldest first. Every one of them also has
/// an entry in the worker's in-flight map (with no task), so the heartbeat
/// task keeps it alive and shutdown releases it.
#[derive(Default)]
struct Buffer {
    jobs: VecDeque<(awa_core::ClaimedJob, usize)>,
    bytes: usize,
}

impl Buffer {
    fn push(&mut self, job: awa_core::ClaimedJob) {
        let bytes = stored_bytes(&job);
        self.bytes += bytes;
        self.jobs.push_back((job, bytes));
    }

    fn pop(&mut self) -> Option<awa_core::ClaimedJob> {
        let (job, bytes) = self.jobs.pop_front()?;
        self.bytes -= bytes;
        Some(job)
    }

    fn len(&self) -> usize {
        self.jobs.len()
    }

    fn is_empty(&self) -> bool {
        self.jobs.is_empty()
    }
}

/// About what the job's args and metadata take in storage (their JSON
/// length), counted without allocating.
fn stored_bytes(job: &awa_core::ClaimedJob) -> usize {
    struct Count(usize);
    impl std::io::Write for Count {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0 += buf.len();
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut n = Count(0);
    let _ = serde_json::to_writer(&mut n, &job.args);
    if let Some(m) = &job.metadata {
        let _ = serde_json::to_writer(&mut n, m);
    }
    n.0
}

/// How many claimed jobs to keep waiting for a permit: about
/// `BUFFER_HORIZON` of work at the observed job duration, between 1 and
/// `max`. Before any job has finished, one round of the concurrency.
fn buffer_target(concurrency: usize, max: usize, avg_job_us: u64) -> usize {
    if avg_job_us == 0 {
        return concurrency.clamp(1, max);
    }
    let horizon_us = BUFFER_HORIZON.as_micros() as u64;
    let jobs = (concurrency as u64).saturating_mul(horizon_us) / avg_job_us;
    usize::try_from(jobs).unwrap_or(max).clamp(1, max)
}

/// A claim's outcome: the frontier it hands back, how many jobs it asked
/// for, and what it got.
type ClaimResult = (
    Frontier,
    usize,
    Result<Vec<awa_core::ClaimedJob>, ExecError>,
);

/// Claims of one queue in flight at once while work is flowing. The
/// second is sent while the first runs: on a queue of one lane it waits
/// for the first's lane lock in the server and takes the lane the moment
/// the first commits, so the claim stream (a drain's bottleneck) is not
/// idle while the worker reads the first's rows and starts its jobs, nor
/// for the round trip. Only after a claim came back full: at low rates one
/// claim per wake-up, as before.
const CLAIMS_IN_FLIGHT: usize = 2;

/// Why the dispatcher is not claiming right now.
enum Hold {
    /// Claim whenever the buffer runs low.
    None,
    /// The frontier has not settled: look again at this instant.
    Settle(tokio::time::Instant),
    /// Nothing to claim: a notification or this instant (the poll).
    Idle(tokio::time::Instant),
    /// The last claim failed: look again at this instant.
    Failed(tokio::time::Instant),
}

pub(crate) async fn run(d: Dispatcher) {
    // The frontier candidate the newest claim handed back; each claim sent
    // carries a copy (any candidate is only a hint that must have settled
    // by the time a claim relies on it, ready_take's rule). Claims are
    // taken back in the order they were sent (on one lane they end in that
    // order anyway), so the last one taken back is the newest.
    let mut frontier = Frontier::default();
    let mut stop = d.stop.clone();
    let mut settle = SETTLE_FIRST;
    let mut buffer = Buffer::default();
    // Counts and bytes are both bounded: at most `max_buffer` jobs wait.
    // Two claims' worth: the refill below starts when half is gone, so
    // with short jobs a whole claim still waits while the next one runs
    // (at one claim's worth, the buffer ran dry during every claim and
    // the claim stream, the drain's bottleneck, idled between claims).
    let max_buffer = (2 * d.batch).max(2 * d.concurrency);
    let avg_job_us = Arc::new(AtomicU64::new(0));
    let mut hold = Hold::None;
    let mut claims: FuturesOrdered<std::pin::Pin<Box<dyn Future<Output = ClaimResult> + Send>>> =
        FuturesOrdered::new();
    // How many jobs the claims in flight asked for, together.
    let mut asked = 0usize;
    // The last claim came back with all it asked for: work is flowing, and
    // a second claim may be sent behind the one in flight.
    let mut flowing = false;
    loop {
        let stopping = *stop.borrow();
        if stopping {
            // Claimed, never started: give them back at once, attempt not
            // counted, so they run elsewhere. A claim still in flight is
            // waited for (the worker abandons it at the grace deadline,
            // and rescue takes what it claimed).
            release_buffer(&d, &mut buffer);
            if claims.is_empty() {
                return;
            }
        } else {
            // Start what permits allow.
            while !buffer.is_empty() {
                match d.semaphore.clone().try_acquire_owned() {
                    Ok(permit) => {
                        let job = buffer.pop().expect("non-empty");
                        start_job(&d, job, permit, &avg_job_us);
                    }
                    Err(_) => break,
                }
            }
            let room = if flowing { CLAIMS_IN_FLIGHT } else { 1 };
            while claims.len() < room {
                let now = tokio::time::Instant::now();
                let held = match hold {
                    Hold::None => false,
                    Hold::Settle(at) | Hold::Failed(at) | Hold::Idle(at) => now < at,
                };
                if held {
                    break;
                }
                hold = Hold::None;
                let free = d.semaphore.available_permits();
                let target = buffer_target(
                    d.concurrency,
                    max_buffer,
                    avg_job_us.load(Ordering::Relaxed),
                );
                // Refill once half the buffer is gone, counting what the
                // claims in flight will bring (jobs were just started for
                // every free permit, so a non-empty buffer means no permit
                // is free): claims stay large when jobs are short, and
                // barely anything waits when they are long. What is
                // claimed for free permits starts at once, so at most
                // `target <= max_buffer` jobs wait.
                let coming = buffer.len() + asked;
                let low = coming * 2 <= target;
                let want = (target + free).saturating_sub(coming).min(d.batch);
                if !(low && want > 0 && buffer.bytes < MAX_BUFFER_BYTES) {
                    break;
                }
                asked += want;
                claims.push_back(Box::pin(claim_once(
                    d.pool.clone(),
                    d.plane.clone(),
                    d.queue.clone(),
                    want,
                    frontier.clone(),
                    d.instance_id,
                )));
            }
        }

        let hold_until = match hold {
            Hold::None => None,
            Hold::Settle(at) | Hold::Idle(at) | Hold::Failed(at) => Some(at),
        };
        let idle = matches!(hold, Hold::Idle(_));
        tokio::select! {
            Some((back, wanted, result)) = claims.next(), if !claims.is_empty() => {
                asked -= wanted;
                // What this claim saw, whatever the other in flight sees.
                let waiting = back.is_waiting();
                frontier = back;
                d.stats.claim_calls.fetch_add(1, Ordering::Relaxed);
                match result {
                    Ok(jobs) => {
                        let got = jobs.len();
                        d.stats.claimed.fetch_add(got as u64, Ordering::Relaxed);
                        if got == 0 {
                            d.stats.empty_claims.fetch_add(1, Ordering::Relaxed);
                        }
                        {
                            // Registered before anything else can look, so
                            // heartbeats and shutdown see buffered jobs too.
                            let now = std::time::Instant::now();
                            let mut map = d.in_flight.lock().expect("in-flight lock");
                            for job in &jobs {
                                map.insert(job.token, super::Running {
                                    abort: None,
                                    since: now,
                                    cancel: CancellationToken::new(),
                                });
                            }
                        }
                        let claimed_bytes: usize = jobs.iter().map(stored_bytes).sum();
                        for job in jobs {
                            buffer.push(job);
                        }
                        flowing = got == wanted || claimed_bytes >= CUT_BY_BYTES;
                        if got > 0 && got < wanted && !waiting && claimed_bytes < CUT_BY_BYTES {
                            // The claim took everything it could see: the
                            // queue is drained up to a settled frontier. The
                            // next job's commit notifies (a notification
                            // that came while this claim ran is kept by the
                            // wake-up), so wait for it instead of paying for
                            // a claim that finds nothing, once per job at
                            // low rates.
                            settle = SETTLE_FIRST;
                            hold = Hold::Idle(tokio::time::Instant::now() + d.poll_interval);
                        } else if got > 0 {
                            // Work is flowing: claim again when the buffer
                            // runs low (whatever the other claim in flight
                            // came back with before this one).
                            settle = SETTLE_FIRST;
                            hold = Hold::None;
                        } else if waiting {
                            // The notification for this work has already
                            // come; the frontier just has not settled. Look
                            // again soon, backing off.
                            hold = Hold::Settle(tokio::time::Instant::now() + settle);
                            settle = (settle * 2).min(SETTLE_MAX);
                        } else {
                            settle = SETTLE_FIRST;
                            hold = Hold::Idle(tokio::time::Instant::now() + d.poll_interval);
                        }
                    }
                    Err(err) => {
                        flowing = false;
                        tracing::error!(queue = %d.queue, error = %err,
                            "claim failed; retrying after the poll interval");
                        hold = Hold::Failed(tokio::time::Instant::now() + d.poll_interval);
                    }
                }
            }
            permit = d.semaphore.clone().acquire_owned(), if !buffer.is_empty() && !stopping => {
                if let (Ok(permit), Some(job)) = (permit, buffer.pop()) {
                    start_job(&d, job, permit, &avg_job_us);
                }
            }
            _ = d.wake.notified(), if idle && !stopping => hold = Hold::None,
            _ = tokio::time::sleep_until(hold_until.unwrap_or_else(tokio::time::Instant::now)),
                if hold_until.is_some() && !stopping => hold = Hold::None,
            _ = stop.changed(), if !stopping => {}
        }
    }
}

async fn claim_once(
    pool: sqlx::PgPool,
    plane: Arc<PgExecPlane>,
    queue: QueueName,
    want: usize,
    mut frontier: Frontier,
    instance_id: uuid::Uuid,
) -> ClaimResult {
    let result = async {
        let mut conn = pool.acquire().await?;
        // Its own transaction (a pooled connection is idle): see
        // claim_committing_async for why it need not wait for the flush.
        plane
            .claim_committing_async(
                &mut conn,
                &queue,
                i32::try_from(want).unwrap_or(i32::MAX),
                &mut frontier,
                Some(instance_id),
            )
            .await
    }
    .await;
    (frontier, want, result)
}

/// Hand every buffered job back as `release` (the attempt does not count).
/// Only jobs still in the in-flight map are ours to release.
fn release_buffer(d: &Dispatcher, buffer: &mut Buffer) {
    if buffer.is_empty() {
        return;
    }
    let mut released = 0;
    let mut map = d.in_flight.lock().expect("in-flight lock");
    while let Some(job) = buffer.pop() {
        if map.remove(&job.token).is_some() {
            let _ = d.done.send((job.token, Finish::Release, None));
            released += 1;
        }
    }
    tracing::debug!(queue = %d.queue, jobs = released, "released buffered jobs");
}

fn start_job(
    d: &Dispatcher,
    job: awa_core::ClaimedJob,
    permit: tokio::sync::OwnedSemaphorePermit,
    avg_job_us: &Arc<AtomicU64>,
) {
    let token = job.token;
    let handler = d
        .handlers
        .get(&job.kind)
        .or_else(|| d.handlers.get(""))
        .cloned();
    // The entry was made when the job was claimed; it is gone if shutdown
    // already released the job, and it is cancelled if the attempt was
    // cancelled or rescued while it waited: then do not run it.
    let mut guard = d.in_flight.lock().expect("in-flight lock");
    let Some(entry) = guard.get_mut(&token) else {
        return;
    };
    if entry.cancel.is_cancelled() {
        guard.remove(&token);
        d.stats.dropped.fetch_add(1, Ordering::Relaxed);
        tracing::debug!(job_id = %token.job_id, run_lease = %token.run_lease,
            "buffered attempt is no longer ours; not running it");
        return;
    }
    let cancel = entry.cancel.clone();
    let timeout = timeout_of(&job, &d.kind_timeouts);
    // Only a job with a timeout keeps its handler for the timeout's result.
    let timed = timeout.map(|t| (t, handler.clone(), job.clone()));
    let about = (d.events || crate::metrics::enabled()).then(|| {
        Arc::new(About {
            queue: job.queue.clone(),
            kind: job.kind.clone(),
            attempt: job.attempt,
        })
    });
    let ctx = JobContext {
        job,
        pool: d.pool.clone(),
        plane: d.plane.clone(),
        shutdown: d.stop.clone(),
        cancel: cancel.clone(),
    };
    let done = d.done.clone();
    let avg = avg_job_us.clone();
    let grace = d.cancel_grace;
    let stats = d.stats.clone();
    // The map entry must hold the task before the job can finish, so spawn
    // while holding the lock.
    let task = tokio::spawn({
        let in_flight = d.in_flight.clone();
        async move {
            let began = std::time::Instant::now();
            // The cancel rule: once the attempt is no longer ours the
            // handler has `grace` to return, then its future is dropped
            // (with the handler's own) and the slot is freed. A timeout is
            // a deadline on the same select: at it the future is dropped
            // at once, the token cancelled (so a handler that cannot be
            // dropped, a sync Python one, sees it), and the attempt fails.
            let ran = tokio::select! {
                result = run_handler(handler, ctx) => Ran::Returned(result),
                _ = async {
                    cancel.cancelled().await;
                    tokio::time::sleep(grace).await;
                } => Ran::Dropped,
                _ = deadline(timeout) => Ran::TimedOut,
            };
            // An attempt already lost when its deadline came is not ours to
            // fail: whoever closed it recorded its end.
            let ran = match ran {
                Ran::TimedOut if cancel.is_cancelled() => Ran::Dropped,
                Ran::TimedOut => {
                    cancel.cancel();
                    Ran::TimedOut
                }
                other => other,
            };
            let mine = in_flight
                .lock()
                .expect("in-flight lock")
                .remove(&token)
                .is_some();
            match ran {
                Ran::Returned(result) => {
                    record_duration(&avg, began.elapsed());
                    if let Some(a) = about.as_deref() {
                        crate::metrics::handler_ran(a.queue.as_str(), &a.kind, began.elapsed());
                    }
                    if mine {
                        let _ = done.send((token, finish_for(result), about));
                    }
                }
                Ran::TimedOut => {
                    let (after, handler, job) = timed.expect("a deadline implies a timeout");
                    record_duration(&avg, began.elapsed());
                    if let Some(a) = about.as_deref() {
                        crate::metrics::handler_ran(a.queue.as_str(), &a.kind, began.elapsed());
                    }
                    tracing::warn!(job_id = %token.job_id, run_lease = %token.run_lease,
                        kind = %job.kind, timeout = ?after,
                        "the handler ran past the job's timeout; dropped it, freed its slot \
                         and failed the attempt with a timeout error");
                    if mine {
                        let result = timed_out(handler.as_deref(), &job, after);
                        let _ = done.send((token, finish_for(result), about));
                    }
                }
                Ran::Dropped => {
                    // Nothing to record: whoever cancelled or rescued the
                    // attempt closed it in the database.
                    stats.dropped.fetch_add(1, Ordering::Relaxed);
                    tracing::warn!(job_id = %token.job_id, run_lease = %token.run_lease,
                        ?grace, "the cancelled attempt's handler did not return within the \
                         cancel grace; dropped it and freed its slot");
                }
            }
            drop(permit);
        }
    });
    entry.abort = Some(task.abort_handle());
}

/// How an attempt's handler ended.
enum Ran {
    Returned(HandlerResult),
    /// Cancelled and not returned within the cancel grace.
    Dropped,
    /// Past its timeout: dropped, and the attempt fails.
    TimedOut,
}

/// The attempt's timeout: the job's own (its metadata), else its kind's.
/// A job with no metadata and a worker with no kind timeouts read nothing.
pub(crate) fn timeout_of(
    job: &awa_core::ClaimedJob,
    kind_timeouts: &HashMap<String, Duration>,
) -> Option<Duration> {
    awa_core::timeout::of(job.metadata.as_ref()).or_else(|| {
        if kind_timeouts.is_empty() {
            None
        } else {
            kind_timeouts.get(&job.kind).copied()
        }
    })
}

/// Resolves once `timeout` has passed; never without one (no timer).
async fn deadline(timeout: Option<Duration>) {
    match timeout {
        Some(t) => tokio::time::sleep(t).await,
        None => std::future::pending().await,
    }
}

/// The result of an attempt stopped at its timeout, as its handler (and
/// whatever wraps it, such as a retry policy) maps it.
pub(crate) fn timed_out(
    handler: Option<&dyn Handler>,
    job: &awa_core::ClaimedJob,
    after: Duration,
) -> HandlerResult {
    let error = JobError::Retry(awa_core::timeout::error(after));
    match handler {
        Some(h) => h.timed_out(job, error),
        None => Err(error),
    }
}

/// Run the handler for one attempt. A panicking handler must not lose the
/// job: the panic is caught at the handler future's poll and becomes a
/// retry. The handler runs inside the attempt's own task (it used to be
/// spawned as a second task per job, a task allocation and a wake-up per
/// job for nothing: dropping this future drops the handler's, as aborting
/// that task did). No handler for the kind is a permanent failure naming
/// it.
pub(crate) async fn run_handler(
    handler: Option<Arc<dyn Handler>>,
    ctx: JobContext,
) -> HandlerResult {
    use futures::FutureExt;
    match handler {
        Some(h) => match std::panic::AssertUnwindSafe(h.handle(ctx))
            .catch_unwind()
            .await
        {
            Ok(result) => result,
            Err(panic) => Err(JobError::Retry(format!(
                "handler panicked: {}",
                panic_message(panic.as_ref())
            ))),
        },
        None => Err(JobError::Permanent(format!(
            "no handler is registered for job kind {:?}",
            ctx.job.kind
        ))),
    }
}

/// A panic's message, when it carried one (`panic!` with a string).
fn panic_message(panic: &(dyn std::any::Any + Send)) -> &str {
    panic
        .downcast_ref::<&str>()
        .copied()
        .or_else(|| panic.downcast_ref::<String>().map(String::as_str))
        .unwrap_or("(no message)")
}

/// Fold one job's run time into the running average (at least 1 µs, so a
/// measured average is never mistaken for "nothing measured yet").
fn record_duration(avg: &AtomicU64, took: Duration) {
    let x = u64::try_from(took.as_micros()).unwrap_or(u64::MAX).max(1);
    let _ = avg.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |old| {
        Some(if old == 0 {
            x
        } else {
            let next = old as i128 + ((x as i128 - old as i128) >> DURATION_WEIGHT_SHIFT);
            u64::try_from(next.max(1)).unwrap_or(u64::MAX)
        })
    });
}

/// Wake dispatchers when `awa_ready` names their queue, and tell a
/// handler when `awa_cancel` names its attempt (`job_id:run_lease:why`,
/// sent by `cancel_job` and `rescue_stale` in the transaction that closed
/// it). Notifications are an optimisation: if the listener is down,
/// polling still finds the work and heartbeats still find lost attempts.
pub(crate) async fn listen(
    pool: sqlx::PgPool,
    wakers: super::Wakers,
    attempts: super::Attempts,
    mut stop: watch::Receiver<bool>,
) {
    loop {
        let mut listener = match sqlx::postgres::PgListener::connect_with(&pool).await {
            Ok(l) => l,
            Err(err) => {
                tracing::warn!(error = %err, "LISTEN connection failed; polling until it is back");
                tokio::select! {
                    _ = tokio::time::sleep(Duration::from_secs(1)) => continue,
                    _ = stop.changed() => return,
                }
            }
        };
        if let Err(err) = listener.listen_all(["awa_ready", "awa_cancel"]).await {
            tracing::warn!(error = %err, "LISTEN failed; polling until it is back");
            tokio::time::sleep(Duration::from_secs(1)).await;
            continue;
        }
        loop {
            tokio::select! {
                msg = listener.recv() => match msg {
                    Ok(n) if n.channel() == "awa_cancel" => {
                        let mut parts = n.payload().splitn(3, ':');
                        let job = parts.next().and_then(|p| p.parse::<i64>().ok());
                        let lease = parts.next().and_then(|p| p.parse::<i64>().ok());
                        let why = parts.next().unwrap_or("cancelled");
                        if let (Some(job), Some(lease)) = (job, lease) {
                            super::cancel_attempt(&attempts, job, lease, why);
                        }
                    }
                    Ok(n) => {
                        if let Some(ws) = wakers.lock().expect("wakers lock").get(n.payload()) {
                            for w in ws {
                                w.notify_one();
                            }
                        }
                    }
                    Err(err) => {
                        tracing::warn!(error = %err, "LISTEN connection lost; reconnecting");
                        break;
                    }
                },
                _ = stop.changed() => return,
            }
        }
    }
}
