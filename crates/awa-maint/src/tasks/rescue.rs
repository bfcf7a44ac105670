//! Rescue abandoned attempts (dead workers, missed deadlines, expired
//! callback waits) through the guarded finish path, so they run again.

use super::{MaintTask, TaskOutcome};
use crate::MaintError;
use async_trait::async_trait;
use awa_core::SchemaName;
use awa_exec::{ExecPlane, PgExecPlane};
use std::time::Duration;

#[derive(Debug)]
pub struct Rescue {
    plane: PgExecPlane,
    stale: Duration,
    interval: Duration,
}

impl Rescue {
    /// `stale`: how long an attempt may go without a heartbeat. Workers
    /// heartbeat running jobs well within it (see the worker runtime).
    pub fn new(schema: SchemaName, stale: Duration, interval: Duration) -> Self {
        Self {
            plane: PgExecPlane::new(schema),
            stale,
            interval,
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
        let rescued = self.plane.rescue_stale(&mut conn, self.stale, 1000).await?;
        Ok(if rescued == 0 {
            TaskOutcome::Idle
        } else {
            TaskOutcome::Worked { items: rescued }
        })
    }
}
