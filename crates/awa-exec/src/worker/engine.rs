//! One substrate's share of a worker: its dispatchers (one per queue), its
//! completer and its heartbeats, all on one `PgExecPlane`. A worker runs
//! an engine for every substrate the routing reads (one, except during a
//! storage transition) and starts and retires them as the routing changes.
//!
//! Engines of one worker share the queues' semaphores, so a queue's
//! concurrency holds across substrates, and they compete for those permits
//! as equals: during a transition the old and the new substrate are worked
//! fairly, neither first. Each engine keeps its own in-flight map and
//! completer, so every attempt is finished, heartbeated and released on
//! the substrate that handed it out.

use super::{
    Attempts, Done, InFlight, JobEvent, Stats, Wakers, WorkerConfig, completer, dispatcher,
};
use crate::PgExecPlane;
use crate::worker::handler::Handler;
use awa_core::SchemaName;
use std::collections::HashMap;
use std::sync::Arc;
use tokio::sync::{Notify, Semaphore, mpsc, watch};
use tokio::task::JoinHandle;

/// What every engine of a worker shares.
pub(crate) struct Shared {
    pub pool: sqlx::PgPool,
    pub config: WorkerConfig,
    pub handlers: Arc<HashMap<String, Arc<dyn Handler>>>,
    pub semaphores: Vec<(Arc<Semaphore>, usize)>,
    pub stats: Arc<Stats>,
    pub events: Option<mpsc::UnboundedSender<JobEvent>>,
    pub wakers: Wakers,
    /// Every engine's in-flight map, for the cancel notifications.
    pub attempts: Attempts,
}

pub(crate) struct Engine {
    pub schema: SchemaName,
    stop: watch::Sender<bool>,
    dispatchers: Vec<JoinHandle<()>>,
    completer: JoinHandle<()>,
    heartbeats: JoinHandle<()>,
    in_flight: InFlight,
    done: Option<mpsc::UnboundedSender<Done>>,
    notifies: Vec<(String, Arc<Notify>)>,
    attempts: Attempts,
    pool: sqlx::PgPool,
    plane: Arc<PgExecPlane>,
    instance_id: uuid::Uuid,
}

impl Engine {
    pub fn start(shared: &Shared, schema: SchemaName) -> Self {
        let plane = Arc::new(PgExecPlane::new(schema.clone()));
        let (stop, stop_rx) = watch::channel(false);
        let (done_tx, done_rx) = mpsc::unbounded_channel::<Done>();
        let in_flight: InFlight = Default::default();
        let completer = tokio::spawn(completer::run(
            shared.pool.clone(),
            plane.clone(),
            done_rx,
            shared.stats.clone(),
            shared.events.clone(),
        ));
        let mut dispatchers = Vec::new();
        let mut notifies = Vec::new();
        let kind_timeouts = Arc::new(shared.config.kind_timeouts.clone());
        for ((queue, concurrency), (semaphore, _)) in
            shared.config.queues.iter().zip(&shared.semaphores)
        {
            let wake = Arc::new(Notify::new());
            notifies.push((queue.as_str().to_string(), wake.clone()));
            dispatchers.push(tokio::spawn(dispatcher::run(dispatcher::Dispatcher {
                pool: shared.pool.clone(),
                plane: plane.clone(),
                queue: queue.clone(),
                semaphore: semaphore.clone(),
                concurrency: *concurrency,
                batch: shared.config.claim_batch,
                poll_interval: shared.config.poll_interval,
                instance_id: shared.config.instance_id,
                handlers: shared.handlers.clone(),
                wake,
                stop: stop_rx.clone(),
                done: done_tx.clone(),
                events: shared.events.is_some(),
                in_flight: in_flight.clone(),
                stats: shared.stats.clone(),
                cancel_grace: shared.config.cancel_grace,
                kind_timeouts: kind_timeouts.clone(),
            })));
        }
        {
            let mut wakers = shared.wakers.lock().expect("wakers lock");
            for (queue, wake) in &notifies {
                wakers.entry(queue.clone()).or_default().push(wake.clone());
            }
        }
        shared
            .attempts
            .lock()
            .expect("attempts lock")
            .push(in_flight.clone());
        let heartbeat_plane = plane.clone();
        let heartbeats = tokio::spawn(super::heartbeat_long_jobs(
            shared.pool.clone(),
            plane,
            in_flight.clone(),
            shared.config.heartbeat_interval,
            shared.config.instance_id,
        ));
        tracing::debug!(schema = %schema, "worker engine started");
        Self {
            schema,
            stop,
            dispatchers,
            completer,
            heartbeats,
            in_flight,
            done: Some(done_tx),
            notifies,
            attempts: shared.attempts.clone(),
            pool: shared.pool.clone(),
            plane: heartbeat_plane,
            instance_id: shared.config.instance_id,
        }
    }

    /// Stop claiming: dispatchers release what they buffered and end;
    /// running jobs go on and are finished here as usual.
    pub fn stop_claiming(&self, wakers: &Wakers) {
        let _ = self.stop.send(true);
        let mut wakers = wakers.lock().expect("wakers lock");
        for (queue, wake) in &self.notifies {
            if let Some(list) = wakers.get_mut(queue) {
                list.retain(|w| !Arc::ptr_eq(w, wake));
            }
        }
    }

    /// Whether a retired engine has nothing left: its dispatchers ended
    /// and no attempt it handed out is still open.
    pub fn is_idle(&self) -> bool {
        self.dispatchers.iter().all(|d| d.is_finished())
            && self.in_flight.lock().expect("in-flight lock").is_empty()
    }

    /// Wait for the dispatchers, up to `deadline`; abandon those that do
    /// not return (a claim the database does not answer; a claim that did
    /// commit is rescued).
    pub async fn join_dispatchers(&mut self, deadline: tokio::time::Instant) {
        for d in self.dispatchers.drain(..) {
            let abort = d.abort_handle();
            if tokio::time::timeout_at(deadline, d).await.is_err() {
                tracing::warn!(schema = %self.schema,
                    "a claim did not return within the grace period; abandoning it");
                abort.abort();
            }
        }
    }

    /// Release whatever is still held (running past the grace period, or
    /// buffered by an abandoned dispatcher) and stop heartbeating. Returns
    /// how many attempts were released.
    pub fn release_all(&mut self) -> usize {
        self.heartbeats.abort();
        let left: Vec<_> = self
            .in_flight
            .lock()
            .expect("in-flight lock")
            .drain()
            .collect();
        let n = left.len();
        if let Some(done) = &self.done {
            for (token, running) in left {
                if let Some(abort) = running.abort {
                    abort.abort();
                }
                let _ = done.send((token, crate::Finish::Release, None));
            }
        }
        n
    }

    /// Close the completer's channel and wait for it to record what it
    /// holds, up to `deadline`. False when it had to be abandoned.
    pub async fn finish(mut self, deadline: tokio::time::Instant) -> bool {
        self.heartbeats.abort();
        self.done = None;
        self.attempts
            .lock()
            .expect("attempts lock")
            .retain(|m| !Arc::ptr_eq(m, &self.in_flight));
        let abort = self.completer.abort_handle();
        if tokio::time::timeout_at(deadline, &mut self.completer)
            .await
            .is_err()
        {
            abort.abort();
            return false;
        }
        // Nothing is buffered any more (best effort: a row left behind
        // names attempts that are closed or will be rescued).
        let cleared = tokio::time::timeout_at(deadline, async {
            let mut conn = self.pool.acquire().await?;
            self.plane.clear_buffer(&mut conn, self.instance_id).await
        })
        .await;
        if !matches!(cleared, Ok(Ok(()))) {
            tracing::debug!(schema = %self.schema, "could not clear the buffer row");
        }
        tracing::debug!(schema = %self.schema, "worker engine finished");
        true
    }
}
