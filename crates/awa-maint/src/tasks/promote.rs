//! Promote due deferred work (scheduled, retries, snoozes, releases) into
//! the ready ring.

use super::{MaintTask, TaskOutcome};
use crate::MaintError;
use async_trait::async_trait;
use awa_core::SchemaName;
use awa_deferred::{DeferredPlane, PgDeferredPlane};
use std::time::Duration;

#[derive(Debug)]
pub struct Promote {
    plane: PgDeferredPlane,
    batch: i32,
    interval: Duration,
}

impl Promote {
    pub fn new(schema: SchemaName, interval: Duration) -> Self {
        Self {
            plane: PgDeferredPlane::new(schema),
            batch: 2000,
            interval,
        }
    }
}

#[async_trait]
impl MaintTask for Promote {
    fn name(&self) -> &'static str {
        "promote"
    }

    fn interval(&self) -> Duration {
        self.interval
    }

    async fn run_once(&self, pool: &sqlx::PgPool) -> Result<TaskOutcome, MaintError> {
        let mut total = 0u64;
        // Keep going while full batches come back, but bounded per pass.
        for _ in 0..50 {
            let mut conn = pool.acquire().await?;
            let moved = self.plane.promote_due(&mut conn, self.batch).await?;
            total += moved;
            if moved < self.batch as u64 {
                break;
            }
        }
        Ok(if total == 0 {
            TaskOutcome::Idle
        } else {
            TaskOutcome::Worked { items: total }
        })
    }
}
