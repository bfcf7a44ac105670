//! While a substrate only drains (the old one in the mixed phase, one in
//! `awa.storage_draining`), move its deferred and dead-lettered jobs to
//! the write substrate, so its retries, snoozes and promotions land there
//! and it ends up holding nothing but history; and stop routing to a
//! draining substrate once it is empty and no transaction that could still
//! write to it is open.

use super::{MaintTask, TaskOutcome};
use crate::MaintError;
use async_trait::async_trait;
use std::time::Duration;

#[derive(Debug)]
pub struct Transfer {
    batch: i32,
    interval: Duration,
}

impl Transfer {
    pub fn new(interval: Duration) -> Self {
        Self {
            batch: 2000,
            interval,
        }
    }
}

#[async_trait]
impl MaintTask for Transfer {
    fn name(&self) -> &'static str {
        "transfer"
    }

    fn interval(&self) -> Duration {
        self.interval
    }

    async fn run_once(&self, pool: &sqlx::PgPool) -> Result<TaskOutcome, MaintError> {
        let mut conn = pool.acquire().await?;
        let routing = awa_control::routing::read(&mut conn).await?;
        let write = routing.write().clone();
        let mut items = 0u64;
        for schema in routing.reads() {
            if !routing.drains(&schema) {
                continue;
            }
            // Bounded per pass; the next pass takes the rest.
            for _ in 0..10 {
                let moved =
                    awa_control::routing::transfer(&mut conn, &schema, &write, self.batch).await?;
                items += moved;
                if moved < self.batch as u64 {
                    break;
                }
            }
            if routing.draining.contains(&schema)
                && awa_control::routing::release_drained(&mut conn, &schema).await?
            {
                tracing::info!(schema = %schema, "substrate drained; routing no longer reads it");
                items += 1;
            }
        }
        Ok(if items == 0 {
            TaskOutcome::Idle
        } else {
            TaskOutcome::Worked { items }
        })
    }
}
