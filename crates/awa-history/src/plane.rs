//! Reading job state and counts across the planes.

use crate::HistoryError;
use async_trait::async_trait;
use awa_core::DbTime;
use awa_core::{JobId, JobState, QueueName, SchemaName, sql::statement};
use sqlx::{PgConnection, Row, postgres::PgRow};
use std::collections::BTreeMap;

/// One job as the planes together describe it.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct JobView {
    pub id: JobId,
    pub queue: String,
    pub kind: String,
    pub args: serde_json::Value,
    /// 1 runs first, 4 last.
    pub priority: i16,
    pub state: JobState,
    pub attempt: i32,
    pub max_attempts: i32,
    pub run_lease: i64,
    pub created_at: DbTime,
    /// When it became runnable, was claimed, is due, or was finalized,
    /// depending on the state.
    pub at: DbTime,
    pub last_error: Option<String>,
    /// None (null in JSON) when the job was enqueued without metadata,
    /// whatever its state.
    pub metadata: Option<serde_json::Value>,
    /// A running job: the runtime that holds it, and how long ago that
    /// runtime last reported itself alive.
    pub holder: Option<crate::Holder>,
    /// One-job reads (`job`, `job_in`): every recorded attempt, oldest
    /// first, the running one included (ADR 11). Absent from lists.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub attempts: Option<Vec<crate::AttemptRecord>>,
    /// What could not be shown as it should: a stored time outside what
    /// Awa can show (it is given raw, e.g. `infinity`). Absent when none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
}

impl JobView {
    /// Fill `warnings` from the times this view holds.
    fn warn_raw_times(mut self) -> Self {
        let mut warnings = Vec::new();
        let mut check = |what: String, t: Option<&DbTime>| {
            if let Some(w) = t.and_then(|t| t.warning(&what)) {
                warnings.push(w);
            }
        };
        check(
            format!("job {}'s created_at", self.id),
            Some(&self.created_at),
        );
        check(format!("job {}'s at", self.id), Some(&self.at));
        if let Some(h) = &self.holder {
            check("its holder's last_seen_at".into(), h.last_seen_at.as_ref());
            check(
                "its attempt's heartbeat_at".into(),
                h.attempt_heartbeat_at.as_ref(),
            );
        }
        for a in self.attempts.iter().flatten() {
            check(
                format!("attempt {}'s started_at", a.attempt),
                a.started_at.as_ref(),
            );
            check(
                format!("attempt {}'s ended_at", a.attempt),
                a.ended_at.as_ref(),
            );
        }
        self.warnings = warnings;
        self
    }
}

/// How far terminal history has been reclaimed: a job whose terminal fact
/// was in a reclaimed slot has an id at or below `pruned_through`.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct PrunedHorizon {
    pub pruned_through: JobId,
    /// When the latest slot was retired (its history ended for readers).
    pub pruned_at: DbTime,
}

/// The unfinished jobs of some queues in one state.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct PendingState {
    pub state: JobState,
    pub jobs: i64,
    /// The earliest `at` among them (for a deferred state, the next due).
    pub next_at: Option<DbTime>,
    /// How many are runnable by the horizon asked about.
    pub due: i64,
}

/// Counts per state for one queue.
pub type QueueStats = BTreeMap<String, BTreeMap<String, i64>>;

#[async_trait]
pub trait HistoryPlane: Send + Sync + std::fmt::Debug {
    async fn job(
        &self,
        conn: &mut PgConnection,
        id: JobId,
    ) -> Result<Option<JobView>, HistoryError>;
    /// How far history has been pruned (None: never).
    async fn horizon(&self, conn: &mut PgConnection)
    -> Result<Option<PrunedHorizon>, HistoryError>;
    async fn list(
        &self,
        conn: &mut PgConnection,
        queue: Option<&QueueName>,
        state: Option<JobState>,
        limit: i64,
    ) -> Result<Vec<JobView>, HistoryError>;
    /// queue -> state -> count; terminal totals are exact for all time.
    async fn queue_stats(
        &self,
        conn: &mut PgConnection,
        queue: Option<&QueueName>,
    ) -> Result<QueueStats, HistoryError>;
    /// Measure every queue and overwrite `awa.queue_health`; how many
    /// queues have live work.
    async fn publish_health(&self, conn: &mut PgConnection) -> Result<u64, HistoryError>;
    /// Jobs of these queues not yet terminal.
    async fn pending(
        &self,
        conn: &mut PgConnection,
        queues: &[QueueName],
    ) -> Result<i64, HistoryError>;
    /// Jobs of these queues not yet terminal, per state, and how many are
    /// runnable within `horizon` from now (`None`: however far off).
    async fn pending_by_state(
        &self,
        conn: &mut PgConnection,
        queues: &[QueueName],
        horizon: Option<std::time::Duration>,
    ) -> Result<Vec<PendingState>, HistoryError>;
}

#[derive(Debug, Clone)]
pub struct PgHistoryPlane {
    schema: SchemaName,
}

impl PgHistoryPlane {
    pub fn new(schema: SchemaName) -> Self {
        Self { schema }
    }

    pub(crate) fn schema(&self) -> &SchemaName {
        &self.schema
    }
}

/// A row of a list (`list_jobs.sql`, `list_jobs_page.sql`).
pub(crate) fn job_view(row: PgRow) -> JobView {
    let holder = crate::attempts::holder(&row, "holder");
    JobView {
        holder,
        ..job_fields(&row)
    }
    .warn_raw_times()
}

/// A one-job read (`get_job.sql`): with its attempts and, when it runs,
/// its holder and the attempt's own heartbeat.
fn one_job(row: PgRow) -> JobView {
    let mut job = job_fields(&row);
    job.attempts = Some(crate::attempts::of_job(
        &row,
        job.state.as_str(),
        job.attempt,
    ));
    let holder: Option<uuid::Uuid> = row.get("holder");
    job.holder = holder.map(|instance_id| {
        let claimed_by_it = row.get::<Option<uuid::Uuid>, _>("claim_instance") == Some(instance_id);
        crate::Holder {
            instance_id,
            host: claimed_by_it.then(|| row.get("claim_host")).flatten(),
            pid: claimed_by_it.then(|| row.get("claim_pid")).flatten(),
            last_seen_at: claimed_by_it.then(|| row.get("claim_seen_at")).flatten(),
            heartbeat_age_secs: claimed_by_it.then(|| row.get("claim_age_secs")).flatten(),
            attempt_heartbeat_at: row.get("attempt_heartbeat_at"),
        }
    });
    job.warn_raw_times()
}

fn job_fields(row: &PgRow) -> JobView {
    let state: String = row.get("state");
    JobView {
        id: JobId(row.get("id")),
        queue: row.get("queue"),
        kind: row.get("kind"),
        args: row.get("args"),
        priority: row.get("priority"),
        state: state.parse().unwrap_or(JobState::Available),
        attempt: row.get("attempt"),
        max_attempts: row.get("max_attempts"),
        run_lease: row.get("run_lease"),
        created_at: row.get("created_at"),
        at: row.get("at"),
        last_error: row.get("last_error"),
        // A finished job's metadata comes out of its stored body, where a
        // job enqueued without any holds JSON `null`: the same absence as
        // a live job's SQL NULL, so shown the same way everywhere.
        metadata: row
            .get::<Option<serde_json::Value>, _>("metadata")
            .filter(|m| !m.is_null()),
        holder: None,
        attempts: None,
        warnings: Vec::new(),
    }
}

#[async_trait]
impl HistoryPlane for PgHistoryPlane {
    async fn job(
        &self,
        conn: &mut PgConnection,
        id: JobId,
    ) -> Result<Option<JobView>, HistoryError> {
        let row = sqlx::query(statement(include_str!("../sql/get_job.sql"), &self.schema))
            .bind(id.0)
            .fetch_optional(conn)
            .await?;
        Ok(row.map(one_job))
    }

    async fn horizon(
        &self,
        conn: &mut PgConnection,
    ) -> Result<Option<PrunedHorizon>, HistoryError> {
        let row = sqlx::query(statement(
            include_str!("../sql/history_horizon.sql"),
            &self.schema,
        ))
        .fetch_optional(conn)
        .await?;
        Ok(row.map(|r| PrunedHorizon {
            pruned_through: JobId(r.get("pruned_through_job_id")),
            pruned_at: r.get("pruned_at"),
        }))
    }

    async fn list(
        &self,
        conn: &mut PgConnection,
        queue: Option<&QueueName>,
        state: Option<JobState>,
        limit: i64,
    ) -> Result<Vec<JobView>, HistoryError> {
        let rows = sqlx::query(statement(
            include_str!("../sql/list_jobs.sql"),
            &self.schema,
        ))
        .bind(queue.map(QueueName::as_str))
        .bind(state.map(JobState::as_str))
        .bind(limit)
        .fetch_all(conn)
        .await?;
        Ok(rows.into_iter().map(job_view).collect())
    }

    async fn queue_stats(
        &self,
        conn: &mut PgConnection,
        queue: Option<&QueueName>,
    ) -> Result<QueueStats, HistoryError> {
        let rows = sqlx::query(statement(
            include_str!("../sql/queue_stats.sql"),
            &self.schema,
        ))
        .bind(queue.map(QueueName::as_str))
        .fetch_all(conn)
        .await?;
        let mut stats = QueueStats::new();
        for row in rows {
            let q: String = row.get("queue");
            let state: String = row.get("state");
            let n: i64 = row.get("n");
            *stats.entry(q).or_default().entry(state).or_default() += n;
        }
        Ok(stats)
    }

    async fn publish_health(&self, conn: &mut PgConnection) -> Result<u64, HistoryError> {
        use sqlx::Connection;
        let mut tx = conn.begin().await?;
        let measured = sqlx::query(statement(
            include_str!("../sql/publish_health.sql"),
            &self.schema,
        ))
        .bind(self.schema.as_str())
        .execute(&mut *tx)
        .await?
        .rows_affected();
        sqlx::query(include_str!("../sql/clear_idle_health.sql"))
            .bind(self.schema.as_str())
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(measured)
    }

    async fn pending(
        &self,
        conn: &mut PgConnection,
        queues: &[QueueName],
    ) -> Result<i64, HistoryError> {
        let names: Vec<&str> = queues.iter().map(QueueName::as_str).collect();
        let n: i64 =
            sqlx::query_scalar(statement(include_str!("../sql/pending.sql"), &self.schema))
                .bind(names)
                .fetch_one(conn)
                .await?;
        Ok(n)
    }

    async fn pending_by_state(
        &self,
        conn: &mut PgConnection,
        queues: &[QueueName],
        horizon: Option<std::time::Duration>,
    ) -> Result<Vec<PendingState>, HistoryError> {
        let names: Vec<&str> = queues.iter().map(QueueName::as_str).collect();
        let rows = sqlx::query(statement(
            include_str!("../sql/pending_by_state.sql"),
            &self.schema,
        ))
        .bind(names)
        .bind(horizon.map(|h| h.as_secs_f64()))
        .fetch_all(conn)
        .await?;
        Ok(rows
            .into_iter()
            .map(|row| {
                let state: String = row.get("state");
                PendingState {
                    state: state.parse().unwrap_or(JobState::Available),
                    jobs: row.get("jobs"),
                    next_at: row.get("next_at"),
                    due: row.get("due"),
                }
            })
            .collect())
    }
}

/// Job `id` as the first of `schemas` that knows it shows it (ids are
/// database-wide, so at most one does once a move has settled): for
/// readers that follow the storage routing over several substrates.
pub async fn job_in(
    conn: &mut PgConnection,
    schemas: &[SchemaName],
    id: JobId,
) -> Result<Option<JobView>, HistoryError> {
    for schema in schemas {
        if let Some(job) = PgHistoryPlane::new(schema.clone()).job(conn, id).await? {
            return Ok(Some(job));
        }
    }
    Ok(None)
}
