//! Firing periodic jobs: the leader's cron task, and manual runs.
//!
//! Each pass reads the enabled schedules, computes the ticks due at the
//! database's clock (`awa_control::cron::Ticks::due`: the latest one, or
//! the latest N with `catch_up`), and fires each in a transaction of its
//! own that enqueues the job and passes the guard (`cron_fire.sql`), which
//! moves the schedule's `last_tick` forward. A leader that dies before
//! committing leaves the tick to the next pass or leader; one that dies
//! after has moved `last_tick`, so nobody fires it again. A schedule that
//! cannot fire is skipped with its error recorded on its row; the others
//! keep firing.

use crate::MaintError;
use awa_control::cron::{self, Missed, Stored, Ticks};
use awa_core::{JobId, NewJob, Priority, QueueName, SchemaName};
use awa_ready::{PgReadyPlane, ReadyPlane};
use chrono::{DateTime, Utc};
use sqlx::{Connection, PgPool};

/// One tick fired.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Fired {
    pub schedule: String,
    pub tick: DateTime<Utc>,
    pub job_id: JobId,
}

/// The job a schedule enqueues, with `awa_cron` in its metadata: the
/// schedule's name and the tick (RFC 3339), or `"manual": true`.
fn job_for(stored: &Stored, marker: serde_json::Value) -> Result<NewJob, MaintError> {
    let s = &stored.schedule;
    let mut job = NewJob::new(
        QueueName::new(s.queue.clone())?,
        s.kind.clone(),
        s.args.clone(),
    );
    job.priority = Priority::new(i64::from(s.priority))?;
    job.max_attempts = s.max_attempts;
    let mut metadata = match &s.metadata {
        Some(serde_json::Value::Object(m)) => m.clone(),
        _ => serde_json::Map::new(),
    };
    metadata.insert("awa_cron".into(), marker);
    job.metadata = Some(serde_json::Value::Object(metadata));
    Ok(job)
}

/// Fire every tick due at `now` (the database's clock in the task; any
/// instant in tests) into substrate `schema`.
///
/// One schedule that cannot fire never holds the others back: its error
/// (an expression, zone or queue no client validated because SQL wrote
/// it, args over `max_job_bytes`, ...) is recorded on its row
/// (`cron::record_error`, logged once per new error) and the pass goes on
/// to the next schedule. Only an error of the database itself (connection,
/// pool, server shutdown: `awa_core::db_error::is_transient`), which would
/// fail every schedule alike and blames none, ends the pass; the next pass
/// tries again.
pub async fn fire_due(
    pool: &PgPool,
    schema: &SchemaName,
    now: DateTime<Utc>,
) -> Result<Vec<Fired>, MaintError> {
    let ready = PgReadyPlane::routed(schema.clone());
    let schedules = {
        let mut conn = pool.acquire().await?;
        cron::list(&mut conn, true).await?
    };
    let mut fired = Vec::new();
    for stored in schedules {
        let Err(err) = fire_schedule(pool, &ready, &stored, now, &mut fired).await else {
            continue;
        };
        if is_transient(&err) {
            return Err(err);
        }
        let name = &stored.schedule.name;
        let text = err.to_string();
        let mut conn = pool.acquire().await?;
        if cron::record_error(&mut conn, name, &text).await? {
            tracing::warn!(schedule = %name, error = %text,
                "schedule cannot fire; skipping it (awa cron list shows why; fix it with awa cron add --replace)");
        }
    }
    Ok(fired)
}

/// Whether `err` is the database failing rather than the schedule.
fn is_transient(err: &MaintError) -> bool {
    match err {
        MaintError::Database(e) => awa_core::db_error::is_transient(e),
        _ => false,
    }
}

/// Fire the due ticks of one schedule, oldest first, each in its own
/// transaction; push each fired tick onto `fired` as it commits.
async fn fire_schedule(
    pool: &PgPool,
    ready: &PgReadyPlane,
    stored: &Stored,
    now: DateTime<Utc>,
    fired: &mut Vec<Fired>,
) -> Result<(), MaintError> {
    let s = &stored.schedule;
    // A stored time no reader can show (written by SQL) leaves nothing to
    // compute ticks from: this schedule fails alone, saying which.
    if !stored.warnings.is_empty() {
        return Err(MaintError::Invalid(awa_core::InvalidInput::Choice {
            what: "a stored time of this schedule",
            value: stored.warnings.join("; "),
            why: "define the schedule again (awa cron add --replace) to fire it",
        }));
    }
    // Validated on write by every client, but the runtime role may write
    // the row by SQL: parse again, and let a bad one fail alone.
    let ticks = Ticks::parse(&s.cron, &s.timezone)?;
    let after = stored
        .last_tick
        .map_or(stored.fire_from, |t| t.max(stored.fire_from));
    let keep = match s.missed {
        Missed::Skip => 1,
        Missed::CatchUp { limit } => limit,
    };
    let due = ticks.due(after, now, keep);
    if due.is_empty() {
        // Nothing due is the common answer; one that will never change
        // (no future tick, e.g. February 30 written by SQL) is an error.
        ticks.check_fires(&s.cron, now)?;
    }
    for tick in due {
        let marker = serde_json::json!({"schedule": s.name, "tick": tick.to_rfc3339()});
        let job = job_for(stored, marker)?;
        let mut conn = pool.acquire().await?;
        let mut tx = conn.begin().await?;
        let done = ready.enqueue(&mut tx, std::slice::from_ref(&job)).await?;
        let job_id = done[0].job_id;
        if cron::record_fire(&mut tx, stored, tick, job_id.0).await? {
            tx.commit().await?;
            tracing::debug!(schedule = %s.name, %tick, %job_id, "cron tick fired");
            fired.push(Fired {
                schedule: s.name.clone(),
                tick,
                job_id,
            });
        } else {
            // Fired already, paused or changed since it was read: the
            // job is rolled back, and later ticks wait for the next pass.
            tx.rollback().await?;
            break;
        }
    }
    Ok(())
}

/// Enqueue a schedule's job now, outside its ticks (`awa cron run-now`).
/// None when there is no schedule of that name.
pub async fn run_now(
    pool: &PgPool,
    schema: &SchemaName,
    name: &str,
) -> Result<Option<JobId>, MaintError> {
    let mut conn = pool.acquire().await?;
    let Some(stored) = cron::list(&mut conn, false)
        .await?
        .into_iter()
        .find(|s| s.schedule.name == name)
    else {
        return Ok(None);
    };
    let job = job_for(
        &stored,
        serde_json::json!({"schedule": name, "manual": true}),
    )?;
    let mut tx = conn.begin().await?;
    let done = PgReadyPlane::routed(schema.clone())
        .enqueue(&mut tx, std::slice::from_ref(&job))
        .await?;
    if !cron::record_run_now(&mut tx, name, done[0].job_id.0).await? {
        tx.rollback().await?;
        return Ok(None);
    }
    tx.commit().await?;
    Ok(Some(done[0].job_id))
}
