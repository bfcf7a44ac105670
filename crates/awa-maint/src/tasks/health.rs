//! Publish queue health (depth, running, deferred, oldest waiting job) to
//! `awa.queue_health`, so operators read one small table instead of
//! scanning the planes; then the last minutes of activity (terminal counts,
//! pickup latency, waits) to `awa.queue_minutes`, the dashboard's charts.
//! First it moves the claim floor, so this measurement and every status
//! read after it skip the closed claim batches the ring still holds.

use super::{MaintTask, TaskOutcome};
use crate::MaintError;
use async_trait::async_trait;
use awa_core::SchemaName;
use awa_exec::PgExecPlane;
use awa_history::{HistoryPlane, PgHistoryPlane};
use std::time::Duration;

#[derive(Debug)]
pub struct Health {
    plane: PgHistoryPlane,
    exec: PgExecPlane,
    interval: Duration,
}

impl Health {
    pub fn new(schema: SchemaName, interval: Duration) -> Self {
        Self {
            plane: PgHistoryPlane::new(schema.clone()),
            exec: PgExecPlane::new(schema),
            interval,
        }
    }
}

#[async_trait]
impl MaintTask for Health {
    fn name(&self) -> &'static str {
        "health"
    }

    fn interval(&self) -> Duration {
        self.interval
    }

    async fn run_once(&self, pool: &sqlx::PgPool) -> Result<TaskOutcome, MaintError> {
        let mut conn = pool.acquire().await?;
        self.exec.advance_claim_floor(&mut conn).await?;
        let queues = self.plane.publish_health(&mut conn).await?;
        self.plane.publish_activity(&mut conn).await?;
        Ok(if queues == 0 {
            TaskOutcome::Idle
        } else {
            TaskOutcome::Worked { items: queues }
        })
    }
}
