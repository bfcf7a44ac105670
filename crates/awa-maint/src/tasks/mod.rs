//! Maintenance tasks: small services with one shape. Each runs on its own
//! tokio task while this process leads: wait its interval (with jitter),
//! run one pass under a timeout inside a tracing span, report a typed
//! outcome. A slow task never delays another.

mod cron;
mod dlq_retention;
mod failure_retention;
mod health;
mod promote;
mod prune;
mod rescue;
mod rotate;
mod runtime_gc;
mod transfer;
mod unique_prune;

pub use cron::Cron;
pub use dlq_retention::DlqRetention;
pub use failure_retention::FailureRetention;
pub use health::Health;
pub use promote::Promote;
pub use prune::Prune;
pub use rescue::Rescue;
pub use rotate::Rotate;
pub use runtime_gc::RuntimeGc;
pub use transfer::Transfer;
pub use unique_prune::UniquePrune;

use crate::MaintError;
use async_trait::async_trait;
use std::time::Duration;

/// Cadences of the standard task set.
#[derive(Debug, Clone)]
pub struct MaintSettings {
    /// How often due scheduled, retrying and snoozed jobs are made
    /// runnable.
    pub promote_interval: Duration,
    /// Ring rotation cadence; with N slots, terminal history is retained
    /// for about N x this (longer while a slot is pinned).
    pub rotate_interval: Duration,
    /// How often sealed ring slots are checked and reclaimed.
    pub prune_interval: Duration,
    /// An attempt without a heartbeat for this long is rescued.
    pub rescue_stale: Duration,
    /// How often stale attempts are looked for.
    pub rescue_interval: Duration,
    /// How often queue health (backlog, oldest job) is refreshed.
    pub health_interval: Duration,
    /// How often dead letters past their retention are deleted.
    pub dlq_retention_interval: Duration,
    /// How often failed and cancelled jobs past the substrate's failure
    /// retention are deleted.
    pub failure_retention_interval: Duration,
    /// Runtimes not seen for this long are forgotten.
    pub runtime_gc_after: Duration,
    /// How often due cron ticks are fired (a tick fires within about this
    /// of its time while a leader runs).
    pub cron_interval: Duration,
}

impl Default for MaintSettings {
    fn default() -> Self {
        Self {
            promote_interval: Duration::from_millis(100),
            rotate_interval: Duration::from_secs(30),
            prune_interval: Duration::from_secs(1),
            rescue_stale: Duration::from_secs(60),
            rescue_interval: Duration::from_secs(5),
            health_interval: Duration::from_secs(5),
            dlq_retention_interval: Duration::from_secs(60),
            failure_retention_interval: Duration::from_secs(5),
            runtime_gc_after: Duration::from_secs(300),
            cron_interval: Duration::from_millis(500),
        }
    }
}

impl MaintSettings {
    /// Check the operator-facing settings against `awa_core::bounds`
    /// (the rescue bound is also refused by `{schema}.exec_settings`).
    pub fn validate(&self) -> Result<(), awa_core::InvalidInput> {
        use awa_core::bounds;
        bounds::ROTATE_INTERVAL.check(self.rotate_interval)?;
        bounds::RESCUE_AFTER.check(self.rescue_stale)?;
        Ok(())
    }
}

/// Every maintenance task for one substrate and the database-wide ones,
/// each on its own cadence: what a leader pinned to `schema` runs.
pub fn standard(
    schema: &awa_core::SchemaName,
    settings: &MaintSettings,
    instance: &str,
) -> Vec<std::sync::Arc<dyn MaintTask>> {
    let mut tasks = substrate_tasks(schema, settings, instance, true);
    tasks.extend(database_tasks(settings));
    tasks
}

/// The tasks that keep one substrate bounded and healthy. `written`: the
/// substrate receives writes, so its due deferred work is promoted in
/// place; a substrate that only drains gets no promote task (the transfer
/// task moves its deferred work to the write substrate instead).
pub fn substrate_tasks(
    schema: &awa_core::SchemaName,
    settings: &MaintSettings,
    instance: &str,
    written: bool,
) -> Vec<std::sync::Arc<dyn MaintTask>> {
    use std::sync::Arc;
    let mut tasks: Vec<Arc<dyn MaintTask>> = vec![
        Arc::new(Rotate::new(
            schema.clone(),
            settings.rotate_interval,
            instance.to_string(),
        )),
        Arc::new(Prune::new(
            schema.clone(),
            settings.prune_interval,
            settings.rotate_interval,
        )),
        Arc::new(Rescue::new(
            schema.clone(),
            settings.rescue_stale,
            settings.rescue_interval,
        )),
        Arc::new(Health::new(schema.clone(), settings.health_interval)),
        Arc::new(DlqRetention::new(
            schema.clone(),
            settings.dlq_retention_interval,
        )),
        Arc::new(FailureRetention::new(
            schema.clone(),
            settings.failure_retention_interval,
        )),
    ];
    if written {
        tasks.insert(
            0,
            Arc::new(Promote::new(schema.clone(), settings.promote_interval)),
        );
    }
    tasks
}

/// The tasks that run once per database whatever the routing: runtime
/// registry garbage collection, cron, moving work out of substrates that
/// only drain, and deleting unique key rows past their period. Cron
/// enqueues through `awa.enqueue`, which routes.
pub fn database_tasks(settings: &MaintSettings) -> Vec<std::sync::Arc<dyn MaintTask>> {
    use std::sync::Arc;
    vec![
        Arc::new(RuntimeGc::new(
            settings.runtime_gc_after,
            settings.rescue_interval,
        )),
        Arc::new(Cron::new(
            awa_core::SchemaName::default_schema(),
            settings.cron_interval,
        )),
        Arc::new(Transfer::new(
            settings.promote_interval.max(Duration::from_millis(500)),
        )),
        // Rows past their period hold nothing (enqueue takes them over),
        // so this only bounds the table: the DLQ retention's cadence.
        Arc::new(UniquePrune::new(settings.dlq_retention_interval)),
    ]
}

/// What one pass of a task did.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case", tag = "outcome")]
pub enum TaskOutcome {
    /// Did `items` units of work.
    Worked { items: u64 },
    /// Nothing to do.
    Idle,
    /// Could not proceed safely now; will try again.
    Skipped { reason: String },
}

#[async_trait]
pub trait MaintTask: Send + Sync + std::fmt::Debug {
    fn name(&self) -> &'static str;
    /// Pause between passes.
    fn interval(&self) -> Duration;
    /// One pass; bounded work, never an unbounded loop.
    async fn run_once(&self, pool: &sqlx::PgPool) -> Result<TaskOutcome, MaintError>;
}

/// Run `task` until `stop` flips. Passes that overrun `timeout` are
/// abandoned (their transaction rolls back) and reported.
pub(crate) async fn run_loop(
    task: std::sync::Arc<dyn MaintTask>,
    pool: sqlx::PgPool,
    mut stop: tokio::sync::watch::Receiver<bool>,
    timeout: Duration,
) {
    use rand::Rng;
    use tracing::Instrument;
    loop {
        // The span goes with the pass's future: entered only while it is
        // polled, so it never leaks onto whatever else runs on this thread
        // across an `.await`.
        let span = tracing::info_span!("maint_task", task = task.name());
        let outcome = tokio::time::timeout(timeout, task.run_once(&pool))
            .instrument(span)
            .await;
        match outcome {
            Ok(Ok(TaskOutcome::Idle)) => tracing::trace!(task = task.name(), "idle"),
            Ok(Ok(outcome)) => tracing::debug!(task = task.name(), ?outcome, "pass done"),
            Ok(Err(err)) => tracing::warn!(task = task.name(), error = %err, "pass failed"),
            Err(_) => tracing::warn!(task = task.name(), ?timeout, "pass timed out"),
        }
        let base = task.interval();
        let jitter = base.mul_f64(rand::rng().random_range(0.0..0.2));
        tokio::select! {
            _ = tokio::time::sleep(base + jitter) => {}
            _ = crate::shutdown::stopped(&mut stop) => return,
        }
        if *stop.borrow() {
            return;
        }
    }
}
