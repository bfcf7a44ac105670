//! Read-only description of the storage layout for operators
//! (`awa storage status`).

use crate::ControlError;
use awa_core::{SchemaName, SlotCounts, sql::statement};
use chrono::{DateTime, Utc};
use sqlx::{PgConnection, Row};

#[derive(Debug, Clone, serde::Serialize)]
pub struct RingCursor {
    pub ring: String,
    pub generation: i64,
    pub slot: i32,
    pub rotated_at: DateTime<Utc>,
}

#[derive(Debug, Clone, serde::Serialize)]
pub struct SubstrateStatus {
    pub schema: SchemaName,
    pub slots: SlotCounts,
    pub installed_at: DateTime<Utc>,
    pub active: bool,
    pub rings: Vec<RingCursor>,
}

#[derive(Debug, Clone, serde::Serialize)]
pub struct TransitionState {
    pub state: String,
    pub active_schema: String,
    pub target_schema: Option<String>,
    pub updated_at: DateTime<Utc>,
}

#[derive(Debug, Clone, serde::Serialize)]
pub struct StorageStatus {
    pub schema_version: Option<i32>,
    pub substrates: Vec<SubstrateStatus>,
    pub transition: Option<TransitionState>,
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
        });
    }
    let transition = sqlx::query(include_str!("../sql/transition_state.sql"))
        .fetch_optional(&mut *conn)
        .await?
        .map(|row| TransitionState {
            state: row.get("state"),
            active_schema: row.get("active_schema"),
            target_schema: row.get("target_schema"),
            updated_at: row.get("updated_at"),
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
        substrates.push(SubstrateStatus {
            active: schema.as_str() == active_schema,
            slots: SlotCounts {
                queue: shape.get("queue_slot_count"),
                lease: shape.get("lease_slot_count"),
                claim: shape.get("claim_slot_count"),
            },
            installed_at: shape.get("installed_at"),
            schema,
            rings,
        });
    }
    Ok(StorageStatus {
        schema_version,
        substrates,
        transition,
    })
}
