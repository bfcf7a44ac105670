//! How a worker runs: its settings, their defaults and bounds, and the
//! fixed intervals the worker's tasks keep.

use awa_core::{QueueName, SchemaName};
use std::collections::HashMap;
use std::time::Duration;

/// How a worker runs.
#[derive(Debug, Clone)]
pub struct WorkerConfig {
    pub schema: SchemaName,
    /// Queues and the number of jobs of each that may run at once.
    pub queues: Vec<(QueueName, usize)>,
    /// Most jobs claimed in one round trip.
    pub claim_batch: usize,
    /// How often an idle queue is polled when no notification arrives.
    pub poll_interval: Duration,
    /// How long shutdown waits for in-flight jobs before releasing them.
    /// Shutdown as a whole takes at most this plus [`RECORD_GRACE`],
    /// whatever the database does.
    pub shutdown_grace: Duration,
    /// The longest cadence at which jobs running longer than it are
    /// heartbeated. The worker heartbeats faster when the substrate's
    /// published rescue bound asks for it: at a third of that bound
    /// (`awa_core::bounds::heartbeat_cadence`), re-read every
    /// [`SETTINGS_REFRESH`].
    pub heartbeat_interval: Duration,
    /// How long a handler whose attempt was cancelled (or rescued) may run
    /// on after it was told ([`JobContext::cancelled`](super::JobContext::cancelled)) before the worker
    /// drops it and frees its slot. Default [`DEFAULT_CANCEL_GRACE`].
    pub cancel_grace: Duration,
    /// Each kind's default timeout (see [`awa_core::timeout`]): a job of
    /// the kind without a timeout of its own whose handler runs longer is
    /// dropped at the deadline and its attempt fails with a timeout error
    /// (retried by the retry policy). Kinds not named have none.
    pub kind_timeouts: HashMap<String, Duration>,
    pub instance_id: uuid::Uuid,
}

/// The default [`WorkerConfig::claim_batch`]. The most a claim takes; the
/// dispatcher asks for that much only when jobs prove short (the buffer
/// holds about 50 ms of work), so long jobs are still claimed a few at a
/// time. A claim's fixed cost (round trip, commit, the statement's set-up)
/// is paid per call: draining 200,000 no-op jobs from outside (`awa worker
/// run --concurrency 64`, leader on, analyzed) went from 23,500/s at 128 to
/// 29,000-31,000/s at 256 and 29,700/s at 512 with the leader's shutdown
/// second still in; 35,000-38,000/s at 512 without it (docs/benchmarks.md,
/// 2026-12-07).
pub const DEFAULT_CLAIM_BATCH: usize = 512;

/// The default [`WorkerConfig::cancel_grace`]: long enough for a handler
/// that watches [`JobContext::cancelled`](super::JobContext::cancelled) to clean up, short enough that a
/// cancelled job does not hold its slot.
pub const DEFAULT_CANCEL_GRACE: Duration = Duration::from_secs(5);

impl WorkerConfig {
    pub fn new(schema: SchemaName, queues: Vec<(QueueName, usize)>) -> Self {
        Self {
            schema,
            queues,
            claim_batch: DEFAULT_CLAIM_BATCH,
            poll_interval: Duration::from_millis(250),
            shutdown_grace: Duration::from_secs(10),
            heartbeat_interval: Duration::from_secs(15),
            cancel_grace: DEFAULT_CANCEL_GRACE,
            kind_timeouts: HashMap::new(),
            instance_id: uuid::Uuid::new_v4(),
        }
    }
}

/// How often a worker re-reads the substrate's published rescue bound. The
/// rescue task waits [`RESCUE_BOUND_ADOPTION`] after lowering the bound, so
/// every worker has read it and heartbeated its jobs before it applies.
pub const SETTINGS_REFRESH: Duration = Duration::from_secs(1);

/// How long after a lower rescue bound is published before maintenance
/// rescues by it: a worker re-reads it within [`SETTINGS_REFRESH`] and then
/// heartbeats every job older than the new cadence at its next tick (at
/// most another `SETTINGS_REFRESH`), plus a refresh of slack.
pub const RESCUE_BOUND_ADOPTION: Duration = Duration::from_secs(3);

/// After the shutdown grace period, how long the worker still tries to
/// record outstanding results (finished jobs and releases). What is not
/// recorded by then stays open and is rescued by maintenance once stale:
/// at-least-once, never a shutdown that does not end.
pub const RECORD_GRACE: Duration = Duration::from_secs(2);

impl WorkerConfig {
    /// Check every setting against `awa_core::bounds`.
    pub fn validate(&self) -> Result<(), awa_core::InvalidInput> {
        use awa_core::bounds;
        if self.queues.is_empty() {
            return Err(awa_core::InvalidInput::Name {
                what: "worker queues",
                value: String::new(),
                why: "a worker needs at least one queue to serve".into(),
            });
        }
        for (_, concurrency) in &self.queues {
            bounds::CONCURRENCY.check(i64::try_from(*concurrency).unwrap_or(i64::MAX))?;
        }
        bounds::CLAIM_BATCH.check(i64::try_from(self.claim_batch).unwrap_or(i64::MAX))?;
        bounds::POLL_INTERVAL.check(self.poll_interval)?;
        bounds::SHUTDOWN_GRACE.check(self.shutdown_grace)?;
        bounds::HEARTBEAT_INTERVAL.check(self.heartbeat_interval)?;
        bounds::CANCEL_GRACE.check(self.cancel_grace)?;
        for timeout in self.kind_timeouts.values() {
            bounds::JOB_TIMEOUT.check(*timeout)?;
        }
        Ok(())
    }
}
