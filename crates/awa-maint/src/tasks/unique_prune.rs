//! Delete unique key rows that a key spec kept after their job finished,
//! once their period has ended (`awa_control::uniques::prune`).
//! Database-wide: `awa.job_uniques` serves every substrate.

use super::{MaintTask, TaskOutcome};
use crate::MaintError;
use async_trait::async_trait;
use std::time::Duration;

/// Rows deleted per pass: one short statement, never an unbounded one.
const PER_PASS: i64 = 5000;

#[derive(Debug)]
pub struct UniquePrune {
    interval: Duration,
}

impl UniquePrune {
    pub fn new(interval: Duration) -> Self {
        Self { interval }
    }
}

#[async_trait]
impl MaintTask for UniquePrune {
    fn name(&self) -> &'static str {
        "unique_prune"
    }

    fn interval(&self) -> Duration {
        self.interval
    }

    async fn run_once(&self, pool: &sqlx::PgPool) -> Result<TaskOutcome, MaintError> {
        let mut conn = pool.acquire().await?;
        let removed = awa_control::uniques::prune(&mut conn, PER_PASS).await?;
        Ok(if removed == 0 {
            TaskOutcome::Idle
        } else {
            TaskOutcome::Worked { items: removed }
        })
    }
}
