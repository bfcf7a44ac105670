//! Stragglers and retention (issue 8, items 3, 4 and 12): a job nobody
//! claims, a job that runs for ever and a racing pruner must not stop ring
//! reclamation; terminal history is kept for its retention, not less.

use awa_control::rings::{PgRings, PruneOutcome, Ring, RotateOutcome};
use awa_core::{ClaimedJob, JobId, NewJob, QueueName};
use awa_exec::{ExecPlane, Finish, PgExecPlane, Progress};
use awa_history::{HistoryPlane, PgHistoryPlane};
use sqlx::{Connection, PgPool};
use std::time::Duration;

use crate::common;
use common::{
    ROTATE, TERMINAL_FACTS, claim_all, enqueue_jobs, finish_batch, keep_no_history,
    make_attempts_stale, schema, setup,
};

const LOCK_TIMEOUT: Duration = Duration::from_millis(100);

fn rings() -> PgRings {
    PgRings::new(schema())
}

async fn enqueue(pool: &PgPool, q: &str, n: usize) -> Vec<JobId> {
    let jobs: Vec<NewJob> = (0..n)
        .map(|i| {
            NewJob::new(
                QueueName::new(q).unwrap(),
                "t",
                serde_json::json!({ "q": q, "i": i }),
            )
        })
        .collect();
    enqueue_jobs(pool, &jobs).await
}

async fn finish(pool: &PgPool, jobs: &[ClaimedJob], how: Finish) -> Vec<bool> {
    let batch: Vec<_> = jobs.iter().map(|j| (j.token, how.clone())).collect();
    finish_batch(pool, &batch)
        .await
        .into_iter()
        .map(|f| f.accepted)
        .collect()
}

async fn rotate_queue(pool: &PgPool) -> RotateOutcome {
    let mut conn = pool.acquire().await.unwrap();
    rings()
        .rotate(&mut conn, Ring::Queue, "test")
        .await
        .unwrap()
}

async fn prune(pool: &PgPool, ring: Ring, rotate_interval: Duration) -> PruneOutcome {
    let mut conn = pool.acquire().await.unwrap();
    rings()
        .prune(&mut conn, ring, LOCK_TIMEOUT, rotate_interval)
        .await
        .unwrap()
}

/// One maintenance pass with history retention 0: rotate every ring, then
/// prune each until it settles. Returns every prune outcome.
async fn maintain(pool: &PgPool) -> Vec<PruneOutcome> {
    keep_no_history(pool).await;
    let mut seen = Vec::new();
    for ring in Ring::ALL {
        let mut conn = pool.acquire().await.unwrap();
        rings().rotate(&mut conn, ring, "test").await.unwrap();
        for _ in 0..8 {
            let o = prune(pool, ring, ROTATE).await;
            let more = matches!(
                o,
                PruneOutcome::Retired { .. } | PruneOutcome::Pruned { .. }
            );
            seen.push(o);
            if !more {
                break;
            }
        }
    }
    seen
}

/// Traffic on another queue: `n` jobs enqueued, claimed and completed.
async fn busy_round(pool: &PgPool, n: usize) {
    enqueue(pool, "busy", n).await;
    let jobs = claim_all(pool, "busy", n as i32, n).await;
    assert_eq!(jobs.len(), n);
    assert!(
        finish(pool, &jobs, Finish::Complete)
            .await
            .iter()
            .all(|a| *a)
    );
}

async fn count(pool: &PgPool, sql: &str) -> i64 {
    // Test-only text: fixed table names, ids formatted by us.
    sqlx::query_scalar(sqlx::AssertSqlSafe(sql.to_owned()))
        .fetch_one(pool)
        .await
        .unwrap()
}

async fn state_of(pool: &PgPool, id: JobId) -> Option<String> {
    sqlx::query_scalar("SELECT state FROM awa.jobs WHERE id = $1 ORDER BY run_lease DESC LIMIT 1")
        .bind(id.0)
        .fetch_optional(pool)
        .await
        .unwrap()
}

async fn set_paused(pool: &PgPool, q: &QueueName, paused: bool) {
    use awa_control::{ControlPlane, PgControlPlane, queues::QueueConfig};
    let mut conn = pool.acquire().await.unwrap();
    let config = QueueConfig {
        paused: Some(paused),
        ..QueueConfig::default()
    };
    PgControlPlane
        .configure_queue(&mut conn, q, &config)
        .await
        .unwrap();
}

async fn retention(
    conn: &mut sqlx::PgConnection,
    d: Option<Duration>,
) -> Result<awa_control::substrate::AppliedSettings, awa_control::ControlError> {
    awa_control::substrate::SubstrateSettings {
        history_retention: Some(d),
        ..Default::default()
    }
    .apply(conn, &schema())
    .await
}

/// 16 queue slots of 20 jobs: what the ring may hold with nothing pinned.
const BOUND: i64 = 16 * 20 + 4;

#[tokio::test]
async fn one_unclaimed_job_on_an_unserved_queue_does_not_stop_reclamation() {
    let (_db, pool) = setup().await;
    let orphan = enqueue(&pool, "nobody", 1).await[0];
    let mut outcomes = Vec::new();
    for _ in 0..40 {
        busy_round(&pool, 20).await;
        outcomes.extend(maintain(&pool).await);
    }
    // Before the fix prune stopped at "job 1 is still waiting to be claimed"
    // and every row of all 40 rounds stayed.
    let ready = count(&pool, "SELECT count(*) FROM awa.ready_entries").await;
    let done = count(&pool, &format!("SELECT count(*) FROM {TERMINAL_FACTS}")).await;
    assert!(
        ready <= BOUND,
        "ready rows {ready} > {BOUND}; outcomes {outcomes:?}"
    );
    assert!(done <= BOUND, "terminal rows {done} > {BOUND}");
    assert!(
        outcomes
            .iter()
            .any(|o| matches!(o, PruneOutcome::Pruned { .. }))
    );
    // The straggler was carried along, still waiting, exactly once.
    assert_eq!(state_of(&pool, orphan).await.as_deref(), Some("available"));
    assert_eq!(
        count(
            &pool,
            "SELECT count(*) FROM awa.live_jobs WHERE queue = 'nobody'"
        )
        .await,
        1
    );
    // And it can still be claimed and finished, once.
    let got = claim_all(&pool, "nobody", 10, 1).await;
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].token.job_id, orphan);
    assert_eq!(got[0].args, serde_json::json!({ "q": "nobody", "i": 0 }));
    assert_eq!(finish(&pool, &got, Finish::Complete).await, vec![true]);
    assert_eq!(state_of(&pool, orphan).await.as_deref(), Some("completed"));
}

#[tokio::test]
async fn a_paused_queue_keeps_its_backlog_in_order_while_the_ring_turns() {
    let (_db, pool) = setup().await;
    let q = QueueName::new("held").unwrap();
    set_paused(&pool, &q, true).await;
    let first = enqueue(&pool, "held", 3).await;
    for _ in 0..20 {
        busy_round(&pool, 20).await;
        maintain(&pool).await;
    }
    let later = enqueue(&pool, "held", 2).await;
    // Relocated jobs keep their lane positions: one live copy each.
    let waiting = count(
        &pool,
        "SELECT count(*) FROM awa.live_jobs WHERE queue = 'held' AND state = 'available'",
    )
    .await;
    assert_eq!(waiting, 5);
    let ready = count(&pool, "SELECT count(*) FROM awa.ready_entries").await;
    assert!(ready <= BOUND, "ready rows {ready}");
    set_paused(&pool, &q, false).await;
    let got = claim_all(&pool, "held", 10, 5).await;
    let order: Vec<JobId> = got.iter().map(|j| j.token.job_id).collect();
    let want: Vec<JobId> = first.iter().chain(&later).copied().collect();
    assert_eq!(order, want, "FIFO across relocation");
}

#[tokio::test]
async fn cancelling_a_relocated_job_cancels_its_live_copy() {
    let (_db, pool) = setup().await;
    let id = enqueue(&pool, "nobody", 1).await[0];
    for _ in 0..18 {
        busy_round(&pool, 2).await;
        maintain(&pool).await;
    }
    let slot = count(
        &pool,
        &format!(
            "SELECT e.slot::bigint FROM awa.ready_entries e WHERE e.job_id = {} \
              AND NOT EXISTS (SELECT 1 FROM awa.ready_tombstones t \
                               WHERE t.slot = e.slot AND t.job_id = e.job_id AND t.lane_seq = e.lane_seq)",
            id.0
        ),
    )
    .await;
    assert_ne!(slot, 0, "the job was relocated out of slot 0");
    let mut conn = pool.acquire().await.unwrap();
    let was = PgExecPlane::new(schema())
        .cancel_job(&mut conn, id)
        .await
        .unwrap();
    assert_eq!(was.as_deref(), Some("available"));
    assert_eq!(state_of(&pool, id).await.as_deref(), Some("cancelled"));
    assert!(claim_all(&pool, "nobody", 10, 0).await.is_empty());
}

#[tokio::test]
async fn a_job_that_outlives_the_rings_is_parked_and_still_finishes_once() {
    let (_db, pool) = setup().await;
    let id = enqueue(&pool, "long", 1).await[0];
    let job = claim_all(&pool, "long", 1, 1).await.remove(0);
    let exec = PgExecPlane::new(schema());
    let mut conn = pool.acquire().await.unwrap();
    assert!(
        exec.heartbeat(&mut conn, &job.token, &Progress::default())
            .await
            .unwrap()
    );
    drop(conn);
    let mut outcomes = Vec::new();
    for _ in 0..40 {
        busy_round(&pool, 20).await;
        outcomes.extend(maintain(&pool).await);
        let mut conn = pool.acquire().await.unwrap();
        let progress = Progress {
            percent: Some(50),
            ..Progress::default()
        };
        assert!(
            exec.heartbeat(&mut conn, &job.token, &progress)
                .await
                .unwrap(),
            "a parked attempt keeps heartbeating"
        );
    }
    assert_eq!(
        count(&pool, "SELECT count(*) FROM awa.parked_attempts").await,
        1,
        "outcomes {outcomes:?}"
    );
    for (table, bound) in [
        ("ready_entries", BOUND),
        ("claim_batches", 8 * 20 + 4),
        ("leases", 2),
    ] {
        let n = count(&pool, &format!("SELECT count(*) FROM awa.{table}")).await;
        assert!(n <= bound, "{table}: {n} rows > {bound}");
    }
    assert_eq!(state_of(&pool, id).await.as_deref(), Some("running"));
    // The worker's original token still finishes it, once, with its body.
    assert_eq!(
        finish(&pool, std::slice::from_ref(&job), Finish::Complete).await,
        vec![true]
    );
    assert_eq!(
        finish(&pool, std::slice::from_ref(&job), Finish::Complete).await,
        vec![false]
    );
    let args: serde_json::Value =
        sqlx::query_scalar("SELECT args FROM awa.terminal_jobs WHERE id = $1")
            .bind(id.0)
            .fetch_one(&pool)
            .await
            .unwrap();
    assert_eq!(args, serde_json::json!({ "q": "long", "i": 0 }));
    assert_eq!(
        count(&pool, "SELECT count(*) FROM awa.parked_attempts").await,
        0
    );
    let mut conn = pool.acquire().await.unwrap();
    assert!(
        !exec
            .heartbeat(&mut conn, &job.token, &Progress::default())
            .await
            .unwrap()
    );
}

#[tokio::test]
async fn a_parked_attempt_that_stops_heartbeating_is_rescued_and_its_writer_rejected() {
    let (_db, pool) = setup().await;
    let id = enqueue(&pool, "long", 1).await[0];
    let job = claim_all(&pool, "long", 1, 1).await.remove(0);
    for _ in 0..12 {
        busy_round(&pool, 2).await;
        maintain(&pool).await;
    }
    assert_eq!(
        count(&pool, "SELECT count(*) FROM awa.parked_attempts").await,
        1
    );
    let exec = PgExecPlane::new(schema());
    let mut conn = pool.acquire().await.unwrap();
    make_attempts_stale(&pool).await;
    assert_eq!(
        exec.rescue_stale(&mut conn, awa_core::bounds::RESCUE_AFTER.min, 100)
            .await
            .unwrap(),
        1
    );
    assert_eq!(state_of(&pool, id).await.as_deref(), Some("retryable"));
    assert!(
        !exec
            .heartbeat(&mut conn, &job.token, &Progress::default())
            .await
            .unwrap()
    );
    drop(conn);
    assert_eq!(finish(&pool, &[job], Finish::Complete).await, vec![false]);
    assert_eq!(
        count(&pool, "SELECT count(*) FROM awa.parked_attempts").await,
        0
    );
}

#[tokio::test]
async fn cancelling_a_parked_attempt_finishes_it_as_cancelled() {
    let (_db, pool) = setup().await;
    let id = enqueue(&pool, "long", 1).await[0];
    let job = claim_all(&pool, "long", 1, 1).await.remove(0);
    for _ in 0..12 {
        busy_round(&pool, 2).await;
        maintain(&pool).await;
    }
    let exec = PgExecPlane::new(schema());
    let mut conn = pool.acquire().await.unwrap();
    assert_eq!(
        exec.cancel_job(&mut conn, id).await.unwrap().as_deref(),
        Some("running")
    );
    assert!(
        !exec
            .heartbeat(&mut conn, &job.token, &Progress::default())
            .await
            .unwrap()
    );
    drop(conn);
    assert_eq!(state_of(&pool, id).await.as_deref(), Some("cancelled"));
    assert_eq!(finish(&pool, &[job], Finish::Complete).await, vec![false]);
}

#[tokio::test]
async fn terminal_history_is_kept_for_its_retention() {
    let (_db, pool) = setup().await;
    let ids = enqueue(&pool, "h", 5).await;
    let jobs = claim_all(&pool, "h", 5, 5).await;
    finish(&pool, &jobs, Finish::Complete).await;
    // Seal the slot; move the ring a few times.
    for _ in 0..3 {
        busy_round(&pool, 1).await;
        assert!(matches!(
            rotate_queue(&pool).await,
            RotateOutcome::Rotated { .. }
        ));
    }
    // Automatic retention: (16 - 2) x 30 s. The sealed slot is far younger.
    let o = prune(&pool, Ring::Queue, Duration::from_secs(30)).await;
    assert!(matches!(o, PruneOutcome::Retained { slot: 0, .. }), "{o:?}");
    // An explicit retention wins over the automatic one.
    let mut conn = pool.acquire().await.unwrap();
    retention(&mut conn, Some(Duration::from_secs(3600)))
        .await
        .unwrap();
    let o = prune(&pool, Ring::Queue, ROTATE).await;
    assert!(matches!(o, PruneOutcome::Retained { slot: 0, .. }), "{o:?}");
    let kept = count(
        &pool,
        "SELECT count(*) FROM awa.terminal_jobs WHERE queue = 'h'",
    )
    .await;
    assert_eq!(kept, 5, "history within its retention stays readable");
    let history = PgHistoryPlane::new(schema());
    assert_eq!(history.horizon(&mut conn).await.unwrap(), None);

    // Retention 0: the slot goes, and the horizon says so.
    retention(&mut conn, Some(Duration::ZERO)).await.unwrap();
    let o = prune(&pool, Ring::Queue, ROTATE).await;
    assert!(matches!(o, PruneOutcome::Retired { slot: 0 }), "{o:?}");
    assert!(history.job(&mut conn, ids[0]).await.unwrap().is_none());
    let horizon = history.horizon(&mut conn).await.unwrap().expect("pruned");
    assert!(horizon.pruned_through >= ids[4]);
    assert!(
        retention(&mut conn, Some(Duration::from_secs(3651 * 86_400)))
            .await
            .is_err()
    );
}

#[tokio::test]
async fn two_pruners_racing_for_one_slot_is_an_outcome_not_an_error() {
    let (db, pool) = setup().await;
    keep_no_history(&pool).await;
    enqueue(&pool, "r", 1).await;
    let jobs = claim_all(&pool, "r", 1, 1).await;
    finish(&pool, &jobs, Finish::Complete).await;
    let mut conn = pool.acquire().await.unwrap();
    rings()
        .rotate(&mut conn, Ring::Queue, "test")
        .await
        .unwrap();
    drop(conn);

    // Phase 1: A retires in an open transaction; B races it.
    let mut a = sqlx::PgConnection::connect(db.url()).await.unwrap();
    let mut tx = a.begin().await.unwrap();
    let first = rings()
        .prune(&mut tx, Ring::Queue, LOCK_TIMEOUT, ROTATE)
        .await
        .unwrap();
    assert_eq!(first, PruneOutcome::Retired { slot: 0 });
    let racer = {
        let pool = pool.clone();
        tokio::spawn(async move { prune(&pool, Ring::Queue, ROTATE).await })
    };
    tokio::time::sleep(Duration::from_millis(300)).await;
    tx.commit().await.unwrap();
    let second = racer.await.unwrap();
    assert_eq!(
        second,
        PruneOutcome::LostRace { slot: 0 },
        "was a duplicate key error"
    );

    // Phase 2: A truncates in an open transaction; B waits for the lock,
    // then must find the slot no longer retired rather than truncate again.
    let mut tx = a.begin().await.unwrap();
    let first = rings()
        .prune(&mut tx, Ring::Queue, LOCK_TIMEOUT, ROTATE)
        .await
        .unwrap();
    assert_eq!(first, PruneOutcome::Pruned { slot: 0 });
    let racer = {
        let pool = pool.clone();
        tokio::spawn(async move {
            let mut conn = pool.acquire().await.unwrap();
            rings()
                .prune(&mut conn, Ring::Queue, Duration::from_secs(10), ROTATE)
                .await
                .unwrap()
        })
    };
    tokio::time::sleep(Duration::from_millis(300)).await;
    tx.commit().await.unwrap();
    let second = racer.await.unwrap();
    assert!(
        matches!(
            second,
            PruneOutcome::LostRace { .. } | PruneOutcome::NothingToPrune
        ),
        "{second:?}"
    );
}

/// The truncation's proof that no snapshot predates the retirement marker
/// reads pg_stat_activity, which PostgreSQL reads once per transaction and
/// keeps. A pruner whose transaction read it before the marker committed
/// (the seal does, first thing; so may a caller) must read it again: a
/// snapshot taken in between, older than the marker, is not in the kept
/// copy, and truncating under it makes rows vanish from it.
#[tokio::test]
async fn regression_a_truncation_reads_running_snapshots_after_the_marker_it_relies_on() {
    let (db, pool) = setup().await;
    keep_no_history(&pool).await;
    enqueue(&pool, "r", 1).await;
    let jobs = claim_all(&pool, "r", 1, 1).await;
    finish(&pool, &jobs, Finish::Complete).await;
    assert!(matches!(
        rotate_queue(&pool).await,
        RotateOutcome::Rotated { .. }
    ));

    // The pruner's transaction reads the running snapshots first.
    let mut c = sqlx::PgConnection::connect(db.url()).await.unwrap();
    let mut tx = c.begin().await.unwrap();
    let _: i64 = sqlx::query_scalar("SELECT count(*) FROM pg_stat_activity")
        .fetch_one(&mut *tx)
        .await
        .unwrap();
    // Then a reader takes a snapshot, and another pruner retires the slot.
    let mut reader = pool.begin().await.unwrap();
    sqlx::query("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
        .execute(&mut *reader)
        .await
        .unwrap();
    let seen: i64 = sqlx::query_scalar("SELECT count(*) FROM awa.terminal_jobs WHERE queue = 'r'")
        .fetch_one(&mut *reader)
        .await
        .unwrap();
    assert_eq!(seen, 1);
    assert_eq!(
        prune(&pool, Ring::Queue, ROTATE).await,
        PruneOutcome::Retired { slot: 0 }
    );
    let outcome = rings()
        .prune(&mut tx, Ring::Queue, LOCK_TIMEOUT, ROTATE)
        .await
        .unwrap();
    tx.rollback().await.unwrap();
    assert!(
        matches!(outcome, PruneOutcome::SnapshotPinned { slot: 0, .. }),
        "truncated under a snapshot older than the retirement marker: {outcome:?}"
    );
    reader.commit().await.unwrap();
}

/// `n` jobs of queue `q` that fail for good on their one attempt.
async fn fail_jobs(pool: &PgPool, q: &str, n: usize) -> Vec<JobId> {
    let jobs: Vec<NewJob> = (0..n)
        .map(|i| {
            let mut job = NewJob::new(
                QueueName::new(q).unwrap(),
                "t",
                serde_json::json!({ "q": q, "i": i }),
            );
            job.max_attempts = Some(1);
            job
        })
        .collect();
    let ids = enqueue_jobs(pool, &jobs).await;
    let got = claim_all(pool, q, n as i32, n).await;
    assert_eq!(got.len(), n);
    let error = Finish::Fail {
        error: "the upstream said no".into(),
    };
    assert!(finish(pool, &got, error).await.iter().all(|a| *a));
    ids
}

/// Issue 22: a failure stays readable for the failure retention while the
/// ring keeps turning under load (completed history is reclaimed within
/// rounds here: history retention 0), then goes; kept failures never hold
/// one older than the retention after a pass, and the rings stay bounded.
/// The retention is set once the queue ring has come round with the
/// failure kept (so the test does not depend on how fast this machine
/// turns it): a few seconds past the failure's age.
#[tokio::test]
async fn a_failure_stays_readable_for_its_retention_while_the_ring_turns() {
    let (_db, pool) = setup().await;
    let history = PgHistoryPlane::new(schema());
    let generation = || async {
        count(
            &pool,
            "SELECT max(generation) FROM awa.ring_ledger WHERE ring = 'queue'",
        )
        .await
    };
    let watched = fail_jobs(&pool, "bad", 1).await[0];
    let failed_at = {
        let mut conn = pool.acquire().await.unwrap();
        history
            .job(&mut conn, watched)
            .await
            .unwrap()
            .unwrap()
            .at
            .time()
            .unwrap()
    };
    let start = generation().await;
    let mut retention: Option<chrono::Duration> = None;
    let mut gone = false;
    let mut failures = 1;
    for round in 0..1000 {
        busy_round(&pool, 20).await;
        failures += fail_jobs(&pool, "bad", 2).await.len();
        maintain(&pool).await;
        // The leader's failure_retention pass. It deletes what expired by
        // its own start; a failure that expires after that is the next
        // pass's, so "outlived its retention" is judged at that instant
        // (judged at a later now(), a failure expiring in between counted).
        let mut conn = pool.acquire().await.unwrap();
        let pass_at: chrono::DateTime<chrono::Utc> = sqlx::query_scalar("SELECT now()")
            .fetch_one(&mut *conn)
            .await
            .unwrap();
        while history.prune_failures(&mut conn, 5000).await.unwrap() == 5000 {}

        // Bounded: the rings hold what they hold with nothing pinned, and
        // no kept failure is older than the retention.
        let ready = count(&pool, "SELECT count(*) FROM awa.ready_entries").await;
        let ring_facts = count(
            &pool,
            "SELECT (SELECT count(*) FROM awa.done_entries) + (SELECT count(*) FROM awa.done_batches)",
        )
        .await;
        assert!(
            ready <= BOUND && ring_facts <= BOUND,
            "round {round}: {ready} ready, {ring_facts} done rows"
        );
        let expired: i64 = sqlx::query_scalar(
            "SELECT count(*) FROM awa.failure_entries f, awa.substrate_info i
              WHERE f.finalized_at < $1 - i.failure_retention",
        )
        .bind(pass_at)
        .fetch_one(&pool)
        .await
        .unwrap();
        assert_eq!(
            expired, 0,
            "round {round}: a failure outlived its retention"
        );
        let kept = count(&pool, "SELECT count(*) FROM awa.failure_entries").await;
        assert!(kept as usize <= failures);

        // The watched failure, judged on the database's clock.
        let now: chrono::DateTime<chrono::Utc> = sqlx::query_scalar("SELECT now()")
            .fetch_one(&mut *conn)
            .await
            .unwrap();
        let within = retention.is_none_or(|r| now < failed_at + r);
        let job = history.job(&mut conn, watched).await.unwrap();
        if within {
            let job = job.expect("a failure within its retention is readable");
            assert_eq!(job.state.as_str(), "failed");
            let attempts = job.attempts.unwrap();
            assert_eq!(attempts.len(), 1);
            assert_eq!(attempts[0].error.as_deref(), Some("the upstream said no"));
        } else if job.is_none() {
            gone = true;
            break;
        }
        // Every slot of the queue ring has been reused since it failed:
        // now give failures a short retention, a few seconds past its age.
        if retention.is_none() && generation().await - start > 16 {
            let short = (now - failed_at).to_std().unwrap() + Duration::from_secs(3);
            let applied = awa_control::substrate::SubstrateSettings {
                failure_retention: Some(short),
                ..Default::default()
            }
            .apply(&mut conn, &schema())
            .await
            .unwrap();
            assert!(applied.failure_retention_secs < 600.0);
            retention = Some(chrono::Duration::from_std(short).unwrap());
        }
        drop(conn);
    }
    assert!(
        retention.is_some(),
        "the queue ring came round while the failure was kept"
    );
    assert!(gone, "the failure went once its retention had passed");
    // Its count outlives it.
    let mut conn = pool.acquire().await.unwrap();
    let stats = history
        .queue_stats(&mut conn, Some(&QueueName::new("bad").unwrap()))
        .await
        .unwrap();
    assert_eq!(stats["bad"]["failed"], failures as i64);
}

/// One claim of the execution plane, with a settled frontier (nothing else
/// runs in these tests): what a worker's claim of `limit` gets.
async fn claim_once(pool: &PgPool, q: &str, limit: i32) -> Vec<ClaimedJob> {
    let mut conn = pool.acquire().await.unwrap();
    PgExecPlane::new(schema())
        .claim(
            &mut conn,
            &QueueName::new(q).unwrap(),
            limit,
            &mut awa_exec::Frontier::default(),
            None,
        )
        .await
        .unwrap()
}

/// A worker takes a claim of fewer jobs than it asked for to mean the
/// queue is drained, and waits for a notification or its poll interval.
/// Relocation leaves a tombstoned copy of each job it moves until the old
/// slot is reclaimed, and a job moved again meanwhile leaves another: those
/// copies must not use up the claim's limit, or a backlog drains a few jobs
/// per poll (a hundred thousand jobs under 200 ms rotation ran at 250 a
/// second, four copies per job at the head).
#[tokio::test]
async fn tombstoned_copies_of_relocated_jobs_do_not_shorten_a_claim() {
    let (_db, pool) = setup().await;
    let ids = enqueue(&pool, "held", 20).await;
    // Rotate, then move every job out of the slot it is in, three times:
    // each job has three tombstoned copies and one live one.
    for _ in 0..3 {
        let from = count(
            &pool,
            "SELECT DISTINCT e.slot::bigint FROM awa.ready_entries e \
              WHERE e.queue = 'held' AND NOT EXISTS (SELECT 1 FROM awa.ready_tombstones t \
                     WHERE t.slot = e.slot AND t.job_id = e.job_id AND t.lane_seq = e.lane_seq)",
        )
        .await;
        // A slot holding only relocated copies is not worth sealing: give
        // the ring something new to rotate for.
        enqueue(&pool, "other", 1).await;
        assert!(matches!(
            rotate_queue(&pool).await,
            RotateOutcome::Rotated { .. }
        ));
        let moved = count(
            &pool,
            &format!("SELECT awa.ready_relocate({from}, 1000)::bigint"),
        )
        .await;
        assert!(moved >= 20, "moved {moved}");
    }
    let copies = count(
        &pool,
        "SELECT count(*) FROM awa.ready_entries e JOIN awa.ready_tombstones t \
           ON t.slot = e.slot AND t.job_id = e.job_id AND t.lane_seq = e.lane_seq \
         WHERE e.queue = 'held'",
    )
    .await;
    assert_eq!(copies, 60, "three tombstoned copies per job");
    let got = claim_once(&pool, "held", 20).await;
    let order: Vec<JobId> = got.iter().map(|j| j.token.job_id).collect();
    assert_eq!(order, ids, "one claim of 20 takes all 20, in order");
}

/// The same for cancelled jobs: a claim of 10 behind 30 cancelled jobs
/// takes the 10 after them, and a lane whose only entries past its head
/// are cancelled has its head moved past them (else every claim would
/// find "work" there and read it again).
#[tokio::test]
async fn cancelled_jobs_at_the_head_do_not_shorten_a_claim() {
    let (_db, pool) = setup().await;
    let ids = enqueue(&pool, "c", 40).await;
    let plane = PgExecPlane::new(schema());
    let mut conn = pool.acquire().await.unwrap();
    for id in &ids[..30] {
        assert_eq!(
            plane.cancel_job(&mut conn, *id).await.unwrap().as_deref(),
            Some("available")
        );
    }
    drop(conn);
    let got = claim_once(&pool, "c", 10).await;
    let order: Vec<JobId> = got.iter().map(|j| j.token.job_id).collect();
    assert_eq!(order, ids[30..], "the ten live jobs, in one claim");

    let more = enqueue(&pool, "c", 5).await;
    let mut conn = pool.acquire().await.unwrap();
    for id in &more {
        plane.cancel_job(&mut conn, *id).await.unwrap();
    }
    drop(conn);
    assert!(claim_once(&pool, "c", 10).await.is_empty());
    let behind = count(
        &pool,
        "SELECT count(*) FROM awa.ready_entries e JOIN awa.lane_heads h \
           ON h.queue = e.queue AND h.priority = e.priority AND h.shard = e.shard \
         WHERE e.queue = 'c' AND e.lane_seq > h.head_seq",
    )
    .await;
    assert_eq!(behind, 0, "the head passed the cancelled tail");
}
