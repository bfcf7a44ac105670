//! Fire due periodic jobs (`crate::cron::fire_due`) at the database's clock,
//! so leaders on machines with skewed clocks agree on what is due.

use super::{MaintTask, TaskOutcome};
use crate::MaintError;
use async_trait::async_trait;
use awa_core::SchemaName;
use std::time::Duration;

#[derive(Debug)]
pub struct Cron {
    schema: SchemaName,
    interval: Duration,
}

impl Cron {
    pub fn new(schema: SchemaName, interval: Duration) -> Self {
        Self { schema, interval }
    }
}

#[async_trait]
impl MaintTask for Cron {
    fn name(&self) -> &'static str {
        "cron"
    }

    fn interval(&self) -> Duration {
        self.interval
    }

    async fn run_once(&self, pool: &sqlx::PgPool) -> Result<TaskOutcome, MaintError> {
        let now: chrono::DateTime<chrono::Utc> =
            sqlx::query_scalar(include_str!("../../sql/clock_now.sql"))
                .fetch_one(pool)
                .await?;
        let fired = crate::cron::fire_due(pool, &self.schema, now).await?;
        Ok(if fired.is_empty() {
            TaskOutcome::Idle
        } else {
            TaskOutcome::Worked {
                items: fired.len() as u64,
            }
        })
    }
}
