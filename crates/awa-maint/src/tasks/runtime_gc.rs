//! Forget runtimes that stopped heartbeating without deregistering.

use super::{MaintTask, TaskOutcome};
use crate::MaintError;
use async_trait::async_trait;
use std::time::Duration;

#[derive(Debug)]
pub struct RuntimeGc {
    older_than: Duration,
    interval: Duration,
}

impl RuntimeGc {
    pub fn new(older_than: Duration, interval: Duration) -> Self {
        Self {
            older_than,
            interval,
        }
    }
}

#[async_trait]
impl MaintTask for RuntimeGc {
    fn name(&self) -> &'static str {
        "runtime_gc"
    }

    fn interval(&self) -> Duration {
        self.interval
    }

    async fn run_once(&self, pool: &sqlx::PgPool) -> Result<TaskOutcome, MaintError> {
        let mut conn = pool.acquire().await?;
        let removed = awa_control::runtimes::gc(&mut conn, self.older_than).await?;
        Ok(if removed == 0 {
            TaskOutcome::Idle
        } else {
            TaskOutcome::Worked { items: removed }
        })
    }
}
