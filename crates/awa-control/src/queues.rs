//! Per-queue settings (`awa queue configure`).

use crate::ControlError;
use awa_core::{InvalidInput, QueueName};
use sqlx::{PgConnection, Row};
use std::time::Duration;

/// Changes to a queue's settings; `None` keeps the current value.
#[derive(Debug, Clone, Default)]
pub struct QueueConfig {
    pub dlq_enabled: Option<bool>,
    pub max_attempts: Option<i32>,
    pub shard_count: Option<i16>,
    /// `Some(ZERO)` turns aging off.
    pub priority_aging: Option<Duration>,
    pub dlq_retention: Option<Duration>,
    pub paused: Option<bool>,
}

/// A queue's settings after a change.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct QueueSettings {
    pub queue: String,
    pub dlq_enabled: bool,
    pub max_attempts: i32,
    pub shard_count: i16,
    pub priority_aging_secs: Option<f64>,
    pub dlq_retention_secs: f64,
    pub paused: bool,
}

/// The settings of every configured queue, by name.
pub async fn list(conn: &mut PgConnection) -> Result<Vec<QueueSettings>, ControlError> {
    let rows = sqlx::query(include_str!("../sql/queue_settings_list.sql"))
        .fetch_all(conn)
        .await?;
    Ok(rows.into_iter().map(settings).collect())
}

fn settings(row: sqlx::postgres::PgRow) -> QueueSettings {
    QueueSettings {
        queue: row.get("queue"),
        dlq_enabled: row.get("dlq_enabled"),
        max_attempts: row.get("max_attempts"),
        shard_count: row.get("shard_count"),
        priority_aging_secs: row.get("aging_secs"),
        dlq_retention_secs: row.get("dlq_retention_secs"),
        paused: row.get("paused"),
    }
}

impl QueueConfig {
    /// Check the bounds without a database, so callers can refuse bad
    /// input before connecting.
    /// The ranges are `awa_core::bounds`; the table's CHECK constraints
    /// refuse the same values from any other caller.
    pub fn validate(&self) -> Result<(), InvalidInput> {
        use awa_core::bounds;
        if let Some(m) = self.max_attempts {
            bounds::MAX_ATTEMPTS.check(m as i64)?;
        }
        if let Some(s) = self.shard_count {
            bounds::SHARDS.check(s as i64)?;
        }
        if let Some(aging) = self.priority_aging
            && !aging.is_zero()
        {
            bounds::PRIORITY_AGING_STORED.check(aging)?;
        }
        if let Some(retention) = self.dlq_retention {
            bounds::DLQ_RETENTION.check(retention)?;
        }
        Ok(())
    }

    pub async fn apply(
        &self,
        conn: &mut PgConnection,
        queue: &QueueName,
    ) -> Result<QueueSettings, ControlError> {
        self.validate()?;
        let row = sqlx::query(include_str!("../sql/configure_queue.sql"))
            .bind(queue.as_str())
            .bind(self.dlq_enabled)
            .bind(self.max_attempts)
            .bind(self.shard_count)
            .bind(self.priority_aging.map(|d| d.as_secs_f64()))
            .bind(self.dlq_retention.map(|d| d.as_secs_f64()))
            .bind(self.paused)
            .fetch_one(conn)
            .await?;
        Ok(settings(row))
    }
}
