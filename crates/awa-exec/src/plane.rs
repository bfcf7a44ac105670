//! The execution plane's operations: claim, finish, heartbeat, cancel.

use crate::ExecError;
use async_trait::async_trait;
use awa_core::{
    AttemptToken, ClaimedJob, JobId, JobState, QueueName, RunLease, SchemaName, sql::statement,
};
use sqlx::{Connection, PgConnection, Row};
use std::time::Duration;

/// The claim frontier candidate carried from one claim to the next (see
/// `ready_take`): a lane position and the id of the transaction that read
/// it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Frontier {
    seq: Option<i64>,
    xid: Option<String>,
    waiting: bool,
}

impl Frontier {
    /// True when the last claim saw work it could not take yet because the
    /// frontier had not settled: look again shortly.
    pub fn is_waiting(&self) -> bool {
        self.waiting
    }
}

/// How an attempt ends.
#[derive(Debug, Clone, PartialEq)]
pub enum Finish {
    Complete,
    /// Retry after `delay` (None: exponential backoff with jitter), or fail
    /// once max attempts are used.
    Retry {
        delay: Option<Duration>,
        error: String,
    },
    /// Run again after `delay`; the attempt is not counted.
    Snooze {
        delay: Duration,
    },
    Cancel {
        reason: String,
    },
    /// Fail now: terminal, or dead-lettered when the queue opted in.
    Fail {
        error: String,
    },
    /// Give the job back untouched (graceful shutdown); not counted.
    Release,
    /// Maintenance found the attempt abandoned; retried like `Retry`.
    Rescue {
        reason: String,
    },
}

impl Finish {
    pub(crate) fn outcome(&self) -> &'static str {
        match self {
            Finish::Complete => "complete",
            Finish::Retry { .. } => "retry",
            Finish::Snooze { .. } => "snooze",
            Finish::Cancel { .. } => "cancel",
            Finish::Fail { .. } => "fail",
            Finish::Release => "release",
            Finish::Rescue { .. } => "rescue",
        }
    }

    /// The error or reason this result carries, if any.
    pub fn error_text(&self) -> Option<&str> {
        match self {
            Finish::Retry { error, .. } | Finish::Fail { error } => Some(error),
            Finish::Cancel { reason } | Finish::Rescue { reason } => Some(reason),
            Finish::Complete | Finish::Snooze { .. } | Finish::Release => None,
        }
    }

    // `delay_secs` and `error` are the only ways a result reaches the
    // database, so this is the one place handler results are bounded (see
    // `awa_core::bounds`): a result the database cannot store would fail
    // its whole batch.

    /// The delay as stored: clamped to `0..=bounds::MAX_HANDLER_DELAY`.
    fn delay_secs(&self) -> Option<f64> {
        let stored = |d: Duration| awa_core::bounds::handler_delay(d).as_secs_f64();
        match self {
            Finish::Retry { delay, .. } => delay.map(stored),
            Finish::Snooze { delay } => Some(stored(*delay)),
            _ => None,
        }
    }

    /// The error text as stored: no NUL, at most `bounds::MAX_ERROR_BYTES`.
    fn error(&self) -> Option<std::borrow::Cow<'_, str>> {
        match self {
            Finish::Retry { error, .. } | Finish::Fail { error } => {
                Some(awa_core::bounds::error_text(error))
            }
            Finish::Cancel { reason } | Finish::Rescue { reason } => {
                Some(awa_core::bounds::error_text(reason))
            }
            _ => None,
        }
    }
}

/// What the guarded finish did with one attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct Finished {
    pub job_id: JobId,
    pub run_lease: RunLease,
    /// False: the lease was stale (finished, rescued or never issued) and
    /// nothing was written.
    pub accepted: bool,
    /// Where the job went, when accepted.
    pub next_state: Option<JobState>,
}

/// What publishing the rescue bound did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Published {
    /// The substrate already had this bound.
    Unchanged,
    /// The bound changed from `previous` (None: nothing was published).
    Changed { previous: Option<Duration> },
}

/// Progress a long job reports with its heartbeat.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Progress {
    /// How far along, 0 to 100.
    pub percent: Option<i16>,
    /// What it is doing (at most 8 KiB, no NUL).
    pub message: Option<String>,
    /// State for the next attempt to resume from.
    pub checkpoint: Option<serde_json::Value>,
}

#[async_trait]
pub trait ExecPlane: Send + Sync + std::fmt::Debug {
    /// Claim up to `limit` jobs of `queue` in one round trip.
    async fn claim(
        &self,
        conn: &mut PgConnection,
        queue: &QueueName,
        limit: i32,
        frontier: &mut Frontier,
        instance: Option<uuid::Uuid>,
    ) -> Result<Vec<ClaimedJob>, ExecError>;

    /// Finish many attempts in one round trip, each guarded by its lease.
    async fn finish(
        &self,
        conn: &mut PgConnection,
        batch: &[(AttemptToken, Finish)],
    ) -> Result<Vec<Finished>, ExecError>;

    /// Keep a long attempt alive; false when it is no longer live.
    async fn heartbeat(
        &self,
        conn: &mut PgConnection,
        token: &AttemptToken,
        progress: &Progress,
    ) -> Result<bool, ExecError>;

    /// The checkpoint saved by this job's attempts (through a heartbeat's
    /// [`Progress::checkpoint`]), kept across retries; None when nothing
    /// was saved.
    async fn checkpoint(
        &self,
        conn: &mut PgConnection,
        job: JobId,
    ) -> Result<Option<serde_json::Value>, ExecError>;

    /// Cancel a job wherever it is; the state it was cancelled from, or
    /// None when it was unknown or already terminal. Outside a
    /// transaction, a serialization failure (a finish racing for the same
    /// attempt) is retried here; inside one it is returned, the
    /// transaction being aborted.
    async fn cancel_job(
        &self,
        conn: &mut PgConnection,
        job: JobId,
    ) -> Result<Option<String>, ExecError>;

    /// The rescue bound maintenance published for this substrate, if any.
    async fn rescue_bound(&self, conn: &mut PgConnection) -> Result<Option<Duration>, ExecError>;

    /// Record the rescue bound maintenance uses (checked against
    /// `awa_core::bounds::RESCUE_AFTER`), so workers heartbeat within it.
    async fn publish_rescue_bound(
        &self,
        conn: &mut PgConnection,
        bound: Duration,
    ) -> Result<Published, ExecError>;

    /// Finish abandoned attempts (no heartbeat within `stale`, past their
    /// deadline, or a timed-out callback wait) as retries; how many.
    async fn rescue_stale(
        &self,
        conn: &mut PgConnection,
        stale: Duration,
        limit: i32,
    ) -> Result<u64, ExecError>;
}

/// How many times `cancel_job` runs again after a serialization failure
/// before it returns the error (see `cancel_job`): more than racers for
/// one job ever need in the tests (`batches.rs` races four).
const CANCEL_RETRIES: u32 = 50;

#[derive(Debug, Clone)]
pub struct PgExecPlane {
    schema: SchemaName,
}

impl PgExecPlane {
    pub fn new(schema: SchemaName) -> Self {
        Self { schema }
    }

    /// [`ExecPlane::claim`] as a transaction of its own (`conn` must not be
    /// inside one), whose commit does not wait for the WAL flush. The
    /// worker's dispatcher claims this way: a claim lost in a crash only
    /// hands its jobs out again, and nothing can depend on it durably
    /// before it is flushed, since every later commit that waits for the
    /// flush (a finish of one of its jobs among them) flushes the WAL up
    /// to itself, claim included. Waiting for the flush was a fifth of a
    /// claim of 512 jobs and held the queue's lanes meanwhile.
    pub async fn claim_committing_async(
        &self,
        conn: &mut PgConnection,
        queue: &QueueName,
        limit: i32,
        frontier: &mut Frontier,
        instance: Option<uuid::Uuid>,
    ) -> Result<Vec<ClaimedJob>, ExecError> {
        self.claim_rows(conn, queue, limit, frontier, instance, true)
            .await
    }

    async fn claim_rows(
        &self,
        conn: &mut PgConnection,
        queue: &QueueName,
        limit: i32,
        frontier: &mut Frontier,
        instance: Option<uuid::Uuid>,
        commit_async: bool,
    ) -> Result<Vec<ClaimedJob>, ExecError> {
        let began = std::time::Instant::now();
        let rows = sqlx::query(statement(
            include_str!("../sql/call_claim.sql"),
            &self.schema,
        ))
        .bind(queue.as_str())
        .bind(limit)
        .bind(frontier.seq)
        .bind(frontier.xid.as_deref())
        .bind(instance)
        .bind(commit_async)
        .fetch_all(conn)
        .await?;
        crate::metrics::claim_round_trip(queue.as_str(), began.elapsed());
        // Columns by position, in call_claim.sql's order: a claim decodes
        // up to 1,024 rows of 18 columns, and a lookup by name per column
        // was a tenth of the worker's time in a drain.
        let mut jobs = Vec::with_capacity(rows.len());
        for row in rows {
            frontier.seq = row.get(15);
            frontier.xid = row.get(16);
            frontier.waiting = row.get(17);
            let Some(job_id) = row.get::<Option<i64>, _>(0) else {
                continue;
            };
            jobs.push(ClaimedJob {
                token: AttemptToken {
                    job_id: JobId(job_id),
                    run_lease: RunLease(row.get(1)),
                    claim_slot: row.get(2),
                    batch_id: row.get(3),
                    item: row.get(4),
                    ready_slot: row.get(5),
                    ready_seq: row.get(6),
                },
                queue: queue.clone(),
                kind: row.get(7),
                args: row.get(8),
                priority: row.get(9),
                attempt: row.get(10),
                max_attempts: row.get(11),
                // Saturated, not a panic, for a time only a superuser's
                // write can hold (ready_append bounds what it is given).
                created_at: row.get::<awa_core::DbTime, _>(12).saturating(),
                ready_at: row.get::<awa_core::DbTime, _>(13).saturating(),
                metadata: row.get(14),
            });
        }
        // One counter update per kind, not per job.
        let mut kinds: Vec<(&str, u64)> = Vec::new();
        for job in &jobs {
            match kinds.iter_mut().find(|(k, _)| *k == job.kind) {
                Some((_, n)) => *n += 1,
                None => kinds.push((&job.kind, 1)),
            }
        }
        for (kind, n) in kinds {
            crate::metrics::claimed(queue.as_str(), kind, n);
        }
        Ok(jobs)
    }

    /// Say which jobs worker engine `instance_id` holds claimed and not
    /// started (replacing what it said before): the read views show them
    /// as buffered. At most about once a second per engine.
    pub async fn publish_buffer(
        &self,
        conn: &mut PgConnection,
        instance_id: uuid::Uuid,
        job_ids: &[i64],
    ) -> Result<(), ExecError> {
        sqlx::query(statement(
            include_str!("../sql/buffer_publish.sql"),
            &self.schema,
        ))
        .bind(instance_id)
        .bind(job_ids)
        .execute(conn)
        .await?;
        Ok(())
    }

    /// A stopping engine holds nothing buffered.
    pub async fn clear_buffer(
        &self,
        conn: &mut PgConnection,
        instance_id: uuid::Uuid,
    ) -> Result<(), ExecError> {
        sqlx::query(statement(
            include_str!("../sql/buffer_clear.sql"),
            &self.schema,
        ))
        .bind(instance_id)
        .execute(conn)
        .await?;
        Ok(())
    }

    /// Drop buffer rows not refreshed for `older_than` (engines that died).
    pub async fn gc_buffers(
        &self,
        conn: &mut PgConnection,
        older_than: Duration,
    ) -> Result<u64, ExecError> {
        let done = sqlx::query(statement(
            include_str!("../sql/buffer_gc.sql"),
            &self.schema,
        ))
        .bind(older_than.as_secs_f64())
        .execute(conn)
        .await?;
        Ok(done.rows_affected())
    }

    /// Move `claim_floor` up to the batches claimed now, so the read views
    /// read the open claim batches and the few claimed since, not the
    /// closed ones the claim ring still holds (`fn_claim_floor_advance.sql`
    /// has the proof). The leader's health task, before it measures; the
    /// floor in force afterwards. Outside READ COMMITTED nothing moves.
    pub async fn advance_claim_floor(&self, conn: &mut PgConnection) -> Result<i64, ExecError> {
        let floor: i64 = sqlx::query_scalar(statement(
            include_str!("../sql/call_claim_floor_advance.sql"),
            &self.schema,
        ))
        .fetch_one(conn)
        .await?;
        Ok(floor)
    }

    /// What the job's attempts reported with their heartbeats (operators'
    /// view; `None`: nothing reported, or the job has finished).
    pub async fn attempt_progress(
        &self,
        conn: &mut PgConnection,
        job: JobId,
    ) -> Result<Option<AttemptProgress>, ExecError> {
        let row = sqlx::query(statement(
            include_str!("../sql/attempt_progress.sql"),
            &self.schema,
        ))
        .bind(job.0)
        .fetch_optional(conn)
        .await?;
        Ok(row.map(|r| AttemptProgress {
            run_lease: r.get("run_lease"),
            percent: r.get("percent"),
            message: r.get("message"),
            checkpoint: r.get("checkpoint"),
            updated_at: r.get("updated_at"),
        }))
    }
}

/// Progress of a job's attempts as last reported by a heartbeat.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct AttemptProgress {
    /// The attempt (run lease) that reported it.
    pub run_lease: i64,
    pub percent: Option<i16>,
    pub message: Option<String>,
    pub checkpoint: Option<serde_json::Value>,
    pub updated_at: awa_core::DbTime,
}

#[async_trait]
impl ExecPlane for PgExecPlane {
    async fn claim(
        &self,
        conn: &mut PgConnection,
        queue: &QueueName,
        limit: i32,
        frontier: &mut Frontier,
        instance: Option<uuid::Uuid>,
    ) -> Result<Vec<ClaimedJob>, ExecError> {
        self.claim_rows(conn, queue, limit, frontier, instance, false)
            .await
    }

    async fn finish(
        &self,
        conn: &mut PgConnection,
        batch: &[(AttemptToken, Finish)],
    ) -> Result<Vec<Finished>, ExecError> {
        if batch.is_empty() {
            return Ok(Vec::new());
        }
        let ids: Vec<i64> = batch.iter().map(|(t, _)| t.job_id.0).collect();
        let leases: Vec<i64> = batch.iter().map(|(t, _)| t.run_lease.0).collect();
        let slots: Vec<i32> = batch.iter().map(|(t, _)| t.claim_slot).collect();
        let batch_ids: Vec<i64> = batch.iter().map(|(t, _)| t.batch_id).collect();
        let items: Vec<i32> = batch.iter().map(|(t, _)| t.item).collect();
        let outcomes: Vec<&str> = batch.iter().map(|(_, f)| f.outcome()).collect();
        let delays: Vec<Option<f64>> = batch.iter().map(|(_, f)| f.delay_secs()).collect();
        let stored_errors: Vec<_> = batch.iter().map(|(_, f)| f.error()).collect();
        let errors: Vec<Option<&str>> = stored_errors.iter().map(|e| e.as_deref()).collect();
        let began = std::time::Instant::now();
        let rows = sqlx::query(statement(
            include_str!("../sql/call_finish.sql"),
            &self.schema,
        ))
        .bind(ids)
        .bind(leases)
        .bind(slots)
        .bind(batch_ids)
        .bind(items)
        .bind(outcomes)
        .bind(delays)
        .bind(errors)
        .fetch_all(conn)
        .await?;
        crate::metrics::finish_round_trip(began.elapsed());
        Ok(rows
            .into_iter()
            .map(|row| Finished {
                job_id: JobId(row.get("job_id")),
                run_lease: RunLease(row.get("run_lease")),
                accepted: row.get("accepted"),
                next_state: row
                    .get::<Option<String>, _>("next_state")
                    .and_then(|s| s.parse().ok()),
            })
            .collect())
    }

    async fn heartbeat(
        &self,
        conn: &mut PgConnection,
        token: &AttemptToken,
        progress: &Progress,
    ) -> Result<bool, ExecError> {
        if let Some(p) = progress.percent
            && !(0..=100).contains(&p)
        {
            return Err(awa_core::InvalidInput::OutOfRange {
                what: "progress percent",
                value: p as i64,
                min: 0,
                max: 100,
                hint: "report progress as a whole percentage",
            }
            .into());
        }
        if let Some(c) = &progress.checkpoint {
            awa_core::check_storable_json("checkpoint", c)?;
        }
        let live: bool = sqlx::query_scalar(statement(
            include_str!("../sql/call_heartbeat.sql"),
            &self.schema,
        ))
        .bind(token.job_id.0)
        .bind(token.run_lease.0)
        .bind(token.claim_slot)
        .bind(token.batch_id)
        .bind(token.item)
        .bind(progress.percent)
        .bind(
            progress
                .message
                .as_deref()
                .map(awa_core::bounds::error_text)
                .as_deref(),
        )
        .bind(progress.checkpoint.as_ref())
        .fetch_one(conn)
        .await?;
        Ok(live)
    }

    async fn checkpoint(
        &self,
        conn: &mut PgConnection,
        job: JobId,
    ) -> Result<Option<serde_json::Value>, ExecError> {
        let saved: Option<Option<serde_json::Value>> = sqlx::query_scalar(statement(
            include_str!("../sql/read_checkpoint.sql"),
            &self.schema,
        ))
        .bind(job.0)
        .fetch_optional(conn)
        .await?;
        Ok(saved.flatten())
    }

    async fn cancel_job(
        &self,
        conn: &mut PgConnection,
        job: JobId,
    ) -> Result<Option<String>, ExecError> {
        // Cancelling a running attempt finishes it through `finish`, which
        // under contention for the same rows may give up with SQLSTATE
        // 40001 (serialization failure: the call rolled back, nothing was
        // written). On its own the call is then simply run again, here
        // rather than by every caller; inside the caller's transaction
        // that transaction is aborted, so the error is the caller's.
        let mut failed = 0u32;
        loop {
            let cancelled = sqlx::query_scalar(statement(
                include_str!("../sql/call_cancel_job.sql"),
                &self.schema,
            ))
            .bind(job.0)
            .fetch_one(&mut *conn)
            .await;
            match cancelled {
                Ok(from) => return Ok(from),
                Err(sqlx::Error::Database(db))
                    if db.code().as_deref() == Some("40001")
                        && !conn.is_in_transaction()
                        && failed < CANCEL_RETRIES =>
                {
                    failed += 1;
                    // A short pause that grows, so racers spread out.
                    tokio::time::sleep(Duration::from_millis(u64::from(failed.min(20)) * 5)).await;
                }
                Err(err) => return Err(err.into()),
            }
        }
    }

    async fn rescue_bound(&self, conn: &mut PgConnection) -> Result<Option<Duration>, ExecError> {
        let secs: Option<f64> = sqlx::query_scalar(statement(
            include_str!("../sql/rescue_bound_read.sql"),
            &self.schema,
        ))
        .fetch_optional(conn)
        .await?;
        Ok(secs.and_then(|s| Duration::try_from_secs_f64(s).ok()))
    }

    async fn publish_rescue_bound(
        &self,
        conn: &mut PgConnection,
        bound: Duration,
    ) -> Result<Published, ExecError> {
        awa_core::bounds::RESCUE_AFTER.check(bound)?;
        let row: Option<Option<f64>> = sqlx::query_scalar(statement(
            include_str!("../sql/rescue_bound_publish.sql"),
            &self.schema,
        ))
        .bind(bound.as_secs_f64())
        .fetch_optional(conn)
        .await?;
        Ok(match row {
            None => Published::Unchanged,
            Some(previous) => Published::Changed {
                previous: previous.and_then(|s| Duration::try_from_secs_f64(s).ok()),
            },
        })
    }

    async fn rescue_stale(
        &self,
        conn: &mut PgConnection,
        stale: Duration,
        limit: i32,
    ) -> Result<u64, ExecError> {
        let rescued: i32 = sqlx::query_scalar(statement(
            include_str!("../sql/call_rescue_stale.sql"),
            &self.schema,
        ))
        .bind(stale.as_secs_f64())
        .bind(limit)
        .fetch_one(conn)
        .await?;
        Ok(rescued as u64)
    }
}

/// Cancel job `id` in the first of `schemas` that holds it unfinished;
/// the state it was cancelled from, or None. For callers that follow the
/// storage routing over several substrates (ids are database-wide).
pub async fn cancel_in(
    conn: &mut PgConnection,
    schemas: &[SchemaName],
    id: JobId,
) -> Result<Option<String>, ExecError> {
    for schema in schemas {
        if let Some(from) = PgExecPlane::new(schema.clone())
            .cancel_job(conn, id)
            .await?
        {
            return Ok(Some(from));
        }
    }
    Ok(None)
}
