//! A substrate's own settings (`awa storage configure`), kept in its
//! `substrate_info` row: how long terminal history and failures are
//! retained and how large a job may be. Changed by operators with the migrator role; the
//! runtime only reads them.

use crate::ControlError;
use awa_core::{InvalidInput, SchemaName, sql::statement};
use sqlx::{PgConnection, Row};
use std::time::Duration;

/// The longest history retention a substrate accepts (also a CHECK in SQL).
pub const MAX_HISTORY_RETENTION: Duration = Duration::from_secs(3650 * 24 * 3600);
/// Bounds of a job's size, args plus metadata as JSON text (also a CHECK).
pub const MIN_JOB_BYTES: i64 = 1024;
pub const MAX_JOB_BYTES: i64 = 256 << 20;

/// Changes to a substrate's settings; `None` keeps the current value.
#[derive(Debug, Clone, Default)]
pub struct SubstrateSettings {
    /// `Some(None)`: automatic retention, (queue slots - 2) x the leader's
    /// rotate interval; `Some(Some(d))`: at least `d`.
    pub history_retention: Option<Option<Duration>>,
    pub max_job_bytes: Option<i64>,
    /// How long failed and cancelled jobs stay readable and retryable
    /// (`awa_core::bounds::FAILURE_RETENTION`).
    pub failure_retention: Option<Duration>,
}

/// The settings after a change.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct AppliedSettings {
    pub history_retention_secs: Option<f64>,
    pub max_job_bytes: i32,
    pub failure_retention_secs: f64,
}

impl SubstrateSettings {
    /// Check the bounds without a database.
    pub fn validate(&self) -> Result<(), InvalidInput> {
        if let Some(Some(d)) = self.history_retention
            && d > MAX_HISTORY_RETENTION
        {
            return Err(InvalidInput::OutOfRange {
                what: "history retention (seconds)",
                value: d.as_secs().min(i64::MAX as u64) as i64,
                min: 0,
                max: MAX_HISTORY_RETENTION.as_secs() as i64,
                hint: "history retention is at most 3650 days",
            });
        }
        if let Some(b) = self.max_job_bytes
            && !(MIN_JOB_BYTES..=MAX_JOB_BYTES).contains(&b)
        {
            return Err(InvalidInput::OutOfRange {
                what: "max job bytes",
                value: b,
                min: MIN_JOB_BYTES,
                max: MAX_JOB_BYTES,
                hint: "store large payloads elsewhere and pass a reference",
            });
        }
        if let Some(d) = self.failure_retention {
            awa_core::bounds::FAILURE_RETENTION.check(d)?;
        }
        Ok(())
    }

    /// Validate, then write the changes in one statement.
    pub async fn apply(
        &self,
        conn: &mut PgConnection,
        schema: &SchemaName,
    ) -> Result<AppliedSettings, ControlError> {
        self.validate()?;
        let retention = self.history_retention.flatten().map(|d| {
            chrono::Duration::from_std(d).expect("bounded above by MAX_HISTORY_RETENTION")
        });
        let row =
            sqlx::query(statement(
                include_str!("../sql/set_substrate_settings.sql"),
                schema,
            ))
            .bind(self.history_retention.is_some())
            .bind(retention)
            .bind(self.max_job_bytes.map(|b| b as i32))
            .bind(self.failure_retention.map(|d| {
                chrono::Duration::from_std(d).expect("bounded above by FAILURE_RETENTION")
            }))
            .fetch_one(conn)
            .await?;
        Ok(AppliedSettings {
            history_retention_secs: row.get("history_retention_secs"),
            max_job_bytes: row.get("max_job_bytes"),
            failure_retention_secs: row.get("failure_retention_secs"),
        })
    }
}
