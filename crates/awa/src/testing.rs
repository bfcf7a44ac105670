//! Helpers for testing an application's jobs against a real database.
//!
//! - [`crate::ClientBuilder::work_one`] runs one job inline with the
//!   registered handlers (no background tasks), so a test can enqueue,
//!   work and assert in sequence.
//! - [`enqueued`] lists what was enqueued of a job type, typed.
//! - `test_db` (feature `test-support`) gives a throwaway migrated
//!   database from the shared harness: `DATABASE_URL` if set, else a
//!   temporary local cluster, else testcontainers.
//!
//! ```
//! # #[tokio::main]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! use awa::{Client, JobState};
//!
//! #[derive(Debug, PartialEq, serde::Serialize, serde::Deserialize, awa::Job)]
//! #[awa(queue = "email")]
//! struct SendWelcome { user_id: i64 }
//!
//! // In a test, with `awa = { version = "0.1", features = ["test-support"] }`
//! // among the dev-dependencies: a database of its own, dropped at the end.
//! let db = awa::testing::test_db().await?;
//! let pool = db.pool().await?;
//!
//! // The code under test enqueues...
//! Client::new(pool.clone()).insert(&pool, &SendWelcome { user_id: 7 }).await?;
//!
//! // ...and the test reads back what it enqueued, typed.
//! let jobs = awa::testing::enqueued::<_, SendWelcome>(&pool, 10).await?;
//! assert_eq!(jobs.len(), 1);
//! let (view, args) = &jobs[0];
//! assert_eq!(view.state, JobState::Available);
//! assert_eq!(args, &SendWelcome { user_id: 7 });
//! # Ok(())
//! # }
//! ```

use crate::{Error, Job};
use awa_core::{JobState, QueueName, SchemaName};
use awa_history::{HistoryPlane, JobView, PgHistoryPlane};
use sqlx::{Acquire, Postgres};

/// Jobs of type `J` in its default queue, newest first (at most `limit`),
/// in any state, with their typed args. Jobs whose args no longer match
/// `J` are an error naming the job.
pub async fn enqueued<'c, A, J>(conn: A, limit: i64) -> Result<Vec<(JobView, J)>, Error>
where
    A: Acquire<'c, Database = Postgres>,
    J: Job,
{
    enqueued_in::<A, J>(conn, SchemaName::default_schema(), J::QUEUE, None, limit).await
}

/// Like [`enqueued`], for a substrate, a queue and optionally one state.
pub async fn enqueued_in<'c, A, J>(
    conn: A,
    schema: SchemaName,
    queue: &str,
    state: Option<JobState>,
    limit: i64,
) -> Result<Vec<(JobView, J)>, Error>
where
    A: Acquire<'c, Database = Postgres>,
    J: Job,
{
    let queue = QueueName::new(queue)?;
    let mut conn = conn.acquire().await?;
    // The kind filter is applied here, so ask for every job of the queue
    // up to the limit (tests hold few jobs).
    let jobs = PgHistoryPlane::new(schema)
        .list(&mut conn, Some(&queue), state, limit)
        .await?;
    jobs.into_iter()
        .filter(|j| j.kind == J::KIND)
        .map(|j| {
            let args = serde_json::from_value(j.args.clone()).map_err(|source| {
                Error::Worker(format!(
                    "job {} of kind {:?} has args that do not match {}: {source}",
                    j.id,
                    J::KIND,
                    std::any::type_name::<J>()
                ))
            })?;
            Ok((j, args))
        })
        .collect()
}

/// A throwaway database with the schema migrated, from the shared harness.
/// It is dropped when the returned value is.
#[cfg(feature = "test-support")]
pub async fn test_db() -> Result<awa_harness::TestDb, awa_harness::HarnessError> {
    awa_maint::migrated_test_db().await
}
