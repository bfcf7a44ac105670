//! Operator actions on dead-lettered jobs.

use crate::DlqError;
use async_trait::async_trait;
use awa_core::{JobId, QueueName, SchemaName, sql::statement};
use sqlx::{PgConnection, Row};

/// Which entries an operation applies to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Selection {
    One(JobId),
    All { queue: Option<QueueName> },
}

impl Selection {
    fn binds(&self) -> (Option<i64>, Option<&str>, bool) {
        match self {
            Selection::One(id) => (Some(id.0), None, false),
            Selection::All { queue } => (None, queue.as_ref().map(QueueName::as_str), true),
        }
    }
}

#[derive(Debug, Clone, serde::Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct DlqEntry {
    pub job_id: JobId,
    pub queue: String,
    pub kind: String,
    pub args: serde_json::Value,
    pub priority: i16,
    pub attempt: i32,
    pub max_attempts: i32,
    pub run_lease: i64,
    pub created_at: awa_core::DbTime,
    pub dead_at: awa_core::DbTime,
    pub last_error: Option<String>,
}

/// What a retry did with the selected entries.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Retried {
    /// Moved back to their queues, in the order they were dead-lettered.
    pub retried: Vec<JobId>,
    /// Still dead-lettered: each one's unique key is held by a newer
    /// unfinished job.
    pub kept: Vec<KeyHeld>,
}

/// A dead-lettered job that was not retried because a newer job holds its
/// unique key; retry it once that job has finished, or purge it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct KeyHeld {
    pub job_id: JobId,
    pub unique_key: String,
    pub held_by: JobId,
}

#[async_trait]
pub trait DlqPlane: Send + Sync + std::fmt::Debug {
    async fn list(
        &self,
        conn: &mut PgConnection,
        queue: Option<&QueueName>,
        limit: i64,
    ) -> Result<Vec<DlqEntry>, DlqError>;
    /// Back to the ready ring as fresh work (attempt 0), each re-taking the
    /// unique key it had; an entry whose key a newer job holds is kept.
    async fn retry(&self, conn: &mut PgConnection, which: &Selection) -> Result<Retried, DlqError>;
    /// Delete for good; the ids removed.
    async fn purge(
        &self,
        conn: &mut PgConnection,
        which: &Selection,
    ) -> Result<Vec<JobId>, DlqError>;
    /// Apply retention; how many were removed.
    async fn prune_expired(&self, conn: &mut PgConnection, limit: i64) -> Result<u64, DlqError>;
}

#[derive(Debug, Clone)]
pub struct PgDlqPlane {
    schema: SchemaName,
}

impl PgDlqPlane {
    pub fn new(schema: SchemaName) -> Self {
        Self { schema }
    }
}

#[async_trait]
impl DlqPlane for PgDlqPlane {
    async fn list(
        &self,
        conn: &mut PgConnection,
        queue: Option<&QueueName>,
        limit: i64,
    ) -> Result<Vec<DlqEntry>, DlqError> {
        let rows = sqlx::query(statement(include_str!("../sql/list.sql"), &self.schema))
            .bind(queue.map(QueueName::as_str))
            .bind(limit)
            .fetch_all(conn)
            .await?;
        Ok(rows
            .into_iter()
            .map(|r| DlqEntry {
                job_id: JobId(r.get("job_id")),
                queue: r.get("queue"),
                kind: r.get("kind"),
                args: r.get("args"),
                priority: r.get("priority"),
                attempt: r.get("attempt"),
                max_attempts: r.get("max_attempts"),
                run_lease: r.get("run_lease"),
                created_at: r.get("created_at"),
                dead_at: r.get("dead_at"),
                last_error: r.get("last_error"),
            })
            .collect())
    }

    async fn retry(&self, conn: &mut PgConnection, which: &Selection) -> Result<Retried, DlqError> {
        let (id, queue, all) = which.binds();
        let rows = sqlx::query(statement(
            include_str!("../sql/call_retry.sql"),
            &self.schema,
        ))
        .bind(id)
        .bind(queue)
        .bind(all)
        .fetch_all(conn)
        .await?;
        let mut out = Retried::default();
        for row in rows {
            let job_id = JobId(row.get("job_id"));
            match row.get::<Option<i64>, _>("held_by") {
                None => out.retried.push(job_id),
                Some(owner) => out.kept.push(KeyHeld {
                    job_id,
                    unique_key: row.get("unique_key"),
                    held_by: JobId(owner),
                }),
            }
        }
        Ok(out)
    }

    async fn purge(
        &self,
        conn: &mut PgConnection,
        which: &Selection,
    ) -> Result<Vec<JobId>, DlqError> {
        let (id, queue, all) = which.binds();
        let ids: Vec<i64> =
            sqlx::query_scalar(statement(include_str!("../sql/purge.sql"), &self.schema))
                .bind(id)
                .bind(queue)
                .bind(all)
                .fetch_all(conn)
                .await?;
        Ok(ids.into_iter().map(JobId).collect())
    }

    async fn prune_expired(&self, conn: &mut PgConnection, limit: i64) -> Result<u64, DlqError> {
        let done = sqlx::query(statement(
            include_str!("../sql/prune_expired.sql"),
            &self.schema,
        ))
        .bind(limit)
        .execute(conn)
        .await?;
        Ok(done.rows_affected())
    }
}
