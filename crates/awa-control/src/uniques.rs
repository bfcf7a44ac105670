//! Unique key rows past their period (`awa.job_uniques`, database-wide).
//! Keys are taken by `{schema}.unique_take` (awa-ready) and released or
//! kept by finish and cancel (awa-exec); this only removes rows a key
//! spec kept after their job finished, once the period is over.

use crate::ControlError;
use sqlx::PgConnection;

/// Delete up to `limit` key rows that hold nothing any more (their job
/// finished and their period ended); how many.
pub async fn prune(conn: &mut PgConnection, limit: i64) -> Result<u64, ControlError> {
    let done = sqlx::query(include_str!("../sql/unique_prune.sql"))
        .bind(limit)
        .execute(conn)
        .await?;
    Ok(done.rows_affected())
}
