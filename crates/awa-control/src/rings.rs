//! Ring rotation and reclamation, as the maintenance leader calls them.
//! The rules live in SQL (`fn_ring_rotate.sql`, `fn_ring_prune.sql`); this
//! is the typed door to them.

use crate::ControlError;
use awa_core::{SchemaName, sql::statement};
use sqlx::{PgConnection, Row};
use std::time::Duration;

/// The three rings of a substrate.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Ring {
    /// Ready entries, tombstones, terminal facts and count deltas.
    Queue,
    /// Claim batches and closure links.
    Claim,
    /// Leases of long-running attempts.
    Lease,
}

impl Ring {
    pub const ALL: [Ring; 3] = [Ring::Queue, Ring::Claim, Ring::Lease];

    pub fn as_str(self) -> &'static str {
        match self {
            Ring::Queue => "queue",
            Ring::Claim => "claim",
            Ring::Lease => "lease",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case", tag = "outcome")]
pub enum RotateOutcome {
    Rotated {
        from: i32,
        to: i32,
        generation: i64,
    },
    /// The current slot is empty: nothing to seal.
    Idle,
    /// The next slot still holds rows (or awaits truncation).
    IncomingNotEmpty {
        slot: i32,
    },
    /// Another rotator took this generation; nothing was written.
    LostRace,
}

#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case", tag = "outcome")]
pub enum PruneOutcome {
    /// Proven dead and logically removed; truncated on a later call.
    Retired {
        slot: i32,
    },
    Pruned {
        slot: i32,
    },
    NothingToPrune,
    /// The oldest sealed slot holding rows is still inside the history
    /// retention; nothing younger is older than it.
    Retained {
        slot: i32,
        detail: String,
    },
    /// Another pruner (an operator's `maint run --once` beside the leader)
    /// retired or truncated the slot first; nothing was written.
    LostRace {
        slot: i32,
    },
    LiveRows {
        slot: i32,
        detail: String,
    },
    /// An older snapshot could still read the slot.
    SnapshotPinned {
        slot: i32,
        detail: String,
    },
    /// A writer held the slot's tables past the lock timeout.
    Busy {
        slot: i32,
    },
    /// The role cannot see other sessions' snapshots (needs pg_read_all_stats).
    HorizonUnknown {
        slot: i32,
        detail: String,
    },
}

#[derive(Debug, Clone)]
pub struct PgRings {
    schema: SchemaName,
}

impl PgRings {
    pub fn new(schema: SchemaName) -> Self {
        Self { schema }
    }

    pub async fn rotate(
        &self,
        conn: &mut PgConnection,
        ring: Ring,
        by: &str,
    ) -> Result<RotateOutcome, ControlError> {
        let row = sqlx::query(statement(
            include_str!("../sql/call_ring_rotate.sql"),
            &self.schema,
        ))
        .bind(ring.as_str())
        .bind(by)
        .fetch_one(conn)
        .await?;
        let outcome: String = row.get("outcome");
        Ok(match outcome.as_str() {
            "rotated" => RotateOutcome::Rotated {
                from: row.get("from_slot"),
                to: row.get("to_slot"),
                generation: row.get("generation"),
            },
            "idle" => RotateOutcome::Idle,
            "incoming_not_empty" => RotateOutcome::IncomingNotEmpty {
                slot: row.get("to_slot"),
            },
            _ => RotateOutcome::LostRace,
        })
    }

    /// One prune step on `ring`. `rotate_interval` is the leader's rotation
    /// cadence; queue-ring history is kept for (queue slots - 2) x that
    /// unless the substrate sets its own retention (`set_history_retention`).
    pub async fn prune(
        &self,
        conn: &mut PgConnection,
        ring: Ring,
        lock_timeout: Duration,
        rotate_interval: Duration,
    ) -> Result<PruneOutcome, ControlError> {
        let row = sqlx::query(statement(
            include_str!("../sql/call_ring_prune.sql"),
            &self.schema,
        ))
        .bind(ring.as_str())
        .bind(lock_timeout.as_millis().clamp(1, i32::MAX as u128) as i32)
        .bind(chrono::Duration::from_std(rotate_interval).unwrap_or(chrono::Duration::days(365)))
        .fetch_one(conn)
        .await?;
        let outcome: String = row.get("outcome");
        let slot: Option<i32> = row.get("slot");
        let slot = slot.unwrap_or(-1);
        let detail: Option<String> = row.get("detail");
        let detail = detail.unwrap_or_default();
        Ok(match outcome.as_str() {
            "retired" => PruneOutcome::Retired { slot },
            "pruned" => PruneOutcome::Pruned { slot },
            "nothing_to_prune" => PruneOutcome::NothingToPrune,
            "retained" => PruneOutcome::Retained { slot, detail },
            "lost_race" => PruneOutcome::LostRace { slot },
            "live_rows" => PruneOutcome::LiveRows { slot, detail },
            "snapshot_pinned" => PruneOutcome::SnapshotPinned { slot, detail },
            "busy" => PruneOutcome::Busy { slot },
            _ => PruneOutcome::HorizonUnknown { slot, detail },
        })
    }
}
