//! Enqueueing: the producer's side of the ready plane.

use crate::ReadyError;
use async_trait::async_trait;
use awa_core::{JobId, NewJob, SchemaName, sql::statement};
use sqlx::{PgConnection, Row};

/// What happened to one enqueued job.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct Enqueued {
    /// The new job's id, or, when its unique key was taken, the id of the
    /// job that holds the key.
    pub job_id: JobId,
    /// False when the unique key was already held by a non-terminal job.
    pub inserted: bool,
    /// True when the job waits in the deferred plane until its `run_at`.
    pub scheduled: bool,
}

/// The ready plane's producer operations.
///
/// Enqueue inside your own transaction, so the job exists exactly when your
/// data does:
///
/// ```no_run
/// use awa_core::{NewJob, QueueName, SchemaName};
/// use awa_ready::{PgReadyPlane, ReadyPlane};
/// use sqlx::Connection;
///
/// # async fn example(conn: &mut sqlx::PgConnection) -> Result<(), Box<dyn std::error::Error>> {
/// let producer = PgReadyPlane::new(SchemaName::default_schema());
/// let mut tx = conn.begin().await?;
/// // ... your own writes on `tx` ...
/// let mut email = NewJob::new(QueueName::new("email")?, "send_welcome", serde_json::json!({"user": 42}));
/// email.unique_key = Some("welcome:42".into()); // at most one live job per key
/// let done = producer.enqueue(&mut tx, &[email]).await?;
/// tx.commit().await?; // visible to workers now; a rollback would leave no trace
/// println!("job {} (new: {})", done[0].job_id, done[0].inserted);
/// # Ok(())
/// # }
/// ```
#[async_trait]
pub trait ReadyPlane: Send + Sync + std::fmt::Debug {
    /// Enqueue jobs in one round trip, on the caller's connection or
    /// transaction: commit makes them visible, rollback leaves no trace.
    /// Results come back in input order.
    async fn enqueue(
        &self,
        conn: &mut PgConnection,
        jobs: &[NewJob],
    ) -> Result<Vec<Enqueued>, ReadyError>;
}

/// The PostgreSQL ready plane of one substrate.
#[derive(Debug, Clone)]
pub struct PgReadyPlane {
    schema: SchemaName,
    max_job_bytes: usize,
}

impl PgReadyPlane {
    pub fn new(schema: SchemaName) -> Self {
        Self {
            schema,
            max_job_bytes: NewJob::DEFAULT_MAX_BYTES,
        }
    }

    /// The size limit checked before anything is sent (args plus metadata
    /// as JSON; default [`NewJob::DEFAULT_MAX_BYTES`]). The database
    /// enforces its substrate's `max_job_bytes` in any case: set this to
    /// that value when the substrate's limit was changed.
    pub fn with_max_job_bytes(mut self, bytes: usize) -> Self {
        self.max_job_bytes = bytes;
        self
    }

    pub fn schema(&self) -> &SchemaName {
        &self.schema
    }
}

#[async_trait]
impl ReadyPlane for PgReadyPlane {
    async fn enqueue(
        &self,
        conn: &mut PgConnection,
        jobs: &[NewJob],
    ) -> Result<Vec<Enqueued>, ReadyError> {
        if jobs.is_empty() {
            return Ok(Vec::new());
        }
        for job in jobs {
            job.validate()?;
            job.check_size(self.max_job_bytes)?;
        }
        let queues: Vec<&str> = jobs.iter().map(|j| j.queue.as_str()).collect();
        let kinds: Vec<&str> = jobs.iter().map(|j| j.kind.as_str()).collect();
        let args: Vec<&serde_json::Value> = jobs.iter().map(|j| &j.args).collect();
        let priorities: Vec<i16> = jobs.iter().map(|j| j.priority.get()).collect();
        let run_at: Vec<Option<chrono::DateTime<chrono::Utc>>> =
            jobs.iter().map(|j| j.run_at).collect();
        let max_attempts: Vec<Option<i32>> = jobs.iter().map(|j| j.max_attempts).collect();
        let unique_keys: Vec<Option<&str>> = jobs.iter().map(|j| j.unique_key.as_deref()).collect();
        let metadata: Vec<Option<&serde_json::Value>> =
            jobs.iter().map(|j| j.metadata.as_ref()).collect();
        let rows = sqlx::query(statement(
            include_str!("../sql/call_enqueue.sql"),
            &self.schema,
        ))
        .bind(queues)
        .bind(kinds)
        .bind(args)
        .bind(priorities)
        .bind(run_at)
        .bind(max_attempts)
        .bind(unique_keys)
        .bind(metadata)
        .fetch_all(conn)
        .await
        .map_err(ReadyError::from_database)?;
        Ok(rows
            .into_iter()
            .map(|row| Enqueued {
                job_id: JobId(row.get("job_id")),
                inserted: row.get("inserted"),
                scheduled: row.get("scheduled"),
            })
            .collect())
    }
}
