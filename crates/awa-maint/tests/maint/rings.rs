//! Ring rotation and reclamation against real PostgreSQL: one test per
//! invariant of the brief's section 4 (the property tests explore the
//! interleavings; these pin each rule down).

use awa_control::rings::{PgRings, PruneOutcome, Ring, RotateOutcome};
use awa_core::{ClaimedJob, NewJob, QueueName, SchemaName};
use awa_exec::{ExecPlane, Finish, PgExecPlane};
use awa_ready::{PgReadyPlane, ReadyPlane};
use sqlx::{Connection, PgConnection, PgPool};
use std::time::Duration;

use crate::common;
use common::{
    ROTATE, claim_all, enqueue_jobs, finish_batch, keep_no_history, make_attempts_stale, schema,
    setup,
};

const LOCK_TIMEOUT: Duration = Duration::from_millis(100);

fn rings() -> PgRings {
    PgRings::new(schema())
}

async fn enqueue(pool: &PgPool, q: &str, n: usize) {
    let jobs: Vec<NewJob> = (0..n)
        .map(|i| {
            NewJob::new(
                QueueName::new(q).unwrap(),
                "t",
                serde_json::json!({ "i": i }),
            )
        })
        .collect();
    enqueue_jobs(pool, &jobs).await;
}

async fn claim(pool: &PgPool, q: &str, n: usize) -> Vec<ClaimedJob> {
    claim_all(pool, q, n as i32, n).await
}

async fn complete(pool: &PgPool, jobs: &[ClaimedJob]) {
    let batch: Vec<_> = jobs.iter().map(|j| (j.token, Finish::Complete)).collect();
    let done = finish_batch(pool, &batch).await;
    assert!(done.iter().all(|f| f.accepted));
}

async fn rotate(pool: &PgPool, ring: Ring) -> RotateOutcome {
    let mut conn = pool.acquire().await.unwrap();
    rings().rotate(&mut conn, ring, "test").await.unwrap()
}

/// One prune step keeping no history: a sealed slot may go at once.
async fn prune(pool: &PgPool, ring: Ring) -> PruneOutcome {
    keep_no_history(pool).await;
    let mut conn = pool.acquire().await.unwrap();
    rings()
        .prune(&mut conn, ring, LOCK_TIMEOUT, ROTATE)
        .await
        .unwrap()
}

/// Prune until it settles (retire, then truncate), returning every outcome.
async fn prune_fully(pool: &PgPool, ring: Ring) -> Vec<PruneOutcome> {
    let mut seen = Vec::new();
    for _ in 0..6 {
        let o = prune(pool, ring).await;
        let stop = !matches!(
            o,
            PruneOutcome::Retired { .. } | PruneOutcome::Pruned { .. }
        );
        seen.push(o);
        if stop {
            break;
        }
    }
    seen
}

async fn count(pool: &PgPool, sql: &'static str) -> i64 {
    sqlx::query_scalar(sql).fetch_one(pool).await.unwrap()
}

async fn completed_total(pool: &PgPool) -> i64 {
    use awa_history::HistoryPlane;
    let mut conn = pool.acquire().await.unwrap();
    let stats = awa_history::PgHistoryPlane::new(schema())
        .queue_stats(&mut conn, None)
        .await
        .unwrap();
    stats.values().filter_map(|s| s.get("completed")).sum()
}

#[tokio::test]
async fn an_idle_ring_does_not_rotate_and_a_busy_one_does() {
    let (_db, pool) = setup().await;
    assert_eq!(rotate(&pool, Ring::Queue).await, RotateOutcome::Idle);
    enqueue(&pool, "r", 3).await;
    assert_eq!(
        rotate(&pool, Ring::Queue).await,
        RotateOutcome::Rotated {
            from: 0,
            to: 1,
            generation: 1
        }
    );
    assert_eq!(
        rotate(&pool, Ring::Queue).await,
        RotateOutcome::Idle,
        "the new slot is empty"
    );
}

#[tokio::test]
async fn no_lost_work_unclaimed_and_running_jobs_survive_their_slot() {
    let (_db, pool) = setup().await;
    enqueue(&pool, "w", 4).await;
    rotate(&pool, Ring::Queue).await;
    // Unclaimed work: moved to the current slot (same lane positions), so
    // the slot is retired and truncated with nothing lost.
    let outcomes = prune_fully(&pool, Ring::Queue).await;
    assert!(
        outcomes.contains(&PruneOutcome::Pruned { slot: 0 }),
        "{outcomes:?}"
    );
    assert_eq!(
        count(
            &pool,
            "SELECT count(*) FROM awa.live_jobs WHERE state = 'available'"
        )
        .await,
        4
    );
    // Claimed but open: their bodies are in slot 1; once it is sealed the
    // attempts are parked out of the ring, still running.
    let jobs = claim(&pool, "w", 4).await;
    assert_eq!(jobs.len(), 4);
    enqueue(&pool, "other", 1).await;
    rotate(&pool, Ring::Queue).await;
    let outcomes = prune_fully(&pool, Ring::Queue).await;
    assert!(
        outcomes.contains(&PruneOutcome::Pruned { slot: 1 }),
        "{outcomes:?}"
    );
    assert_eq!(
        count(
            &pool,
            "SELECT count(*) FROM awa.live_jobs WHERE state = 'running'"
        )
        .await,
        4
    );
    assert_eq!(
        count(&pool, "SELECT count(*) FROM awa.parked_attempts").await,
        4
    );
    complete(&pool, &jobs[..3]).await;
    complete(&pool, &jobs[3..]).await;
    assert_eq!(
        count(&pool, "SELECT count(*) FROM awa.ready_entries_0").await
            + count(&pool, "SELECT count(*) FROM awa.ready_entries_1").await,
        0
    );
    assert_eq!(
        count(
            &pool,
            "SELECT count(*) FROM awa.terminal_jobs WHERE queue = 'w'"
        )
        .await,
        4,
        "terminal facts of parked attempts carry their bodies"
    );
    assert_eq!(
        completed_total(&pool).await,
        4,
        "exact counts outlive the slot"
    );
}

#[tokio::test]
async fn no_lost_attempt_an_open_batch_item_keeps_its_claim_slot() {
    let (_db, pool) = setup().await;
    enqueue(&pool, "c", 2).await;
    let jobs = claim(&pool, "c", 2).await;
    assert_eq!(
        rotate(&pool, Ring::Claim).await,
        RotateOutcome::Rotated {
            from: 0,
            to: 1,
            generation: 1
        }
    );
    complete(&pool, &jobs[..1]).await;
    assert!(matches!(
        prune(&pool, Ring::Claim).await,
        PruneOutcome::LiveRows { slot: 0, .. }
    ));
    // The open attempt can still finish: its batch is there.
    complete(&pool, &jobs[1..]).await;
    let outcomes = prune_fully(&pool, Ring::Claim).await;
    assert!(
        outcomes.contains(&PruneOutcome::Pruned { slot: 0 }),
        "{outcomes:?}"
    );
    // A stale writer of a reclaimed attempt is rejected, not applied.
    let mut conn = pool.acquire().await.unwrap();
    let again = PgExecPlane::new(schema())
        .finish(&mut conn, &[(jobs[0].token, Finish::Complete)])
        .await
        .unwrap();
    assert!(!again[0].accepted);
}

#[tokio::test]
async fn no_wrap_onto_live_data() {
    let db = awa_maint::migrated_test_db().await.unwrap();
    let mut conn = PgConnection::connect(db.url()).await.unwrap();
    let shape = awa_core::SubstrateShape {
        schema: SchemaName::new("small").unwrap(),
        slots: awa_core::SlotCounts::new(4, 4, 4).unwrap(),
    };
    awa_maint::substrate::prepare(&mut conn, &shape, false)
        .await
        .unwrap();
    let small = PgRings::new(shape.schema.clone());
    let producer = PgReadyPlane::new(shape.schema.clone());
    let q = QueueName::new("wrap").unwrap();
    let mut outcomes = Vec::new();
    for _ in 0..5 {
        producer
            .enqueue(
                &mut conn,
                &[NewJob::new(q.clone(), "t", serde_json::json!({}))],
            )
            .await
            .unwrap();
        outcomes.push(small.rotate(&mut conn, Ring::Queue, "test").await.unwrap());
    }
    assert_eq!(
        outcomes[3],
        RotateOutcome::IncomingNotEmpty { slot: 0 },
        "slot 0 still holds a waiting job: {outcomes:?}"
    );
    assert_eq!(outcomes[4], RotateOutcome::IncomingNotEmpty { slot: 0 });
}

#[tokio::test]
async fn racing_rotators_only_one_wins() {
    let (db, pool) = setup().await;
    enqueue(&pool, "race", 1).await;
    let mut a = PgConnection::connect(db.url()).await.unwrap();
    let mut b = PgConnection::connect(db.url()).await.unwrap();
    let r = rings();
    let (ra, rb) = tokio::join!(
        r.rotate(&mut a, Ring::Queue, "a"),
        r.rotate(&mut b, Ring::Queue, "b")
    );
    let outcomes = [ra.unwrap(), rb.unwrap()];
    let won = outcomes
        .iter()
        .filter(|o| matches!(o, RotateOutcome::Rotated { .. }))
        .count();
    assert_eq!(won, 1, "{outcomes:?}");
    assert_eq!(
        count(
            &pool,
            "SELECT count(*) FROM awa.ring_ledger WHERE ring = 'queue'"
        )
        .await,
        2
    );
}

/// Wait until `pid` waits on a heavyweight lock.
async fn until_waiting_on_a_lock(pool: &PgPool, pid: i32) {
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        let waiting: bool = sqlx::query_scalar(
            "SELECT coalesce(bool_or(wait_event_type = 'Lock'), false) \
               FROM pg_stat_activity WHERE pid = $1",
        )
        .bind(pid)
        .fetch_one(pool)
        .await
        .unwrap();
        if waiting {
            return;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "backend {pid} never waited on a lock"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

async fn backend_pid(conn: &mut PgConnection) -> i32 {
    sqlx::query_scalar("SELECT pg_backend_pid()")
        .fetch_one(conn)
        .await
        .unwrap()
}

/// The race behind `racing_rotators_only_one_wins`, made deterministic: the
/// losing rotator's ledger insert checks the chain statement by statement,
/// and the winner commits between its "is this generation taken?" and its
/// "does the current slot hold anything new?". The second question then
/// reads the winner's row and says no. That is a lost race (the primary
/// key's conflict), not a bogus link: the insert must write nothing and
/// raise nothing. The loser is paused inside its check by a queued lock on
/// `substrate_info`, which the check reads between the two questions.
#[tokio::test]
async fn a_rival_committing_during_the_chain_check_is_a_lost_race() {
    let (db, pool) = setup().await;
    enqueue(&pool, "race", 1).await;

    // The winner rotates and holds its transaction open.
    let mut winner = PgConnection::connect(db.url()).await.unwrap();
    sqlx::query("BEGIN").execute(&mut winner).await.unwrap();
    let won = rings()
        .rotate(&mut winner, Ring::Queue, "winner")
        .await
        .unwrap();
    assert!(matches!(won, RotateOutcome::Rotated { .. }), "{won:?}");

    // A lock request queued behind the winner's read of substrate_info.
    let mut gate = PgConnection::connect(db.url()).await.unwrap();
    let gate_pid = backend_pid(&mut gate).await;
    let gate_task = tokio::spawn(async move {
        sqlx::query("BEGIN").execute(&mut gate).await.unwrap();
        sqlx::query("LOCK TABLE awa.substrate_info IN ACCESS EXCLUSIVE MODE")
            .execute(&mut gate)
            .await
            .unwrap();
        sqlx::query("COMMIT").execute(&mut gate).await.unwrap();
    });
    until_waiting_on_a_lock(&pool, gate_pid).await;

    // The loser writes what ring_rotate writes for the same generation; its
    // check passes "not taken yet" and queues behind the gate.
    let mut loser = PgConnection::connect(db.url()).await.unwrap();
    let loser_pid = backend_pid(&mut loser).await;
    let loser_task = tokio::spawn(async move {
        sqlx::query(
            "INSERT INTO awa.ring_ledger (ring, generation, slot, rotated_by) \
             VALUES ('queue', 1, 1, 'loser') ON CONFLICT DO NOTHING",
        )
        .execute(&mut loser)
        .await
        .map(|r| r.rows_affected())
    });
    until_waiting_on_a_lock(&pool, loser_pid).await;

    sqlx::query("COMMIT").execute(&mut winner).await.unwrap();
    gate_task.await.unwrap();
    let inserted = loser_task.await.unwrap();
    assert_eq!(
        inserted.map_err(|e| e.to_string()),
        Ok(0),
        "the loser of a race for a generation writes nothing and raises nothing"
    );
    assert_eq!(
        count(
            &pool,
            "SELECT count(*) FROM awa.ring_ledger WHERE ring = 'queue' AND rotated_by = 'winner'"
        )
        .await,
        1
    );
}

#[tokio::test]
async fn no_in_flight_surprise_a_late_writer_blocks_truncation() {
    let (db, pool) = setup().await;
    // Lanes exist; one job done so the slot has rows but nothing live.
    enqueue(&pool, "late", 1).await;
    let jobs = claim(&pool, "late", 1).await;
    complete(&pool, &jobs).await;
    // A producer picks slot 0 and stays open across the rotation.
    let mut writer = PgConnection::connect(db.url()).await.unwrap();
    let mut tx = writer.begin().await.unwrap();
    PgReadyPlane::new(schema())
        .enqueue(
            &mut tx,
            &[NewJob::new(
                QueueName::new("late").unwrap(),
                "t",
                serde_json::json!({}),
            )],
        )
        .await
        .unwrap();
    assert!(matches!(
        rotate(&pool, Ring::Queue).await,
        RotateOutcome::Rotated { .. }
    ));
    // The uncommitted row is invisible to the proof, so the slot retires,
    // but the truncation cannot take the writer's lock.
    assert_eq!(
        prune(&pool, Ring::Queue).await,
        PruneOutcome::Retired { slot: 0 }
    );
    assert_eq!(
        prune(&pool, Ring::Queue).await,
        PruneOutcome::Busy { slot: 0 }
    );
    tx.commit().await.unwrap();
    drop(writer);
    // Committed now: the re-check after locking finds it and un-retires.
    assert!(matches!(
        prune(&pool, Ring::Queue).await,
        PruneOutcome::LiveRows { slot: 0, .. }
    ));
    assert_eq!(
        claim(&pool, "late", 1).await.len(),
        1,
        "the late job was not lost"
    );
}

#[tokio::test]
async fn snapshot_safety_an_old_snapshot_sees_the_same_history() {
    let (db, pool) = setup().await;
    enqueue(&pool, "snap", 50).await;
    let first = claim(&pool, "snap", 50).await;
    complete(&pool, &first).await;

    let mut reader = PgConnection::connect(db.url()).await.unwrap();
    sqlx::raw_sql("BEGIN ISOLATION LEVEL REPEATABLE READ")
        .execute(&mut reader)
        .await
        .unwrap();
    let before: i64 = sqlx::query_scalar("SELECT count(*) FROM awa.terminal_jobs")
        .fetch_one(&mut reader)
        .await
        .unwrap();
    assert_eq!(before, 50);

    // Heavy churn with fast rotation and pruning of every ring.
    let mut pinned = false;
    for _ in 0..6 {
        rotate(&pool, Ring::Queue).await;
        rotate(&pool, Ring::Claim).await;
        enqueue(&pool, "snap", 50).await;
        let jobs = claim(&pool, "snap", 50).await;
        complete(&pool, &jobs).await;
        for ring in [Ring::Queue, Ring::Claim] {
            for o in prune_fully(&pool, ring).await {
                assert!(
                    !matches!(o, PruneOutcome::Pruned { .. }),
                    "nothing may be truncated under the old snapshot: {o:?}"
                );
                pinned |= matches!(o, PruneOutcome::SnapshotPinned { .. });
            }
        }
    }
    assert!(pinned, "the pinned horizon is reported");
    let after: i64 = sqlx::query_scalar("SELECT count(*) FROM awa.terminal_jobs")
        .fetch_one(&mut reader)
        .await
        .unwrap();
    assert_eq!(after, before, "the old snapshot's view never changes");
    sqlx::raw_sql("COMMIT").execute(&mut reader).await.unwrap();
    drop(reader);

    // Once the snapshot is gone, reclamation catches up.
    let outcomes = prune_fully(&pool, Ring::Queue).await;
    assert!(
        outcomes
            .iter()
            .any(|o| matches!(o, PruneOutcome::Pruned { .. })),
        "{outcomes:?}"
    );
    assert_eq!(
        completed_total(&pool).await,
        350,
        "exact totals survive reclamation"
    );
}

#[tokio::test]
async fn rescue_retries_an_abandoned_attempt_and_rejects_its_writer() {
    let (_db, pool) = setup().await;
    enqueue(&pool, "dead", 1).await;
    let job = claim(&pool, "dead", 1).await.remove(0);
    let plane = PgExecPlane::new(schema());
    let mut conn = pool.acquire().await.unwrap();
    assert_eq!(
        plane
            .rescue_stale(&mut conn, Duration::from_secs(60), 100)
            .await
            .unwrap(),
        0,
        "not stale yet"
    );
    make_attempts_stale(&pool).await;
    assert_eq!(
        plane
            .rescue_stale(&mut conn, awa_core::bounds::RESCUE_AFTER.min, 100)
            .await
            .unwrap(),
        1
    );
    let late = plane
        .finish(&mut conn, &[(job.token, Finish::Complete)])
        .await
        .unwrap();
    assert!(
        !late[0].accepted,
        "the abandoned attempt's late completion is rejected"
    );
    let state: String = sqlx::query_scalar("SELECT state FROM awa.jobs WHERE id = $1")
        .bind(job.token.job_id.0)
        .fetch_one(&mut *conn)
        .await
        .unwrap();
    assert_eq!(state, "retryable");
}
