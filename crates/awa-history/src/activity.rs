//! Activity per queue and minute over the last two hours, for charts:
//! recorded by the maintenance leader's health task into
//! `awa.queue_minutes` (`publish_activity`), read by the operator surface
//! (`activity`). Nothing here is written by the job path: counts come from
//! the count deltas finish writes anyway, pickup latency from a bounded
//! sample of the claim batches a claim writes anyway, and waits from the
//! health measurement.

use crate::{HistoryError, PgHistoryPlane};
use awa_core::sql::statement;
use sqlx::{PgConnection, Row};

/// What one queue did in one minute.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ActivityMinute {
    pub queue: String,
    /// The minute's start.
    pub minute: awa_core::DbTime,
    /// Jobs that reached each terminal state in the minute.
    pub completed: i64,
    pub failed: i64,
    pub cancelled: i64,
    pub dead_lettered: i64,
    /// Claim calls the pickup latency was measured on (the latest 200 of
    /// the minute at most).
    pub claims_sampled: i32,
    /// From becoming runnable to being claimed, over the sampled claims
    /// (each claim's first job). Absent without claims.
    pub pickup_avg_secs: Option<f64>,
    pub pickup_max_secs: Option<f64>,
    /// The longest any available job of the queue had waited when the
    /// leader measured during the minute. Absent when none was waiting.
    pub wait_max_secs: Option<f64>,
    /// When the leader last recorded this minute.
    pub measured_at: awa_core::DbTime,
}

impl PgHistoryPlane {
    /// Record the last three minutes of this substrate's activity and drop
    /// what is older than two hours, in one transaction; how many rows were
    /// written. The health task calls it after `publish_health` (whose wait
    /// figures it copies).
    pub async fn publish_activity(&self, conn: &mut PgConnection) -> Result<u64, HistoryError> {
        use sqlx::Connection;
        let mut tx = conn.begin().await?;
        let written = sqlx::query(statement(
            include_str!("../sql/publish_activity.sql"),
            self.schema(),
        ))
        .bind(self.schema().as_str())
        .execute(&mut *tx)
        .await?
        .rows_affected();
        sqlx::query(include_str!("../sql/prune_activity.sql"))
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(written)
    }

    /// Activity per queue and minute over the last `minutes` minutes
    /// (1..=120, `awa_core::bounds::ACTIVITY_MINUTES`), oldest first;
    /// minutes without activity (or without a leader recording it) are
    /// absent.
    pub async fn activity(
        &self,
        conn: &mut PgConnection,
        minutes: i32,
    ) -> Result<Vec<ActivityMinute>, HistoryError> {
        awa_core::bounds::ACTIVITY_MINUTES.check(i64::from(minutes))?;
        let rows = sqlx::query(include_str!("../sql/activity.sql"))
            .bind(self.schema().as_str())
            .bind(minutes)
            .fetch_all(conn)
            .await?;
        Ok(rows
            .into_iter()
            .map(|r| ActivityMinute {
                queue: r.get("queue"),
                minute: r.get("minute"),
                completed: r.get("completed"),
                failed: r.get("failed"),
                cancelled: r.get("cancelled"),
                dead_lettered: r.get("dead_lettered"),
                claims_sampled: r.get("claims_sampled"),
                pickup_avg_secs: r.get("pickup_avg_secs"),
                pickup_max_secs: r.get("pickup_max_secs"),
                wait_max_secs: r.get("wait_max_secs"),
                measured_at: r.get("measured_at"),
            })
            .collect())
    }
}
