//! Read-only description of the storage layout for operators
//! (`awa storage status`).

use crate::ControlError;
use awa_core::{SchemaName, SlotCounts, sql::statement};
use sqlx::{PgConnection, Row};

#[derive(Debug, Clone, serde::Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct RingCursor {
    pub ring: String,
    pub generation: i64,
    pub slot: i32,
    pub rotated_at: awa_core::DbTime,
}

#[derive(Debug, Clone, serde::Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct SlotRows {
    pub ring: String,
    pub slot: i32,
    pub live_rows: i64,
    pub dead_rows: i64,
}

#[derive(Debug, Clone, serde::Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct RingOutcome {
    pub ring: String,
    pub task: String,
    pub outcome: String,
    pub detail: Option<String>,
    pub at: awa_core::DbTime,
}

#[derive(Debug, Clone, serde::Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct SubstrateStatus {
    pub schema: SchemaName,
    pub slots: SlotCounts,
    pub installed_at: awa_core::DbTime,
    pub active: bool,
    /// The substrate's own history retention; `None`: automatic, (queue
    /// slots - 2) x the leader's rotate interval.
    pub history_retention_secs: Option<f64>,
    /// How long failed and cancelled jobs are kept (`failure_entries`).
    pub failure_retention_secs: f64,
    /// Failed and cancelled jobs kept now (the statistics collector's
    /// estimate).
    pub failures_kept: i64,
    /// Running attempts moved out of the rings (jobs that outlived them).
    pub parked_attempts: i64,
    pub rings: Vec<RingCursor>,
    /// Estimated rows per ring slot (statistics collector).
    pub slot_rows: Vec<SlotRows>,
    pub last_outcomes: Vec<RingOutcome>,
    /// Its part in the routing: active, target, draining, or unused.
    pub routing: String,
    /// Unfinished jobs by state, plus dead letters (`dead_lettered`).
    pub backlog: std::collections::BTreeMap<String, i64>,
    /// Live runtimes that registered this substrate.
    pub runtimes: Vec<RuntimeBackend>,
}

/// A runtime's use of one substrate (`awa.runtime_storage_backends`).
#[derive(Debug, Clone, serde::Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct RuntimeBackend {
    pub instance_id: uuid::Uuid,
    pub role: String,
    pub host: String,
    pub pid: i32,
    /// read_write (writes there) or drain (claims and finishes only).
    pub mode: String,
    pub last_seen_at: awa_core::DbTime,
}

#[derive(Debug, Clone, serde::Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct LeaderStatus {
    pub instance_id: uuid::Uuid,
    pub host: String,
    pub pid: i32,
    pub backend_pid: i32,
    pub since: awa_core::DbTime,
    /// False when the recorded leader no longer holds the lock.
    pub holding: bool,
}

#[derive(Debug, Clone, serde::Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct PinnedSnapshot {
    pub pid: i32,
    pub usename: Option<String>,
    pub state: Option<String>,
    pub age_secs: f64,
    /// What the session runs or last ran (first 1000 characters), when
    /// this role may see it.
    pub query: Option<String>,
}

/// How long a snapshot may hold reclamation back before operators are
/// alerted (`awa storage status`, `awa serve`), unless they choose another.
pub const DEFAULT_PINNED_ALERT: std::time::Duration = std::time::Duration::from_secs(300);

/// A snapshot that has held reclamation back longer than the threshold.
#[derive(Debug, Clone, serde::Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct PinnedAlert {
    pub threshold_secs: f64,
    pub pid: i32,
    pub age_secs: f64,
    pub query: Option<String>,
    /// One line naming the session, for text output and the page.
    pub message: String,
}

impl PinnedSnapshot {
    /// The alert, when this snapshot is older than `threshold`.
    pub fn alert(&self, threshold: std::time::Duration) -> Option<PinnedAlert> {
        let threshold_secs = threshold.as_secs_f64();
        (self.age_secs > threshold_secs).then(|| PinnedAlert {
            threshold_secs,
            pid: self.pid,
            age_secs: self.age_secs,
            query: self.query.clone(),
            message: format!(
                "backend pid {} has held a snapshot for {:.0}s (over the {:.0}s threshold): \
                 prune cannot truncate until it ends; it runs {}",
                self.pid,
                self.age_secs,
                threshold_secs,
                self.query
                    .as_deref()
                    .map_or("an unknown query".to_string(), |q| format!("{q:?}"))
            ),
        })
    }
}

#[derive(Debug, Clone, Default, serde::Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct MaintenanceStatus {
    pub leader: Option<LeaderStatus>,
    /// The oldest snapshot older than a few seconds: it delays prune.
    pub pinned_snapshot: Option<PinnedSnapshot>,
}

#[derive(Debug, Clone, serde::Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct TransitionState {
    pub state: String,
    pub active_schema: String,
    pub target_schema: Option<String>,
    /// Grows by one at every step.
    pub epoch: i64,
    pub mixed_since: Option<awa_core::DbTime>,
    pub updated_at: awa_core::DbTime,
    /// Substrates that no longer receive writes and are still read until
    /// they drain.
    pub draining: Vec<String>,
}

#[derive(Debug, Clone, serde::Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct StorageStatus {
    pub schema_version: Option<i32>,
    pub substrates: Vec<SubstrateStatus>,
    pub transition: Option<TransitionState>,
    pub maintenance: MaintenanceStatus,
}

/// The applied schema version, `None` on a database never migrated.
pub async fn schema_version(conn: &mut PgConnection) -> Result<Option<i32>, ControlError> {
    let migrated: bool = sqlx::query_scalar(include_str!("../sql/schema_version_table.sql"))
        .fetch_one(&mut *conn)
        .await?;
    if !migrated {
        return Ok(None);
    }
    let version: Option<i32> = sqlx::query_scalar(include_str!("../sql/schema_version.sql"))
        .fetch_one(&mut *conn)
        .await?;
    Ok(version)
}

pub async fn storage_status(conn: &mut PgConnection) -> Result<StorageStatus, ControlError> {
    let schema_version = schema_version(&mut *conn).await?;
    if schema_version.is_none() {
        return Ok(StorageStatus {
            schema_version,
            substrates: Vec::new(),
            transition: None,
            maintenance: MaintenanceStatus::default(),
        });
    }
    let transition = sqlx::query(include_str!("../sql/transition_state.sql"))
        .fetch_optional(&mut *conn)
        .await?
        .map(|row| TransitionState {
            state: row.get("state"),
            active_schema: row.get("active_schema"),
            target_schema: row.get("target_schema"),
            epoch: row.get("epoch"),
            mixed_since: row.get("mixed_since"),
            updated_at: row.get("updated_at"),
            draining: row.get("draining"),
        });
    let active_schema = transition
        .as_ref()
        .map(|t| t.active_schema.clone())
        .unwrap_or_else(|| SchemaName::DEFAULT.to_string());

    let names: Vec<String> = sqlx::query_scalar(include_str!("../sql/list_substrates.sql"))
        .fetch_all(&mut *conn)
        .await?;
    let mut substrates = Vec::with_capacity(names.len());
    for name in names {
        // A schema that does not pass our own validation was not made by
        // the installer; skip it rather than put it into SQL text.
        let Ok(schema) = SchemaName::new(name) else {
            continue;
        };
        let shape = sqlx::query(statement(
            include_str!("../sql/substrate_shape.sql"),
            &schema,
        ))
        .fetch_optional(&mut *conn)
        .await?;
        let Some(shape) = shape else { continue };
        let rings = sqlx::query(statement(include_str!("../sql/ring_cursors.sql"), &schema))
            .fetch_all(&mut *conn)
            .await?
            .into_iter()
            .map(|row| RingCursor {
                ring: row.get("ring"),
                generation: row.get("generation"),
                slot: row.get("slot"),
                rotated_at: row.get("rotated_at"),
            })
            .collect();
        let slot_rows = sqlx::query(include_str!("../sql/status_slot_rows.sql"))
            .bind(schema.as_str())
            .fetch_all(&mut *conn)
            .await?
            .into_iter()
            .map(|row| SlotRows {
                ring: row.get("ring"),
                slot: row.get("slot"),
                live_rows: row.get("live_rows"),
                dead_rows: row.get("dead_rows"),
            })
            .collect();
        let last_outcomes = sqlx::query(statement(
            include_str!("../sql/status_ring_outcomes.sql"),
            &schema,
        ))
        .fetch_all(&mut *conn)
        .await?
        .into_iter()
        .map(|row| RingOutcome {
            ring: row.get("ring"),
            task: row.get("task"),
            outcome: row.get("outcome"),
            detail: row.get("detail"),
            at: row.get("at"),
        })
        .collect();
        let backlog = sqlx::query(statement(
            include_str!("../sql/status_backlog.sql"),
            &schema,
        ))
        .fetch_all(&mut *conn)
        .await?
        .into_iter()
        .map(|row| (row.get::<String, _>("state"), row.get::<i64, _>("jobs")))
        .collect();
        let runtimes = sqlx::query(include_str!("../sql/status_backends.sql"))
            .bind(schema.as_str())
            .fetch_all(&mut *conn)
            .await?
            .into_iter()
            .map(|row| RuntimeBackend {
                instance_id: row.get("instance_id"),
                role: row.get("role"),
                host: row.get("host"),
                pid: row.get("pid"),
                mode: row.get("mode"),
                last_seen_at: row.get("last_seen_at"),
            })
            .collect();
        let routing = match &transition {
            _ if schema.as_str() == active_schema => "active",
            Some(t) if t.target_schema.as_deref() == Some(schema.as_str()) => "target",
            Some(t) if t.draining.iter().any(|d| d == schema.as_str()) => "draining",
            _ => "unused",
        }
        .to_string();
        substrates.push(SubstrateStatus {
            routing,
            backlog,
            runtimes,
            slot_rows,
            last_outcomes,
            active: schema.as_str() == active_schema,
            slots: SlotCounts {
                queue: shape.get("queue_slot_count"),
                lease: shape.get("lease_slot_count"),
                claim: shape.get("claim_slot_count"),
            },
            installed_at: shape.get("installed_at"),
            history_retention_secs: shape.get("history_retention_secs"),
            failure_retention_secs: shape.get("failure_retention_secs"),
            failures_kept: shape.get("failures_kept"),
            parked_attempts: shape.get("parked_attempts"),
            schema,
            rings,
        });
    }
    let leader = sqlx::query(include_str!("../sql/status_leader.sql"))
        .fetch_optional(&mut *conn)
        .await?
        .map(|row| LeaderStatus {
            instance_id: row.get("instance_id"),
            host: row.get("host"),
            pid: row.get("pid"),
            backend_pid: row.get("backend_pid"),
            since: row.get("since"),
            holding: row.get("holding"),
        });
    let pinned_snapshot = sqlx::query(include_str!("../sql/status_pinned.sql"))
        .fetch_optional(&mut *conn)
        .await?
        .map(|row| PinnedSnapshot {
            pid: row.get("pid"),
            usename: row.get("usename"),
            state: row.get("state"),
            age_secs: row.get("age_secs"),
            query: row.get("query"),
        });
    Ok(StorageStatus {
        schema_version,
        substrates,
        transition,
        maintenance: MaintenanceStatus {
            leader,
            pinned_snapshot,
        },
    })
}
