//! Installing the ledger (`sql/chaos/ledger.sql`) and reading everything
//! the tally needs from the database once the run is over.

use super::error::ChaosError;
use super::tally::LedgerJob;
use sqlx::PgPool;

pub async fn install(pool: &PgPool) -> Result<(), ChaosError> {
    sqlx::raw_sql(include_str!("../../sql/chaos/ledger.sql"))
        .execute(pool)
        .await
        .map_err(|e| ChaosError::db("installing the chaos ledger", e))?;
    Ok(())
}

/// What the database says at the end of a run.
#[derive(Debug, Default)]
pub struct Snapshot {
    pub jobs: Vec<LedgerJob>,
    /// `(job_id, state)`: terminal facts and dead letters, never pruned.
    pub facts: Vec<(i64, String)>,
    /// `(job_id, state)` of `awa.live_jobs`.
    pub live: Vec<(i64, String)>,
    /// `(job_id, outcome)` per closed attempt.
    pub closures: Vec<(i64, String)>,
    /// `awa queue stats`' exact completed total for the load queue.
    pub stats_completed: i64,
}

pub async fn read(pool: &PgPool, queue: &str) -> Result<Snapshot, ChaosError> {
    let db = |what: &'static str| move |e| ChaosError::db(format!("reading {what}"), e);
    let jobs: Vec<(i64, String, Option<i64>)> =
        sqlx::query_as("SELECT job_id, kind, n FROM chaos.enqueued ORDER BY job_id")
            .fetch_all(pool)
            .await
            .map_err(db("the ledger's jobs"))?;
    let facts = sqlx::query_as("SELECT job_id, state FROM chaos.facts ORDER BY job_id")
        .fetch_all(pool)
        .await
        .map_err(db("the ledger's facts"))?;
    let live = sqlx::query_as("SELECT id, state FROM awa.live_jobs ORDER BY id")
        .fetch_all(pool)
        .await
        .map_err(db("the live jobs"))?;
    let closures = sqlx::query_as("SELECT job_id, outcome FROM chaos.closures ORDER BY job_id")
        .fetch_all(pool)
        .await
        .map_err(db("the ledger's closures"))?;
    let stats_completed = completed_total(pool, queue).await?;
    Ok(Snapshot {
        jobs: jobs
            .into_iter()
            .map(|(job_id, kind, n)| LedgerJob { job_id, kind, n })
            .collect(),
        facts,
        live,
        closures,
        stats_completed,
    })
}

/// The exact completed total of `queue`, as `awa queue stats` reports it.
async fn completed_total(pool: &PgPool, queue: &str) -> Result<i64, ChaosError> {
    use awa_history::{HistoryPlane, PgHistoryPlane};
    let queue = awa_core::QueueName::new(queue).map_err(|e| ChaosError::Awa {
        args: "queue stats".into(),
        why: e.to_string(),
    })?;
    let mut conn = pool
        .acquire()
        .await
        .map_err(|e| ChaosError::db("connecting for queue stats", e))?;
    let stats = PgHistoryPlane::new(awa_core::SchemaName::default_schema())
        .queue_stats(&mut conn, Some(&queue))
        .await
        .map_err(|e| ChaosError::Awa {
            args: "queue stats".into(),
            why: e.to_string(),
        })?;
    Ok(stats
        .get(queue.as_str())
        .and_then(|s| s.get("completed"))
        .copied()
        .unwrap_or(0))
}

/// Live jobs of `queue` (available, running, deferred).
pub async fn live_in(pool: &PgPool, queue: &str) -> Result<i64, sqlx::Error> {
    // Load jobs only: a poison job may rightly stay live (a snooze clamped
    // to 30 days), and is checked on its own.
    sqlx::query_scalar("SELECT count(*) FROM awa.live_jobs WHERE queue = $1 AND kind = $2")
        .bind(queue)
        .bind(super::load::LOAD_KIND)
        .fetch_one(pool)
        .await
}

/// Ring rotations recorded after `at` (any ring): maintenance ran then.
pub async fn rotations_since(
    pool: &PgPool,
    at: chrono::DateTime<chrono::Utc>,
) -> Result<i64, sqlx::Error> {
    sqlx::query_scalar("SELECT count(*) FROM awa.ring_ledger WHERE rotated_at > $1")
        .bind(at)
        .fetch_one(pool)
        .await
}

/// Rows in the queue ring's ready entries, over every slot.
pub async fn ring_rows(pool: &PgPool) -> Result<i64, sqlx::Error> {
    sqlx::query_scalar("SELECT count(*) FROM awa.ready_entries")
        .fetch_one(pool)
        .await
}

/// Ready rows per queue slot, the current slot and the last rotate and
/// prune outcomes: what holds the ring when it is over its bound.
pub async fn ring_diagnosis(pool: &PgPool) -> Result<String, sqlx::Error> {
    let text: Option<String> =
        sqlx::query_scalar(include_str!("../../sql/chaos/ring_diagnosis.sql"))
            .fetch_one(pool)
            .await?;
    Ok(text.unwrap_or_default())
}

/// `(job_id, run_lease)` per line of the handlers' execution logs. A torn
/// last line (a kill mid-write) is skipped.
pub fn executions(logs: &[std::path::PathBuf]) -> Result<Vec<(i64, i64)>, ChaosError> {
    let mut out = Vec::new();
    for log in logs {
        let text = match std::fs::read_to_string(log) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => return Err(ChaosError::io(format!("reading {}", log.display()), e)),
        };
        for line in text.lines() {
            let mut parts = line.split(' ');
            if let (Some(Ok(job)), Some(Ok(lease))) = (
                parts.next().map(str::parse::<i64>),
                parts.next().map(str::parse::<i64>),
            ) {
                out.push((job, lease));
            }
        }
    }
    Ok(out)
}
