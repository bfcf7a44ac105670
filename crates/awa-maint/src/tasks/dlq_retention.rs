//! Drop dead letters older than their queue's retention.

use super::{MaintTask, TaskOutcome};
use crate::MaintError;
use async_trait::async_trait;
use awa_core::SchemaName;
use awa_dlq::{DlqPlane, PgDlqPlane};
use std::time::Duration;

#[derive(Debug)]
pub struct DlqRetention {
    plane: PgDlqPlane,
    interval: Duration,
}

impl DlqRetention {
    pub fn new(schema: SchemaName, interval: Duration) -> Self {
        Self {
            plane: PgDlqPlane::new(schema),
            interval,
        }
    }
}

#[async_trait]
impl MaintTask for DlqRetention {
    fn name(&self) -> &'static str {
        "dlq_retention"
    }

    fn interval(&self) -> Duration {
        self.interval
    }

    async fn run_once(&self, pool: &sqlx::PgPool) -> Result<TaskOutcome, MaintError> {
        let mut conn = pool.acquire().await?;
        let removed = self.plane.prune_expired(&mut conn, 1000).await?;
        Ok(if removed == 0 {
            TaskOutcome::Idle
        } else {
            TaskOutcome::Worked { items: removed }
        })
    }
}
