//! Cancelling every unfinished job a selection names (`awa job cancel
//! --queue Q ...`, the dashboard's bulk cancel, the clients).

use crate::ExecError;
use awa_core::{JobId, JobSelection, SchemaName, SelectionFor, sql::statement};
use sqlx::{PgConnection, Row};

/// Jobs per statement.
const BATCH: i64 = 500;

/// One job a bulk cancel cancelled, and the state it was in.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct CancelledJob {
    pub id: JobId,
    pub cancelled_from: String,
}

/// What a bulk cancel did.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct BulkCancelled {
    /// How many unfinished jobs matched (a dry run's answer; otherwise
    /// those found batch by batch, including any that finished before
    /// their cancel reached them).
    pub matched: i64,
    /// Empty on a dry run.
    pub cancelled: Vec<CancelledJob>,
    pub dry_run: bool,
}

/// Cancel every unfinished job `selection` names in `schemas` (each
/// through `cancel_job`, so a running one is finished through the guard),
/// or with `dry_run` only count them. Batches of up to 500 jobs, highest
/// id first, each its own statement; jobs enqueued after the first batch
/// are not reached.
pub async fn cancel_matching(
    conn: &mut PgConnection,
    schemas: &[SchemaName],
    selection: &JobSelection,
    dry_run: bool,
) -> Result<BulkCancelled, ExecError> {
    selection.validate(SelectionFor::Cancel)?;
    let mut out = BulkCancelled {
        dry_run,
        ..BulkCancelled::default()
    };
    for schema in schemas {
        if dry_run {
            let n: i64 =
                sqlx::query_scalar(statement(include_str!("../sql/cancel_count.sql"), schema))
                    .bind(selection.queue.as_str())
                    .bind(selection.state.map(|s| s.as_str()))
                    .bind(selection.kind.as_deref())
                    .bind(selection.args_contains.as_ref())
                    .fetch_one(&mut *conn)
                    .await?;
            out.matched += n;
            continue;
        }
        let mut below: Option<i64> = None;
        loop {
            let rows = sqlx::query(statement(
                include_str!("../sql/cancel_matching.sql"),
                schema,
            ))
            .bind(selection.queue.as_str())
            .bind(selection.state.map(|s| s.as_str()))
            .bind(selection.kind.as_deref())
            .bind(selection.args_contains.as_ref())
            .bind(below)
            .bind(BATCH)
            .fetch_all(&mut *conn)
            .await?;
            let found = rows.len() as i64;
            for row in rows {
                let id: i64 = row.get("id");
                below = Some(below.map_or(id, |b| b.min(id)));
                out.matched += 1;
                if let Some(from) = row.get::<Option<String>, _>("cancelled_from") {
                    out.cancelled.push(CancelledJob {
                        id: JobId(id),
                        cancelled_from: from,
                    });
                }
            }
            if found < BATCH {
                break;
            }
        }
    }
    Ok(out)
}
