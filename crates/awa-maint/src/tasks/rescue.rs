//! Rescue abandoned attempts (dead workers, missed deadlines, expired
//! callback waits) through the guarded finish path, so they run again.
//!
//! Each pass first publishes the staleness bound to the substrate
//! (`{schema}.exec_settings`), where workers read it to heartbeat at a third
//! of it. After the bound is lowered (or first published), rescue waits
//! `RESCUE_BOUND_ADOPTION` so every worker has adopted the faster cadence
//! before it is applied: a healthy long job is never taken for a dead one.

use super::{MaintTask, TaskOutcome};
use crate::MaintError;
use async_trait::async_trait;
use awa_core::SchemaName;
use awa_exec::worker::RESCUE_BOUND_ADOPTION;
use awa_exec::{ExecPlane, PgExecPlane, Published};
use std::time::Duration;
use tokio::time::Instant;

#[derive(Debug)]
pub struct Rescue {
    plane: PgExecPlane,
    stale: Duration,
    interval: Duration,
    /// Until when workers may still heartbeat for a longer, older bound.
    adopting_until: std::sync::Mutex<Option<Instant>>,
}

impl Rescue {
    /// `stale`: how long an attempt may go without a heartbeat (within
    /// `awa_core::bounds::RESCUE_AFTER`). Workers heartbeat at a third of
    /// it once it is published.
    pub fn new(schema: SchemaName, stale: Duration, interval: Duration) -> Self {
        Self {
            plane: PgExecPlane::new(schema),
            stale,
            interval,
            adopting_until: std::sync::Mutex::new(None),
        }
    }
}

#[async_trait]
impl MaintTask for Rescue {
    fn name(&self) -> &'static str {
        "rescue"
    }

    fn interval(&self) -> Duration {
        self.interval
    }

    async fn run_once(&self, pool: &sqlx::PgPool) -> Result<TaskOutcome, MaintError> {
        let mut conn = pool.acquire().await?;
        if let Published::Changed { previous } = self
            .plane
            .publish_rescue_bound(&mut conn, self.stale)
            .await?
            && previous.is_none_or(|p| p > self.stale)
        {
            *self.adopting_until.lock().expect("rescue state") =
                Some(Instant::now() + RESCUE_BOUND_ADOPTION);
        }
        let adopting = *self.adopting_until.lock().expect("rescue state");
        if let Some(until) = adopting
            && Instant::now() < until
        {
            return Ok(TaskOutcome::Skipped {
                reason: format!(
                    "the rescue bound was lowered to {}; waiting {:?} for workers to heartbeat at the new cadence",
                    awa_core::bounds::format_duration(self.stale),
                    until - Instant::now()
                ),
            });
        }
        let rescued = self.plane.rescue_stale(&mut conn, self.stale, 1000).await?;
        Ok(if rescued == 0 {
            TaskOutcome::Idle
        } else {
            TaskOutcome::Worked { items: rescued }
        })
    }
}
