//! Reclaim sealed ring slots: retire what is proven dead, truncate what no
//! snapshot can still see. Each pass runs a few prune steps per ring so a
//! retirement is usually followed by its truncation in the same pass.

use super::{MaintTask, TaskOutcome};
use crate::MaintError;
use async_trait::async_trait;
use awa_control::rings::{PgRings, PruneOutcome, Ring};
use awa_core::SchemaName;
use std::time::Duration;

/// Most prune steps per ring per pass (each is one short transaction).
const STEPS_PER_RING: usize = 8;

#[derive(Debug)]
pub struct Prune {
    rings: PgRings,
    interval: Duration,
    lock_timeout: Duration,
    /// The leader's rotation cadence: sets the default history retention.
    rotate_interval: Duration,
}

impl Prune {
    pub fn new(schema: SchemaName, interval: Duration, rotate_interval: Duration) -> Self {
        Self {
            rings: PgRings::new(schema),
            interval,
            lock_timeout: Duration::from_millis(200),
            rotate_interval,
        }
    }
}

#[async_trait]
impl MaintTask for Prune {
    fn name(&self) -> &'static str {
        "prune"
    }

    fn interval(&self) -> Duration {
        self.interval
    }

    async fn run_once(&self, pool: &sqlx::PgPool) -> Result<TaskOutcome, MaintError> {
        let mut pruned = 0;
        let mut skipped = Vec::new();
        for ring in Ring::ALL {
            for _ in 0..STEPS_PER_RING {
                let mut conn = pool.acquire().await?;
                let outcome = self
                    .rings
                    .prune(&mut conn, ring, self.lock_timeout, self.rotate_interval)
                    .await?;
                match outcome {
                    PruneOutcome::Pruned { .. } => pruned += 1,
                    PruneOutcome::Retired { .. } => {}
                    PruneOutcome::NothingToPrune
                    | PruneOutcome::Retained { .. }
                    | PruneOutcome::LostRace { .. }
                    | PruneOutcome::LiveRows { .. } => break,
                    other => {
                        skipped.push(format!("{} ring: {other:?}", ring.as_str()));
                        break;
                    }
                }
            }
        }
        Ok(match (pruned, skipped.is_empty()) {
            (0, true) => TaskOutcome::Idle,
            (0, false) => TaskOutcome::Skipped {
                reason: skipped.join("; "),
            },
            (n, _) => TaskOutcome::Worked { items: n },
        })
    }
}
