//! Drop failed and cancelled jobs kept longer than their substrate's
//! failure retention (ADR 11): `failure_entries` is outside the rings, so
//! this pass is what keeps it bounded (failure rate x retention).

use super::{MaintTask, TaskOutcome};
use crate::MaintError;
use async_trait::async_trait;
use awa_core::SchemaName;
use awa_history::PgHistoryPlane;
use std::time::Duration;

/// Rows per statement, and statements per pass: a pass deletes at most
/// 50,000 rows, each statement a short transaction of its own.
const BATCH: i64 = 5000;
const BATCHES_PER_PASS: usize = 10;

#[derive(Debug)]
pub struct FailureRetention {
    plane: PgHistoryPlane,
    interval: Duration,
}

impl FailureRetention {
    pub fn new(schema: SchemaName, interval: Duration) -> Self {
        Self {
            plane: PgHistoryPlane::new(schema),
            interval,
        }
    }
}

#[async_trait]
impl MaintTask for FailureRetention {
    fn name(&self) -> &'static str {
        "failure_retention"
    }

    fn interval(&self) -> Duration {
        self.interval
    }

    async fn run_once(&self, pool: &sqlx::PgPool) -> Result<TaskOutcome, MaintError> {
        let mut conn = pool.acquire().await?;
        let mut removed = 0;
        for _ in 0..BATCHES_PER_PASS {
            let n = self.plane.prune_failures(&mut conn, BATCH).await?;
            removed += n;
            if (n as i64) < BATCH {
                break;
            }
        }
        Ok(if removed == 0 {
            TaskOutcome::Idle
        } else {
            TaskOutcome::Worked { items: removed }
        })
    }
}
