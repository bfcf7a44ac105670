//! Failures kept for days and put back on demand (ADR 11): retry one job or
//! every kept failure a selection names, and the retention pass.

use crate::{HistoryError, PgHistoryPlane};
use awa_core::{JobId, JobSelection, SchemaName, SelectionFor, sql::statement};
use chrono::{DateTime, Utc};
use sqlx::{PgConnection, Row};

/// Jobs per statement of a bulk retry.
const BATCH: i64 = 1000;

/// A failed or cancelled job left where it was because its unique key is
/// held by a newer unfinished job (retry it once that one has finished).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct KeptFailure {
    pub id: JobId,
    pub unique_key: String,
    pub held_by: JobId,
}

/// What a retry did.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Retried {
    /// How many kept failures the selection matched (for one job: 1, or 0
    /// when it is not a kept failure).
    pub matched: i64,
    /// Put back as fresh work (empty on a dry run).
    pub retried: Vec<JobId>,
    pub kept: Vec<KeptFailure>,
    pub dry_run: bool,
}

impl PgHistoryPlane {
    /// Put these failed or cancelled jobs back as fresh work, in one
    /// transaction; ids whose failure this substrate does not keep are
    /// ignored.
    pub async fn retry(
        &self,
        conn: &mut PgConnection,
        ids: &[JobId],
    ) -> Result<Retried, HistoryError> {
        let ids: Vec<i64> = ids.iter().map(|id| id.0).collect();
        let rows = sqlx::query(statement(
            include_str!("../sql/call_failure_retry.sql"),
            self.schema(),
        ))
        .bind(&ids)
        .fetch_all(conn)
        .await?;
        let mut out = Retried::default();
        for row in rows {
            let id = JobId(row.get("job_id"));
            out.matched += 1;
            match row.get::<Option<i64>, _>("held_by") {
                None => out.retried.push(id),
                Some(owner) => out.kept.push(KeptFailure {
                    id,
                    unique_key: row
                        .get::<Option<String>, _>("unique_key")
                        .unwrap_or_default(),
                    held_by: JobId(owner),
                }),
            }
        }
        Ok(out)
    }

    /// How many kept failures `selection` matches, finalized by `until`.
    pub async fn count_failures(
        &self,
        conn: &mut PgConnection,
        selection: &JobSelection,
        until: DateTime<Utc>,
    ) -> Result<i64, HistoryError> {
        let n: i64 = sqlx::query_scalar(statement(
            include_str!("../sql/failure_count.sql"),
            self.schema(),
        ))
        .bind(selection.queue.as_str())
        .bind(selection.state.map(|s| s.as_str()))
        .bind(selection.kind.as_deref())
        .bind(selection.args_contains.as_ref())
        .bind(until)
        .fetch_one(conn)
        .await?;
        Ok(n)
    }

    /// Up to `limit` ids of kept failures `selection` matches, finalized
    /// by `until`, above `after`, lowest first.
    pub async fn failures_matching(
        &self,
        conn: &mut PgConnection,
        selection: &JobSelection,
        until: DateTime<Utc>,
        after: Option<JobId>,
        limit: i64,
    ) -> Result<Vec<JobId>, HistoryError> {
        let ids: Vec<i64> = sqlx::query_scalar(statement(
            include_str!("../sql/failure_select.sql"),
            self.schema(),
        ))
        .bind(selection.queue.as_str())
        .bind(selection.state.map(|s| s.as_str()))
        .bind(selection.kind.as_deref())
        .bind(selection.args_contains.as_ref())
        .bind(until)
        .bind(after.map(|id| id.0))
        .bind(limit)
        .fetch_all(conn)
        .await?;
        Ok(ids.into_iter().map(JobId).collect())
    }

    /// The retention pass: delete up to `limit` kept failures older than
    /// the substrate's failure retention; how many.
    pub async fn prune_failures(
        &self,
        conn: &mut PgConnection,
        limit: i64,
    ) -> Result<u64, HistoryError> {
        let n: i64 = sqlx::query_scalar(statement(
            include_str!("../sql/failure_prune.sql"),
            self.schema(),
        ))
        .bind(limit)
        .fetch_one(conn)
        .await?;
        Ok(n as u64)
    }
}

/// Retry job `id` in the first of `schemas` that keeps its failure (the
/// substrates the routing reads: workers claim from each). None: no
/// substrate keeps a failure of that job.
pub async fn retry_in(
    conn: &mut PgConnection,
    schemas: &[SchemaName],
    id: JobId,
) -> Result<Option<Retried>, HistoryError> {
    for schema in schemas {
        let done = PgHistoryPlane::new(schema.clone())
            .retry(conn, &[id])
            .await?;
        if done.matched > 0 {
            return Ok(Some(done));
        }
    }
    Ok(None)
}

/// Retry every kept failure `selection` names in `schemas`, or with
/// `dry_run` only count them. Failures recorded after the call began are
/// left alone (a job that fails again is not retried twice), and each
/// batch of up to 1,000 jobs is its own transaction: an interrupted call
/// has retried whole batches only.
pub async fn retry_matching(
    conn: &mut PgConnection,
    schemas: &[SchemaName],
    selection: &JobSelection,
    dry_run: bool,
) -> Result<Retried, HistoryError> {
    selection.validate(SelectionFor::Retry)?;
    let until: DateTime<Utc> = sqlx::query_scalar(include_str!("../sql/clock_now.sql"))
        .fetch_one(&mut *conn)
        .await?;
    let mut out = Retried {
        dry_run,
        ..Retried::default()
    };
    for schema in schemas {
        let plane = PgHistoryPlane::new(schema.clone());
        if dry_run {
            out.matched += plane.count_failures(conn, selection, until).await?;
            continue;
        }
        let mut after = None;
        loop {
            let ids = plane
                .failures_matching(conn, selection, until, after, BATCH)
                .await?;
            let Some(&last) = ids.last() else { break };
            after = Some(last);
            let done = plane.retry(conn, &ids).await?;
            out.matched += done.matched;
            out.retried.extend(done.retried);
            out.kept.extend(done.kept);
            if (ids.len() as i64) < BATCH {
                break;
            }
        }
    }
    Ok(out)
}
