//! Reads for the operator surface (`awa serve`): a filtered, cursor-paged
//! job list, the age of each queue's oldest waiting job, and recent
//! throughput. Read-only, bounded by the page size or by live work.

use crate::{HistoryError, JobView, PgHistoryPlane};
use awa_core::{JobId, JobState, QueueName, sql::statement};
use sqlx::{PgConnection, Row};

/// Which jobs a page lists; `None` fields match any job.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct JobFilter {
    pub queue: Option<QueueName>,
    pub state: Option<JobState>,
    /// Checked with `NewJob::check_kind` by the caller.
    pub kind: Option<String>,
    /// Only jobs whose args contain this JSON (jsonb `@>`: `{"user": 42}`
    /// matches any args with that key and value).
    pub args_contains: Option<serde_json::Value>,
    /// Only jobs with a smaller id (the previous page's last id).
    pub before: Option<JobId>,
}

/// Jobs of one queue that reached one terminal state in one minute.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ThroughputPoint {
    pub queue: String,
    pub state: JobState,
    pub minute: awa_core::DbTime,
    pub jobs: i64,
}

impl PgHistoryPlane {
    /// Up to `limit` jobs matching `filter`, newest (highest id) first.
    pub async fn list_page(
        &self,
        conn: &mut PgConnection,
        filter: &JobFilter,
        limit: i64,
    ) -> Result<Vec<JobView>, HistoryError> {
        if let Some(kind) = &filter.kind {
            awa_core::NewJob::check_kind(kind)?;
        }
        let rows = sqlx::query(statement(
            include_str!("../sql/list_jobs_page.sql"),
            self.schema(),
        ))
        .bind(filter.queue.as_ref().map(QueueName::as_str))
        .bind(filter.state.map(JobState::as_str))
        .bind(filter.kind.as_deref())
        .bind(filter.args_contains.as_ref())
        .bind(filter.before.map(|id| id.0))
        .bind(limit)
        .fetch_all(conn)
        .await?;
        Ok(rows.into_iter().map(crate::plane::job_view).collect())
    }

    /// queue -> seconds its oldest available job has waited (queues with
    /// none waiting are absent).
    pub async fn queue_ages(
        &self,
        conn: &mut PgConnection,
    ) -> Result<Vec<(String, f64)>, HistoryError> {
        let rows = sqlx::query(statement(
            include_str!("../sql/queue_ages.sql"),
            self.schema(),
        ))
        .fetch_all(conn)
        .await?;
        Ok(rows
            .into_iter()
            .map(|r| (r.get("queue"), r.get("oldest_available_secs")))
            .collect())
    }

    /// Terminal outcomes per queue, state and minute over the last
    /// `minutes` minutes (minutes without any are absent).
    pub async fn throughput(
        &self,
        conn: &mut PgConnection,
        minutes: i32,
    ) -> Result<Vec<ThroughputPoint>, HistoryError> {
        let rows = sqlx::query(statement(
            include_str!("../sql/throughput.sql"),
            self.schema(),
        ))
        .bind(minutes)
        .fetch_all(conn)
        .await?;
        Ok(rows
            .into_iter()
            .map(|r| ThroughputPoint {
                queue: r.get("queue"),
                state: r
                    .get::<String, _>("state")
                    .parse()
                    .unwrap_or(JobState::Completed),
                minute: r.get("minute"),
                jobs: r.get("jobs"),
            })
            .collect())
    }
}
