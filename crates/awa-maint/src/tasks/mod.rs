//! Maintenance tasks: small services with one shape. Each runs on its own
//! tokio task while this process leads: wait its interval (with jitter),
//! run one pass under a timeout inside a tracing span, report a typed
//! outcome. A slow task never delays another.

mod promote;

pub use promote::Promote;

use crate::MaintError;
use async_trait::async_trait;
use std::time::Duration;

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
    loop {
        let span = tracing::info_span!("maint_task", task = task.name());
        let outcome = {
            let _e = span.enter();
            tokio::time::timeout(timeout, task.run_once(&pool)).await
        };
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
            _ = stop.changed() => return,
        }
        if *stop.borrow() {
            return;
        }
    }
}
