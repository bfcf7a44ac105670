//! Rotate each ring on a cadence. The ring's retention window is
//! slot count x rotation interval; an idle ring does not rotate and a ring
//! whose next slot is still live waits (both are outcomes, not errors).

use super::{MaintTask, TaskOutcome};
use crate::MaintError;
use async_trait::async_trait;
use awa_control::rings::{PgRings, Ring, RotateOutcome};
use awa_core::SchemaName;
use std::time::Duration;

#[derive(Debug)]
pub struct Rotate {
    rings: PgRings,
    interval: Duration,
    by: String,
}

impl Rotate {
    pub fn new(schema: SchemaName, interval: Duration, by: String) -> Self {
        Self {
            rings: PgRings::new(schema),
            interval,
            by,
        }
    }
}

#[async_trait]
impl MaintTask for Rotate {
    fn name(&self) -> &'static str {
        "rotate"
    }

    fn interval(&self) -> Duration {
        self.interval
    }

    async fn run_once(&self, pool: &sqlx::PgPool) -> Result<TaskOutcome, MaintError> {
        let mut rotated = 0;
        let mut waiting = Vec::new();
        for ring in Ring::ALL {
            let mut conn = pool.acquire().await?;
            match self.rings.rotate(&mut conn, ring, &self.by).await? {
                RotateOutcome::Rotated { .. } => rotated += 1,
                RotateOutcome::IncomingNotEmpty { slot } => waiting.push(format!(
                    "{} ring: slot {slot} not reclaimed yet",
                    ring.as_str()
                )),
                RotateOutcome::Idle | RotateOutcome::LostRace => {}
            }
        }
        Ok(match (rotated, waiting.is_empty()) {
            (0, true) => TaskOutcome::Idle,
            (0, false) => TaskOutcome::Skipped {
                reason: waiting.join("; "),
            },
            (n, _) => TaskOutcome::Worked { items: n },
        })
    }
}
