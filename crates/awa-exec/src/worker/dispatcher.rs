//! Per-queue claiming, and the notification listener that wakes it.

use super::{InFlight, Stats, handler::*};
use crate::{ExecPlane, Finish, Frontier, PgExecPlane};
use awa_core::{AttemptToken, QueueName};
use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;
use tokio::sync::{Notify, Semaphore, mpsc, watch};

pub(crate) struct Dispatcher {
    pub pool: sqlx::PgPool,
    pub plane: Arc<PgExecPlane>,
    pub queue: QueueName,
    pub semaphore: Arc<Semaphore>,
    pub batch: usize,
    pub poll_interval: Duration,
    pub instance_id: uuid::Uuid,
    pub handlers: Arc<HashMap<String, Arc<dyn Handler>>>,
    pub wake: Arc<Notify>,
    pub stop: watch::Receiver<bool>,
    pub done: mpsc::UnboundedSender<(AttemptToken, Finish)>,
    pub in_flight: InFlight,
    pub stats: Arc<Stats>,
}

/// While work is visible but the claim frontier has not settled past it,
/// look again after this long, doubling up to `SETTLE_MAX`.
const SETTLE_FIRST: Duration = Duration::from_millis(1);
const SETTLE_MAX: Duration = Duration::from_millis(32);

pub(crate) async fn run(mut d: Dispatcher) {
    let mut frontier = Frontier::default();
    let mut stop = d.stop.clone();
    let mut settle = SETTLE_FIRST;
    loop {
        if *stop.borrow() {
            return;
        }
        // Wait for capacity.
        let free = d.semaphore.available_permits();
        if free == 0 {
            tokio::select! {
                permit = d.semaphore.clone().acquire_owned() => drop(permit),
                _ = stop.changed() => {}
            }
            continue;
        }
        let want = free.min(d.batch);
        let claimed = async {
            let mut conn = d.pool.acquire().await?;
            d.plane
                .claim(
                    &mut conn,
                    &d.queue,
                    want as i32,
                    &mut frontier,
                    Some(d.instance_id),
                )
                .await
        }
        .await;
        let jobs = match claimed {
            Ok(jobs) => jobs,
            Err(err) => {
                tracing::error!(queue = %d.queue, error = %err, "claim failed; retrying after the poll interval");
                tokio::select! {
                    _ = tokio::time::sleep(d.poll_interval) => {}
                    _ = stop.changed() => {}
                }
                continue;
            }
        };
        let got = jobs.len();
        d.stats.claimed.fetch_add(got as u64, Ordering::Relaxed);
        for job in jobs {
            spawn_job(&mut d, job);
        }
        if got > 0 {
            // Work is flowing: claim again at once (an idle claim is cheap:
            // it returns before assigning a transaction id).
            settle = SETTLE_FIRST;
            continue;
        }
        if frontier.is_waiting() {
            // The notification for this work has already come; the frontier
            // just has not settled. Look again soon, backing off.
            tokio::select! {
                _ = tokio::time::sleep(settle) => {}
                _ = stop.changed() => {}
            }
            settle = (settle * 2).min(SETTLE_MAX);
            continue;
        }
        settle = SETTLE_FIRST;
        tokio::select! {
            _ = d.wake.notified() => {}
            _ = tokio::time::sleep(d.poll_interval) => {}
            _ = stop.changed() => {}
        }
    }
}

fn spawn_job(d: &mut Dispatcher, job: awa_core::ClaimedJob) {
    let permit = d
        .semaphore
        .clone()
        .try_acquire_owned()
        .expect("claimed no more jobs than free permits");
    let token = job.token;
    let handler = d
        .handlers
        .get(&job.kind)
        .or_else(|| d.handlers.get(""))
        .cloned();
    let lost = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let ctx = JobContext {
        job,
        pool: d.pool.clone(),
        plane: d.plane.clone(),
        shutdown: d.stop.clone(),
        lost: lost.clone(),
    };
    let done = d.done.clone();
    let in_flight = d.in_flight.clone();
    // The map entry must exist before the job can finish, so insert under
    // the lock and spawn while holding it.
    let mut guard = in_flight.lock().expect("in-flight lock");
    let task = tokio::spawn({
        let in_flight = d.in_flight.clone();
        async move {
            let kind = ctx.job.kind.clone();
            let result = match handler {
                Some(h) => {
                    // A panicking handler must not lose the job: run it in
                    // its own task and turn a panic into a retry.
                    match tokio::spawn(async move { h.handle(ctx).await }).await {
                        Ok(result) => result,
                        Err(join) => Err(JobError::Retry(format!("handler panicked: {join}"))),
                    }
                }
                None => Err(JobError::Permanent(format!(
                    "no handler is registered for job kind {kind:?}"
                ))),
            };
            let finish = match result {
                Ok(Outcome::Complete) => Finish::Complete,
                Ok(Outcome::Snooze(delay)) => Finish::Snooze { delay },
                Ok(Outcome::Cancel(reason)) => Finish::Cancel { reason },
                Err(JobError::Retry(error)) => Finish::Retry { delay: None, error },
                Err(JobError::RetryAfter(delay, error)) => Finish::Retry {
                    delay: Some(delay),
                    error,
                },
                Err(JobError::Permanent(error)) => Finish::Fail { error },
            };
            let mine = in_flight
                .lock()
                .expect("in-flight lock")
                .remove(&token)
                .is_some();
            if mine {
                let _ = done.send((token, finish));
            }
            drop(permit);
        }
    });
    guard.insert(
        token,
        super::Running {
            abort: task.abort_handle(),
            since: std::time::Instant::now(),
            lost,
        },
    );
}

/// Wake dispatchers when `awa_ready` names their queue. Notifications are
/// an optimisation: if the listener is down, polling still finds the work.
pub(crate) async fn listen(
    pool: sqlx::PgPool,
    wakers: HashMap<String, Arc<Notify>>,
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
        if let Err(err) = listener.listen("awa_ready").await {
            tracing::warn!(error = %err, "LISTEN failed; polling until it is back");
            tokio::time::sleep(Duration::from_secs(1)).await;
            continue;
        }
        loop {
            tokio::select! {
                msg = listener.recv() => match msg {
                    Ok(n) => {
                        if let Some(w) = wakers.get(n.payload()) {
                            w.notify_one();
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
