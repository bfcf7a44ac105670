//! Constants, fixtures and conversions between the model's vocabulary and
//! the PostgreSQL API's.

use super::ring_model::{How, MAX_ATTEMPTS, PruneOutcome, Ring, RotateOutcome, Shape, State};
use awa_control::rings as pg;
use awa_core::{JobState, NewJob, QueueName, SchemaName, SlotCounts};
use awa_exec::Finish;
use sqlx::{Connection, PgConnection, Row};
use std::fmt::Debug;
use std::time::Duration;

pub(super) const SCHEMA: &str = "prop";
pub(super) const QUEUE: &str = "ring";
pub(super) const LOCK_TIMEOUT: Duration = Duration::from_millis(100);
/// No single step may take longer (a hang is a failure, not a stuck CI).
pub(super) const STEP_TIMEOUT: Duration = Duration::from_secs(15);

pub(super) fn schema() -> SchemaName {
    SchemaName::new(SCHEMA).unwrap()
}

pub(super) fn queue() -> QueueName {
    QueueName::new(QUEUE).unwrap()
}

pub(super) fn new_jobs(n: usize) -> Vec<NewJob> {
    (0..n)
        .map(|_| {
            let mut j = NewJob::new(queue(), "prop", serde_json::json!({}));
            j.max_attempts = Some(MAX_ATTEMPTS);
            j
        })
        .collect()
}

pub(super) fn err(what: impl Debug) -> String {
    format!("{what:?}")
}

pub(super) fn same<T: PartialEq + Debug>(what: &str, model: T, postgres: T) -> Result<(), String> {
    if model == postgres {
        Ok(())
    } else {
        Err(format!(
            "{what}: the model says {model:?}, PostgreSQL {postgres:?}"
        ))
    }
}

pub(super) fn pg_ring(ring: Ring) -> pg::Ring {
    match ring {
        Ring::Queue => pg::Ring::Queue,
        Ring::Claim => pg::Ring::Claim,
        Ring::Lease => pg::Ring::Lease,
    }
}

pub(super) fn slot(s: i32) -> usize {
    usize::try_from(s).expect("a slot number")
}

pub(super) fn rotate_outcome(o: pg::RotateOutcome) -> RotateOutcome {
    match o {
        pg::RotateOutcome::Rotated {
            from,
            to,
            generation,
        } => RotateOutcome::Rotated {
            from: slot(from),
            to: slot(to),
            generation: generation as u64,
        },
        pg::RotateOutcome::Idle => RotateOutcome::Idle,
        pg::RotateOutcome::IncomingNotEmpty { slot: s } => {
            RotateOutcome::IncomingNotEmpty { slot: slot(s) }
        }
        pg::RotateOutcome::LostRace => RotateOutcome::LostRace,
    }
}

pub(super) fn prune_outcome(o: pg::PruneOutcome) -> Result<PruneOutcome, String> {
    Ok(match o {
        pg::PruneOutcome::Retired { slot: s } => PruneOutcome::Retired { slot: slot(s) },
        pg::PruneOutcome::Pruned { slot: s } => PruneOutcome::Pruned { slot: slot(s) },
        pg::PruneOutcome::NothingToPrune => PruneOutcome::NothingToPrune,
        pg::PruneOutcome::LiveRows { slot: s, .. } => PruneOutcome::LiveRows { slot: slot(s) },
        pg::PruneOutcome::SnapshotPinned { slot: s, .. } => {
            PruneOutcome::SnapshotPinned { slot: slot(s) }
        }
        pg::PruneOutcome::Busy { slot: s } => PruneOutcome::Busy { slot: slot(s) },
        other => return Err(format!("prune answered {other:?}")),
    })
}

/// How a model finish is asked of the execution plane.
pub(super) fn pg_finish(how: How) -> Finish {
    match how {
        How::Complete => Finish::Complete,
        How::Retry => Finish::Retry {
            delay: Some(Duration::ZERO),
            error: "prop: retry".into(),
        },
        How::Fail => Finish::Fail {
            error: "prop: fail".into(),
        },
        How::Rescue => Finish::Rescue {
            reason: "prop: rescue one".into(),
        },
        How::Cancel => Finish::Cancel {
            reason: "prop: cancel".into(),
        },
    }
}

/// Rescue retries with the default backoff (seconds); the model has no
/// clock, so make them due now, like a delay-0 retry.
pub(super) async fn rescued_are_due(conn: &mut PgConnection) -> Result<(), String> {
    sqlx::query("UPDATE prop.deferred_jobs SET run_at = now() WHERE run_at > now()")
        .execute(conn)
        .await
        .map_err(err)?;
    Ok(())
}

pub(super) fn job_state(s: State) -> JobState {
    match s {
        State::Available => JobState::Available,
        State::Running => JobState::Running,
        State::Retryable => JobState::Retryable,
        State::Completed => JobState::Completed,
        State::Failed => JobState::Failed,
        State::Cancelled => JobState::Cancelled,
    }
}

/// A fresh migrated database with the `prop` substrate and the test's one
/// lane. The lane exists up front: creating a lane makes a second producer
/// wait for the first one's commit (see `ready_append`), which would
/// deadlock a single-threaded driver holding a late writer open.
pub(super) async fn fresh_db() -> Result<awa_harness::TestDb, String> {
    let db = awa_maint::migrated_test_db().await.map_err(err)?;
    let mut conn = PgConnection::connect(db.url()).await.map_err(err)?;
    let shape = awa_core::SubstrateShape {
        schema: schema(),
        slots: SlotCounts::new(
            Shape::SMALL.queue as i64,
            Shape::SMALL.lease as i64,
            Shape::SMALL.claim as i64,
        )
        .map_err(err)?,
    };
    awa_maint::substrate::prepare(&mut conn, &shape, false)
        .await
        .map_err(err)?;
    // The model keeps no history: a sealed slot may be retired at once
    // (prune is given the shortest rotate interval it accepts).
    sqlx::query("UPDATE prop.substrate_info SET history_retention = interval '0'")
        .execute(&mut conn)
        .await
        .map_err(err)?;
    // The lane of the jobs' (default) priority exists, as it would after
    // a first job: producers creating a lane wait for each other.
    sqlx::query("INSERT INTO prop.lane_heads (queue, priority, shard) VALUES ($1, $2, 0)")
        .bind(QUEUE)
        .bind(awa_core::Priority::DEFAULT.get())
        .execute(&mut conn)
        .await
        .map_err(err)?;
    conn.close().await.map_err(err)?;
    Ok(db)
}

pub(super) async fn read_view(conn: &mut PgConnection) -> Result<View, String> {
    let rows = sqlx::query("SELECT id, state FROM prop.jobs")
        .fetch_all(conn)
        .await
        .map_err(err)?;
    let mut out = Vec::with_capacity(rows.len());
    for row in rows {
        let state: String = row.get("state");
        let state = State::parse(&state).ok_or_else(|| format!("unexpected state {state}"))?;
        out.push((row.get::<i64, _>("id"), state));
    }
    out.sort();
    Ok(out)
}

/// Rows of the `jobs` view: (id, state), sorted.
pub(super) type View = Vec<(i64, State)>;
