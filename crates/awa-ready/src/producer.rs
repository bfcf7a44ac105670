//! Enqueueing: the producer's side of the ready plane.

use crate::ReadyError;
use async_trait::async_trait;
use awa_core::{JobId, NewJob, SchemaName, sql::statement};
use sqlx::postgres::PgRow;
use sqlx::{Connection, PgConnection, Row};
use std::sync::LazyLock;

/// What happened to one enqueued job.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct Enqueued {
    /// The new job's id, or, when its unique key was taken, the id of the
    /// job that holds the key.
    pub job_id: JobId,
    /// False when the unique key was already held (by an unfinished job,
    /// or one its key spec keeps after it finished): nothing was inserted.
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
/// // Or derived: one job per args every 10 minutes (awa_core::Unique).
/// // email.unique = Some(awa_core::Unique::by_args().period(std::time::Duration::from_secs(600)));
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
///
/// Pinned ([`PgReadyPlane::new`]): jobs go to exactly that substrate.
/// Routed ([`PgReadyPlane::routed`]): they go where the storage-transition
/// state says new work goes now, decided in SQL by the same statement
/// (`{schema}.enqueue` forwards); the schema given is only where the
/// caller expects that to be, which saves the forwarding when it is right.
#[derive(Debug, Clone)]
pub struct PgReadyPlane {
    schema: SchemaName,
    routed: bool,
    max_job_bytes: usize,
}

impl PgReadyPlane {
    /// Pinned to `schema`, whatever the routing: for tests, tools, and a
    /// substrate used on its own.
    pub fn new(schema: SchemaName) -> Self {
        Self {
            schema,
            routed: false,
            max_job_bytes: NewJob::DEFAULT_MAX_BYTES,
        }
    }

    /// Routed by the storage-transition state; `expected_write` is the
    /// write substrate as the caller last read it (see
    /// `awa_control::routing`), used first.
    pub fn routed(expected_write: SchemaName) -> Self {
        Self {
            routed: true,
            ..Self::new(expected_write)
        }
    }

    /// Whether this plane follows the routing.
    pub fn is_routed(&self) -> bool {
        self.routed
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

    /// Every job valid and within the size limit: checked before anything
    /// is sent, by both enqueue paths.
    fn check(&self, jobs: &[NewJob]) -> Result<(), ReadyError> {
        for job in jobs {
            job.validate()?;
            job.check_size(self.max_job_bytes)?;
        }
        Ok(())
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
        self.check(jobs)?;
        let queues: Vec<&str> = jobs.iter().map(|j| j.queue.as_str()).collect();
        let kinds: Vec<&str> = jobs.iter().map(|j| j.kind.as_str()).collect();
        let args: Vec<&serde_json::Value> = jobs.iter().map(|j| &j.args).collect();
        let priorities: Vec<i16> = jobs.iter().map(|j| j.priority.get()).collect();
        let max_attempts: Vec<Option<i32>> = jobs.iter().map(|j| j.max_attempts).collect();
        let metadata: Vec<Option<&serde_json::Value>> =
            jobs.iter().map(|j| j.metadata.as_ref()).collect();
        if fast_path(jobs) {
            let rows = sqlx::query(statement(&APPEND_ARRAYS, &self.schema))
                .bind(self.routed)
                .bind(&queues)
                .bind(&kinds)
                .bind(&args)
                .bind(&priorities)
                .bind(&max_attempts)
                .bind(&metadata)
                .fetch_all(&mut *conn)
                .await
                .map_err(ReadyError::from_database)?;
            // No rows: this substrate does not receive writes now (a
            // storage transition moved them) and nothing was written; the
            // general path below forwards to the one that does.
            if !rows.is_empty() {
                return Ok(rows.into_iter().map(enqueued).collect());
            }
        }
        let run_at: Vec<Option<chrono::DateTime<chrono::Utc>>> =
            jobs.iter().map(|j| j.run_at).collect();
        let unique_keys: Vec<Option<&str>> = jobs.iter().map(|j| j.unique_key.as_deref()).collect();
        // Key specs, or NULL when no job has one (the SQL's cheapest test).
        let specs: Option<Vec<Option<serde_json::Value>>> =
            jobs.iter().any(|j| j.unique.is_some()).then(|| {
                jobs.iter()
                    .map(|j| j.unique.as_ref().map(awa_core::Unique::to_json))
                    .collect()
            });
        let general = if self.routed {
            include_str!("../sql/call_enqueue.sql")
        } else {
            include_str!("../sql/call_enqueue_local.sql")
        };
        let rows = sqlx::query(statement(general, &self.schema))
            .bind(queues)
            .bind(kinds)
            .bind(args)
            .bind(priorities)
            .bind(run_at)
            .bind(max_attempts)
            .bind(unique_keys)
            .bind(metadata)
            .bind(specs)
            .fetch_all(conn)
            .await
            .map_err(ReadyError::from_database)?;
        Ok(rows.into_iter().map(enqueued).collect())
    }
}

fn enqueued(row: PgRow) -> Enqueued {
    Enqueued {
        job_id: JobId(row.get("job_id")),
        inserted: row.get("inserted"),
        scheduled: row.get("scheduled"),
    }
}

/// The fast paths' one statement, reading the batch from bound arrays
/// (`enqueue`) or from the COPY staging table (`enqueue_copy`): see the
/// header of call_enqueue_append.sql. Both parts are constants of this
/// crate.
static APPEND_ARRAYS: LazyLock<String> = LazyLock::new(|| {
    include_str!("../sql/call_enqueue_append.sql")
        .replace("{input}", include_str!("../sql/enqueue_input_arrays.sql"))
});
static APPEND_STAGED: LazyLock<String> = LazyLock::new(|| {
    include_str!("../sql/call_enqueue_append.sql")
        .replace("{input}", include_str!("../sql/enqueue_input_staged.sql"))
});

/// The fast paths (call_enqueue_append.sql) take a
/// batch with no unique key, key spec or run_at: everything runnable now,
/// no key to claim. Anything else goes through `{schema}.enqueue`.
fn fast_path(jobs: &[NewJob]) -> bool {
    jobs.iter()
        .all(|j| j.unique_key.is_none() && j.unique.is_none() && j.run_at.is_none())
}

/// One COPY text-format field: backslash, tab, newline and carriage
/// return escaped (COPY's own escapes), so any string travels unchanged.
fn copy_field(out: &mut Vec<u8>, value: &str) {
    for b in value.bytes() {
        match b {
            b'\\' => out.extend_from_slice(b"\\\\"),
            b'\t' => out.extend_from_slice(b"\\t"),
            b'\n' => out.extend_from_slice(b"\\n"),
            b'\r' => out.extend_from_slice(b"\\r"),
            _ => out.push(b),
        }
    }
}

/// The COPY text of `jobs` for copy_staging_in.sql: ord, queue, kind, args,
/// priority, max_attempts, metadata; `\N` for NULL.
fn copy_rows(jobs: &[NewJob]) -> Vec<u8> {
    let mut out = Vec::with_capacity(jobs.len() * 96);
    for (i, job) in jobs.iter().enumerate() {
        out.extend_from_slice((i + 1).to_string().as_bytes());
        out.push(b'\t');
        copy_field(&mut out, job.queue.as_str());
        out.push(b'\t');
        copy_field(&mut out, &job.kind);
        out.push(b'\t');
        copy_field(&mut out, &job.args.to_string());
        out.push(b'\t');
        out.extend_from_slice(job.priority.get().to_string().as_bytes());
        out.push(b'\t');
        match job.max_attempts {
            Some(n) => out.extend_from_slice(n.to_string().as_bytes()),
            None => out.extend_from_slice(b"\\N"),
        }
        out.push(b'\t');
        match &job.metadata {
            Some(m) => copy_field(&mut out, &m.to_string()),
            None => out.extend_from_slice(b"\\N"),
        }
        out.push(b'\n');
    }
    out
}

impl PgReadyPlane {
    /// Enqueue a large batch through COPY, on the caller's connection or
    /// transaction, with exactly the outcome of [`ReadyPlane::enqueue`]
    /// (same rows, results in input order, lane positions in input order,
    /// the size limit, one notification per queue).
    ///
    /// The batch is copied into a session-private temporary staging table
    /// and appended from there by one statement under ready_append's
    /// ordering rule. It runs in a transaction of its own, or in a
    /// savepoint when `conn` is already in one: a failure leaves nothing of
    /// the batch, and the caller's transaction decides when it becomes
    /// visible. A batch with a unique key, a key spec or a `run_at` goes through
    /// [`ReadyPlane::enqueue`] (the same SQL, so the same uniqueness and
    /// scheduling). Worth it from about a thousand jobs per call; needs
    /// PostgreSQL's default TEMPORARY privilege on the database.
    pub async fn enqueue_copy(
        &self,
        conn: &mut PgConnection,
        jobs: &[NewJob],
    ) -> Result<Vec<Enqueued>, ReadyError> {
        if jobs.is_empty() {
            return Ok(Vec::new());
        }
        self.check(jobs)?;
        if !fast_path(jobs) {
            return self.enqueue(conn, jobs).await;
        }
        let data = copy_rows(jobs);
        let mut tx = conn.begin().await.map_err(ReadyError::from_database)?;
        sqlx::query(include_str!("../sql/copy_staging_prepare.sql"))
            .execute(&mut *tx)
            .await
            .map_err(ReadyError::from_database)?;
        let mut copy = tx
            .copy_in_raw(include_str!("../sql/copy_staging_in.sql"))
            .await
            .map_err(ReadyError::from_database)?;
        if let Err(err) = copy.send(data).await {
            // The connection must leave COPY mode before the rollback.
            let _ = copy.abort("enqueue_copy: sending failed").await;
            return Err(ReadyError::from_database(err));
        }
        copy.finish().await.map_err(ReadyError::from_database)?;
        let rows = sqlx::query(statement(&APPEND_STAGED, &self.schema))
            .bind(self.routed)
            .fetch_all(&mut *tx)
            .await
            .map_err(ReadyError::from_database)?;
        // No rows: not the write substrate now (see `enqueue`); the staged
        // rows are consumed either way, and the general path forwards.
        let out = if rows.is_empty() {
            self.enqueue(&mut tx, jobs).await?
        } else {
            rows.into_iter().map(enqueued).collect()
        };
        tx.commit().await.map_err(ReadyError::from_database)?;
        Ok(out)
    }
}
