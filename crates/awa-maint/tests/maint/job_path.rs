//! The job path end to end against real PostgreSQL: enqueue, claim, run,
//! finish, across the planes.

use awa_core::{ClaimedJob, JobId, JobState, NewJob, Priority, QueueName};
use awa_exec::{ExecPlane, Finish, Frontier, PgExecPlane};
use awa_history::{HistoryPlane, PgHistoryPlane};
use awa_ready::{PgReadyPlane, ReadyPlane};
use sqlx::{Acquire, PgPool};
use std::collections::HashSet;
use std::time::Duration;

use crate::common;
use common::{claim_all, enqueue_jobs as enqueue, schema, setup};

fn queue(name: &str) -> QueueName {
    QueueName::new(name).unwrap()
}

fn job(q: &str) -> NewJob {
    NewJob::new(queue(q), "test", serde_json::json!({"n": 1}))
}

/// Claim repeatedly for a fixed time; for races where the caller does not
/// know which claimer will win.
async fn claim_for(pool: &PgPool, q: &str, period: Duration) -> Vec<ClaimedJob> {
    let plane = PgExecPlane::new(schema());
    let mut frontier = Frontier::default();
    let mut out = Vec::new();
    let until = tokio::time::Instant::now() + period;
    while tokio::time::Instant::now() < until {
        let mut conn = pool.acquire().await.unwrap();
        out.extend(
            plane
                .claim(&mut conn, &queue(q), 10, &mut frontier, None)
                .await
                .unwrap(),
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    out
}

async fn finish(
    pool: &PgPool,
    batch: &[(awa_core::AttemptToken, Finish)],
) -> Vec<awa_exec::Finished> {
    let mut conn = pool.acquire().await.unwrap();
    PgExecPlane::new(schema())
        .finish(&mut conn, batch)
        .await
        .unwrap()
}

async fn state_of(pool: &PgPool, id: JobId) -> JobState {
    let mut conn = pool.acquire().await.unwrap();
    PgHistoryPlane::new(schema())
        .job(&mut conn, id)
        .await
        .unwrap()
        .expect("job exists")
        .state
}

#[tokio::test]
async fn rolled_back_enqueue_is_never_seen_and_committed_one_is_claimed_once() {
    let (_db, pool) = setup().await;
    let mut conn = pool.acquire().await.unwrap();
    let mut tx = conn.begin().await.unwrap();
    PgReadyPlane::new(schema())
        .enqueue(&mut tx, &[job("rb")])
        .await
        .unwrap();
    tx.rollback().await.unwrap();
    drop(conn);
    assert!(claim_all(&pool, "rb", 10, 0).await.is_empty());

    let ids = enqueue(&pool, &[job("rb")]).await;
    let mut claimers = Vec::new();
    for _ in 0..8 {
        let pool = pool.clone();
        claimers.push(tokio::spawn(async move {
            claim_for(&pool, "rb", Duration::from_secs(1)).await
        }));
    }
    let mut claimed = Vec::new();
    for c in claimers {
        claimed.extend(c.await.unwrap());
    }
    assert_eq!(claimed.len(), 1, "exactly one of 8 claimers gets the job");
    assert_eq!(claimed[0].token.job_id, ids[0]);
    assert_eq!(claimed[0].attempt, 1);
    assert_eq!(claimed[0].token.run_lease.0, 1);
}

#[tokio::test]
async fn fifo_within_a_lane_and_priority_order() {
    let (_db, pool) = setup().await;
    let mut jobs = Vec::new();
    for i in 0..30 {
        let mut j = job("order");
        j.priority = Priority::new(1 + (i % 3) as i64).unwrap();
        j.args = serde_json::json!({"i": i});
        jobs.push(j);
    }
    let ids = enqueue(&pool, &jobs).await;
    let claimed = claim_all(&pool, "order", 7, 30).await;
    assert_eq!(claimed.len(), 30);
    // Priority 1 first; within a priority, enqueue order.
    let mut expected: Vec<(i16, JobId)> = jobs
        .iter()
        .zip(&ids)
        .map(|(j, id)| (j.priority.get(), *id))
        .collect();
    expected.sort_by(|a, b| a.0.cmp(&b.0).then(a.1.cmp(&b.1)));
    let got: Vec<(i16, JobId)> = claimed
        .iter()
        .map(|c| (c.priority, c.token.job_id))
        .collect();
    assert_eq!(got, expected);
}

/// The SQL producer (`awa.enqueue`, docs/sql-producer.md) with mixed
/// priorities: 1 runs first, 4 last, enqueue order within a priority.
#[tokio::test]
async fn sql_producer_jobs_run_priority_one_first() {
    let (_db, pool) = setup().await;
    let mixed: [i16; 9] = [4, 2, 1, 4, 2, 1, 4, 2, 1];
    let args: Vec<serde_json::Value> = (0..mixed.len())
        .map(|n| serde_json::json!({ "n": n }))
        .collect();
    let n = mixed.len();
    let ids: Vec<i64> =
        sqlx::query_scalar("SELECT job_id FROM awa.enqueue($1, $2, $3, $4, $5, $6, $7, $8)")
            .bind(vec!["sqlprio"; n])
            .bind(vec!["k"; n])
            .bind(&args)
            .bind(mixed.to_vec())
            .bind(vec![None::<chrono::DateTime<chrono::Utc>>; n])
            .bind(vec![None::<i32>; n])
            .bind(vec![None::<String>; n])
            .bind(vec![None::<serde_json::Value>; n])
            .fetch_all(&pool)
            .await
            .unwrap();
    // One job per claim, as a worker of concurrency 1 asks for them.
    let got: Vec<(i16, i64)> = claim_all(&pool, "sqlprio", 1, n)
        .await
        .iter()
        .map(|c| (c.priority, c.token.job_id.0))
        .collect();
    let mut expected: Vec<(i16, i64)> = mixed.iter().copied().zip(ids).collect();
    expected.sort();
    assert_eq!(got, expected);
}

#[tokio::test]
async fn a_later_producer_does_not_overtake_an_earlier_uncommitted_one() {
    let (_db, pool) = setup().await;
    let plane = PgReadyPlane::new(schema());
    // The lane exists already: creating a lane is the one moment producers
    // of the same lane wait for each other (see ready_append).
    enqueue(&pool, &[job("lane")]).await;
    assert_eq!(claim_all(&pool, "lane", 10, 1).await.len(), 1);
    // Producer A takes its lane position first but commits last.
    let mut a = pool.acquire().await.unwrap();
    let mut tx_a = a.begin().await.unwrap();
    let first = plane.enqueue(&mut tx_a, &[job("lane")]).await.unwrap()[0].job_id;
    let second = enqueue(&pool, &[job("lane")]).await[0];
    // B has committed, but A's earlier position is unresolved: nothing may
    // be handed out ahead of it.
    assert!(claim_all(&pool, "lane", 10, 0).await.is_empty());
    tx_a.commit().await.unwrap();
    drop(a);
    let claimed: Vec<JobId> = claim_all(&pool, "lane", 10, 2)
        .await
        .iter()
        .map(|c| c.token.job_id)
        .collect();
    assert_eq!(claimed, vec![first, second]);
}

/// The same rule through the one-statement fast path and the COPY path, in
/// every pairing: the earlier producer's position is drawn only after its
/// xid and producer lock, so a claim cannot pass it while it is open.
#[tokio::test]
async fn the_fast_and_copy_paths_do_not_overtake_an_earlier_uncommitted_producer() {
    let (_db, pool) = setup().await;
    let plane = PgReadyPlane::new(schema());
    enqueue(&pool, &[job("lane2")]).await;
    assert_eq!(claim_all(&pool, "lane2", 10, 1).await.len(), 1);
    for (a_copy, b_copy) in [(true, false), (false, true), (true, true), (false, false)] {
        let mut a = pool.acquire().await.unwrap();
        let mut tx_a = a.begin().await.unwrap();
        let batch_a = [job("lane2"), job("lane2")];
        let first: Vec<JobId> = if a_copy {
            plane.enqueue_copy(&mut tx_a, &batch_a).await
        } else {
            plane.enqueue(&mut tx_a, &batch_a).await
        }
        .unwrap()
        .iter()
        .map(|e| e.job_id)
        .collect();
        let mut b = pool.acquire().await.unwrap();
        let second = if b_copy {
            plane.enqueue_copy(&mut b, &[job("lane2")]).await
        } else {
            plane.enqueue(&mut b, &[job("lane2")]).await
        }
        .unwrap()[0]
            .job_id;
        drop(b);
        assert!(
            claim_all(&pool, "lane2", 10, 0).await.is_empty(),
            "A copy {a_copy}, B copy {b_copy}: B's committed job passed A's open ones"
        );
        tx_a.commit().await.unwrap();
        drop(a);
        let claimed: Vec<JobId> = claim_all(&pool, "lane2", 10, 3)
            .await
            .iter()
            .map(|c| c.token.job_id)
            .collect();
        assert_eq!(
            claimed,
            vec![first[0], first[1], second],
            "A copy {a_copy}, B copy {b_copy}"
        );
    }
}

#[tokio::test]
async fn an_aborted_producer_does_not_block_the_lane() {
    let (_db, pool) = setup().await;
    let plane = PgReadyPlane::new(schema());
    enqueue(&pool, &[job("gap")]).await;
    assert_eq!(claim_all(&pool, "gap", 10, 1).await.len(), 1);
    let mut a = pool.acquire().await.unwrap();
    let mut tx_a = a.begin().await.unwrap();
    plane.enqueue(&mut tx_a, &[job("gap")]).await.unwrap();
    let later = enqueue(&pool, &[job("gap")]).await[0];
    tx_a.rollback().await.unwrap();
    drop(a);
    let claimed: Vec<JobId> = claim_all(&pool, "gap", 10, 1)
        .await
        .iter()
        .map(|c| c.token.job_id)
        .collect();
    assert_eq!(claimed, vec![later]);
}

#[tokio::test]
async fn a_stale_run_lease_is_rejected_and_changes_nothing() {
    let (_db, pool) = setup().await;
    let id = enqueue(&pool, &[job("stale")]).await[0];
    let c = claim_all(&pool, "stale", 1, 1).await.remove(0);
    let mut stale = c.token;
    stale.run_lease.0 += 1;
    let r = finish(&pool, &[(stale, Finish::Complete)]).await;
    assert!(!r[0].accepted, "a lease that was never issued is rejected");
    assert_eq!(state_of(&pool, id).await, JobState::Running);
    let r = finish(&pool, &[(c.token, Finish::Complete)]).await;
    assert!(r[0].accepted);
    let r = finish(
        &pool,
        &[(
            c.token,
            Finish::Fail {
                error: "late".into(),
            },
        )],
    )
    .await;
    assert!(
        !r[0].accepted,
        "a second finish of the same attempt is rejected"
    );
    assert_eq!(state_of(&pool, id).await, JobState::Completed);
}

#[tokio::test]
async fn retry_backs_off_until_max_attempts_then_fails() {
    let (_db, pool) = setup().await;
    let mut j = job("retry");
    j.max_attempts = Some(2);
    let id = enqueue(&pool, &[j]).await[0];
    let deferred = awa_deferred::PgDeferredPlane::new(schema());
    use awa_deferred::DeferredPlane;

    let c1 = claim_all(&pool, "retry", 1, 1).await.remove(0);
    assert_eq!(c1.attempt, 1);
    let r = finish(
        &pool,
        &[(
            c1.token,
            Finish::Retry {
                delay: None,
                error: "boom".into(),
            },
        )],
    )
    .await;
    assert_eq!(r[0].next_state, Some(JobState::Retryable));
    let mut conn = pool.acquire().await.unwrap();
    let view = PgHistoryPlane::new(schema())
        .job(&mut conn, id)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(view.state, JobState::Retryable);
    let backoff = view.at.time().unwrap() - chrono::Utc::now();
    assert!(
        backoff > chrono::Duration::milliseconds(1000),
        "default backoff waits about 2s, got {backoff}"
    );
    assert_eq!(view.last_error.as_deref(), Some("boom"));
    // Not due yet: promotion moves nothing.
    assert_eq!(deferred.promote_due(&mut conn, 100).await.unwrap(), 0);
    drop(conn);

    // Second attempt (explicit zero delay), then it fails for good.
    let c1b = c1.token;
    let _ = c1b;
    let mut conn = pool.acquire().await.unwrap();
    sqlx::query("UPDATE awa.deferred_jobs SET run_at = now() WHERE job_id = $1")
        .bind(id.0)
        .execute(&mut *conn)
        .await
        .unwrap();
    assert_eq!(deferred.promote_due(&mut conn, 100).await.unwrap(), 1);
    drop(conn);
    let c2 = claim_all(&pool, "retry", 1, 1).await.remove(0);
    assert_eq!(c2.attempt, 2);
    assert_eq!(c2.token.run_lease.0, 2);
    let r = finish(
        &pool,
        &[(
            c2.token,
            Finish::Retry {
                delay: Some(Duration::ZERO),
                error: "again".into(),
            },
        )],
    )
    .await;
    assert_eq!(r[0].next_state, Some(JobState::Failed));
    assert_eq!(state_of(&pool, id).await, JobState::Failed);
}

#[tokio::test]
async fn dlq_opt_in_snooze_and_cancel() {
    let (_db, pool) = setup().await;
    let mut conn = pool.acquire().await.unwrap();
    awa_control::queues::QueueConfig {
        dlq_enabled: Some(true),
        ..Default::default()
    }
    .apply(&mut conn, &queue("dlq"))
    .await
    .unwrap();
    drop(conn);
    let mut j = job("dlq");
    j.max_attempts = Some(1);
    let dead = enqueue(&pool, &[j]).await[0];
    let c = claim_all(&pool, "dlq", 1, 1).await.remove(0);
    let r = finish(
        &pool,
        &[(
            c.token,
            Finish::Fail {
                error: "bad".into(),
            },
        )],
    )
    .await;
    assert_eq!(r[0].next_state, Some(JobState::DeadLettered));
    assert_eq!(state_of(&pool, dead).await, JobState::DeadLettered);
    let dlq = awa_dlq::PgDlqPlane::new(schema());
    use awa_dlq::DlqPlane;
    let mut conn = pool.acquire().await.unwrap();
    assert_eq!(dlq.list(&mut conn, None, 10).await.unwrap().len(), 1);
    let retried = dlq
        .retry(&mut conn, &awa_dlq::Selection::One(dead))
        .await
        .unwrap();
    assert_eq!(retried.retried, vec![dead]);
    assert!(retried.kept.is_empty());
    drop(conn);
    let again = claim_all(&pool, "dlq", 1, 1).await.remove(0);
    assert_eq!(again.token.job_id, dead);
    assert_eq!(again.attempt, 1, "a retried dead letter starts fresh");
    assert_eq!(
        again.token.run_lease.0, 2,
        "its lease keeps counting so old writers stay rejected"
    );

    // Snooze: back to deferred, attempt not counted.
    let id = enqueue(&pool, &[job("snz")]).await[0];
    let c = claim_all(&pool, "snz", 1, 1).await.remove(0);
    let r = finish(
        &pool,
        &[(
            c.token,
            Finish::Snooze {
                delay: Duration::ZERO,
            },
        )],
    )
    .await;
    assert_eq!(r[0].next_state, Some(JobState::Snoozed));
    let mut conn = pool.acquire().await.unwrap();
    use awa_deferred::DeferredPlane;
    awa_deferred::PgDeferredPlane::new(schema())
        .promote_due(&mut conn, 10)
        .await
        .unwrap();
    drop(conn);
    let c = claim_all(&pool, "snz", 1, 1).await.remove(0);
    assert_eq!(c.token.job_id, id);
    assert_eq!(c.attempt, 1, "a snooze does not count the attempt");

    // Cancel: available, scheduled and running jobs.
    let exec = PgExecPlane::new(schema());
    let avail = enqueue(&pool, &[job("cxl")]).await[0];
    let mut later = job("cxl");
    later.run_at = Some(chrono::Utc::now() + chrono::Duration::hours(1));
    let sched = enqueue(&pool, &[later]).await[0];
    let mut conn = pool.acquire().await.unwrap();
    assert_eq!(
        exec.cancel_job(&mut conn, avail).await.unwrap().as_deref(),
        Some("available")
    );
    assert_eq!(
        exec.cancel_job(&mut conn, sched).await.unwrap().as_deref(),
        Some("scheduled")
    );
    assert_eq!(
        exec.cancel_job(&mut conn, avail).await.unwrap(),
        None,
        "already terminal"
    );
    assert_eq!(
        exec.cancel_job(&mut conn, JobId(987654)).await.unwrap(),
        None,
        "unknown"
    );
    drop(conn);
    assert!(
        claim_all(&pool, "cxl", 10, 0).await.is_empty(),
        "a tombstoned job is never claimed"
    );
    assert_eq!(state_of(&pool, avail).await, JobState::Cancelled);
    assert_eq!(state_of(&pool, sched).await, JobState::Cancelled);
    let running = enqueue(&pool, &[job("cxl")]).await[0];
    let c = claim_all(&pool, "cxl", 1, 1).await.remove(0);
    let mut conn = pool.acquire().await.unwrap();
    assert_eq!(
        exec.cancel_job(&mut conn, running)
            .await
            .unwrap()
            .as_deref(),
        Some("running")
    );
    assert!(
        !exec
            .heartbeat(&mut conn, &c.token, &Default::default())
            .await
            .unwrap(),
        "the handler can see it was cancelled"
    );
    drop(conn);
    let r = finish(&pool, &[(c.token, Finish::Complete)]).await;
    assert!(
        !r[0].accepted,
        "the cancelled attempt's completion is rejected"
    );
    assert_eq!(state_of(&pool, running).await, JobState::Cancelled);
}

#[tokio::test]
async fn sixteen_racing_enqueues_of_one_unique_key_make_one_job() {
    let (_db, pool) = setup().await;
    let mut tasks = Vec::new();
    for _ in 0..16 {
        let pool = pool.clone();
        tasks.push(tokio::spawn(async move {
            let mut j = job("uniq");
            j.unique_key = Some("report:42".into());
            let mut conn = pool.acquire().await.unwrap();
            PgReadyPlane::new(schema())
                .enqueue(&mut conn, &[j])
                .await
                .unwrap()[0]
        }));
    }
    let mut results = Vec::new();
    for t in tasks {
        results.push(t.await.unwrap());
    }
    let ids: HashSet<JobId> = results.iter().map(|r| r.job_id).collect();
    assert_eq!(ids.len(), 1, "every enqueue reports the same job");
    assert_eq!(results.iter().filter(|r| r.inserted).count(), 1);
    assert_eq!(claim_all(&pool, "uniq", 100, 1).await.len(), 1);
}

#[tokio::test]
async fn heartbeat_progress_survives_a_retry() {
    let (_db, pool) = setup().await;
    let id = enqueue(&pool, &[job("long")]).await[0];
    let c = claim_all(&pool, "long", 1, 1).await.remove(0);
    let exec = PgExecPlane::new(schema());
    let mut conn = pool.acquire().await.unwrap();
    let progress = awa_exec::Progress {
        percent: Some(40),
        message: Some("halfway-ish".into()),
        checkpoint: Some(serde_json::json!({"cursor": 17})),
    };
    assert!(
        exec.heartbeat(&mut conn, &c.token, &progress)
            .await
            .unwrap()
    );
    let bad = awa_exec::Progress {
        percent: Some(101),
        ..Default::default()
    };
    assert!(exec.heartbeat(&mut conn, &c.token, &bad).await.is_err());
    // A checkpoint jsonb cannot store is refused before SQL, as invalid
    // input (the connection is not left in an error).
    let nul = awa_exec::Progress {
        checkpoint: Some(serde_json::json!({"cursor": "a\u{0}b"})),
        ..Default::default()
    };
    assert!(matches!(
        exec.heartbeat(&mut conn, &c.token, &nul).await,
        Err(awa_exec::ExecError::Invalid(_))
    ));
    drop(conn);
    finish(
        &pool,
        &[(
            c.token,
            Finish::Retry {
                delay: Some(Duration::ZERO),
                error: "x".into(),
            },
        )],
    )
    .await;
    let mut conn = pool.acquire().await.unwrap();
    let checkpoint: serde_json::Value =
        sqlx::query_scalar("SELECT checkpoint FROM awa.attempt_state WHERE job_id = $1")
            .bind(id.0)
            .fetch_one(&mut *conn)
            .await
            .unwrap();
    assert_eq!(checkpoint, serde_json::json!({"cursor": 17}));
    let leases: i64 = sqlx::query_scalar("SELECT count(*) FROM awa.leases")
        .fetch_one(&mut *conn)
        .await
        .unwrap();
    assert_eq!(
        leases, 1,
        "only the job that heartbeated materialized a lease"
    );
}

#[tokio::test]
async fn a_long_unrelated_transaction_does_not_hold_claims_back() {
    let (_db, pool) = setup().await;
    // Lanes exist first (see a_later_producer_does_not_overtake...).
    enqueue(&pool, &[job("busy"), job("other")]).await;
    assert_eq!(claim_all(&pool, "busy", 10, 1).await.len(), 1);
    assert_eq!(claim_all(&pool, "other", 10, 1).await.len(), 1);

    // Two long transactions that hold xids: one wrote elsewhere, one is a
    // producer of another queue.
    let mut writer = pool.acquire().await.unwrap();
    let mut tx_w = writer.begin().await.unwrap();
    sqlx::raw_sql(
        "CREATE TEMP TABLE IF NOT EXISTS scratch (x int); INSERT INTO scratch VALUES (1)",
    )
    .execute(&mut *tx_w)
    .await
    .unwrap();
    let mut other = pool.acquire().await.unwrap();
    let mut tx_o = other.begin().await.unwrap();
    PgReadyPlane::new(schema())
        .enqueue(&mut tx_o, &[job("other")])
        .await
        .unwrap();

    let later = enqueue(&pool, &[job("busy")]).await[0];
    let claimed: Vec<JobId> = claim_all(&pool, "busy", 10, 1)
        .await
        .iter()
        .map(|c| c.token.job_id)
        .collect();
    assert_eq!(
        claimed,
        vec![later],
        "neither long transaction holds queue busy back"
    );
    // The producer of queue other does hold its own queue back.
    let queued_behind = enqueue(&pool, &[job("other")]).await[0];
    assert!(claim_all(&pool, "other", 10, 0).await.is_empty());
    tx_o.commit().await.unwrap();
    tx_w.rollback().await.unwrap();
    drop((writer, other));
    let claimed: Vec<JobId> = claim_all(&pool, "other", 10, 2)
        .await
        .iter()
        .map(|c| c.token.job_id)
        .collect();
    assert_eq!(claimed.len(), 2);
    assert_eq!(
        claimed[1], queued_behind,
        "FIFO kept behind the long producer"
    );
}

#[tokio::test]
async fn priority_aging_lets_old_low_priority_work_overtake_fresh_high_priority_work() {
    let (_db, pool) = setup().await;
    let mut conn = pool.acquire().await.unwrap();
    awa_control::queues::QueueConfig {
        priority_aging: Some(Duration::from_millis(500)),
        ..Default::default()
    }
    .apply(&mut conn, &queue("aging"))
    .await
    .unwrap();
    drop(conn);
    let mut low = job("aging");
    low.priority = Priority::new(4).unwrap();
    let old_low = enqueue(&pool, &[low]).await[0];
    // Three aging steps later the last-priority job counts as priority 1.
    tokio::time::sleep(Duration::from_millis(1600)).await;
    let mut high = job("aging");
    high.priority = Priority::new(2).unwrap();
    let fresh_high = enqueue(&pool, &[high]).await[0];
    let order: Vec<JobId> = claim_all(&pool, "aging", 1, 2)
        .await
        .iter()
        .map(|c| c.token.job_id)
        .collect();
    assert_eq!(order, vec![old_low, fresh_high]);
}

/// Pseudo-random hex, which PostgreSQL cannot compress much.
fn noise(bytes: usize) -> String {
    let mut x: u64 = 0x2545_f491_4f6c_dd1d;
    (0..bytes)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            char::from_digit((x % 16) as u32, 16).unwrap()
        })
        .collect()
}

/// One claim call that returned something (the frontier may need a retry).
async fn claim_batch(
    pool: &PgPool,
    q: &str,
    limit: i32,
    frontier: &mut Frontier,
) -> Vec<ClaimedJob> {
    for _ in 0..500 {
        let mut conn = pool.acquire().await.unwrap();
        let got = PgExecPlane::new(schema())
            .claim(&mut conn, &queue(q), limit, frontier, None)
            .await
            .unwrap();
        if !got.is_empty() {
            return got;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    Vec::new()
}

#[tokio::test]
async fn a_claim_batch_is_bounded_by_bytes_and_takes_at_least_one_job() {
    let (_db, pool) = setup().await;
    let jobs: Vec<NewJob> = (0..12)
        .map(|i| {
            NewJob::new(
                queue("fat"),
                "t",
                serde_json::json!({"i": i, "blob": noise(900_000)}),
            )
        })
        .collect();
    let ids = enqueue(&pool, &jobs).await;
    let mut frontier = Frontier::default();
    // 8 MiB per batch: nine of these 900 kB jobs, not the 100 asked for.
    let first = claim_batch(&pool, "fat", 100, &mut frontier).await;
    let second = claim_batch(&pool, "fat", 100, &mut frontier).await;
    let got: Vec<JobId> = first
        .iter()
        .chain(&second)
        .map(|c| c.token.job_id)
        .collect();
    assert_eq!((first.len(), second.len()), (9, 3));
    assert_eq!(got, ids, "in order, each once");

    // A job larger than the batch bound still goes out, alone.
    let mut conn = pool.acquire().await.unwrap();
    sqlx::query("UPDATE awa.substrate_info SET max_job_bytes = 16777216")
        .execute(&mut *conn)
        .await
        .unwrap();
    drop(conn);
    let huge = NewJob::new(
        queue("fat"),
        "t",
        serde_json::json!({"blob": noise(9_000_000)}),
    );
    let plane = PgReadyPlane::new(schema()).with_max_job_bytes(16 << 20);
    let mut conn = pool.acquire().await.unwrap();
    let two = plane.enqueue(&mut conn, &[huge, job("fat")]).await.unwrap();
    drop(conn);
    let alone = claim_batch(&pool, "fat", 100, &mut frontier).await;
    assert_eq!(alone.len(), 1);
    assert_eq!(alone[0].token.job_id, two[0].job_id);
    let next = claim_batch(&pool, "fat", 100, &mut frontier).await;
    assert_eq!(next.len(), 1);
    assert_eq!(next[0].token.job_id, two[1].job_id);
}

#[tokio::test]
async fn pending_by_state_counts_what_is_due_within_a_horizon() {
    let (_db, pool) = setup().await;
    let q = QueueName::new("horizon").unwrap();
    let mut later = job("horizon");
    let next = chrono::Utc::now() + chrono::Duration::hours(1);
    later.run_at = Some(next);
    enqueue(&pool, &[job("horizon"), later.clone(), later]).await;
    enqueue(&pool, &[job("elsewhere")]).await;
    let by_state = |horizon: Option<Duration>| {
        let (pool, q) = (pool.clone(), q.clone());
        async move {
            let mut conn = pool.acquire().await.unwrap();
            PgHistoryPlane::new(schema())
                .pending_by_state(&mut conn, std::slice::from_ref(&q), horizon)
                .await
                .unwrap()
        }
    };
    let all = by_state(None).await;
    let summary: Vec<(JobState, i64, i64)> = all.iter().map(|s| (s.state, s.jobs, s.due)).collect();
    assert_eq!(
        summary,
        vec![(JobState::Available, 1, 1), (JobState::Scheduled, 2, 2)]
    );
    let scheduled_at = all[1].next_at.clone().expect("a due time").time().unwrap();
    assert!(
        (scheduled_at - next).num_milliseconds().abs() < 1000,
        "{scheduled_at} vs {next}"
    );
    let within = |states: &[awa_history::PendingState]| states.iter().map(|s| s.due).sum::<i64>();
    assert_eq!(within(&by_state(Some(Duration::from_secs(600))).await), 1);
    assert_eq!(
        within(&by_state(Some(Duration::from_secs(2 * 3600))).await),
        3
    );
    assert_eq!(within(&by_state(Some(Duration::ZERO)).await), 1);
}

/// The claim's `waiting` flag covers lanes another transaction holds:
/// what the claim took from the free lanes says nothing about a held one,
/// so the caller must look again, not go idle. Once nothing is held, a
/// claim that takes what is left says the queue is drained.
#[tokio::test]
async fn a_claim_that_skips_a_held_lane_says_to_look_again() {
    let (_db, pool) = setup().await;
    let mut jobs = Vec::new();
    for priority in [1, 2] {
        for _ in 0..2 {
            let mut j = job("held");
            j.priority = Priority::new(priority).unwrap();
            jobs.push(j);
        }
    }
    enqueue(&pool, &jobs).await;
    let mut holder = pool.begin().await.unwrap();
    sqlx::query("SELECT 1 FROM awa.lane_heads WHERE queue = 'held' AND priority = 1 FOR UPDATE")
        .execute(&mut *holder)
        .await
        .unwrap();

    let mut frontier = Frontier::default();
    let got = claim_batch(&pool, "held", 10, &mut frontier).await;
    assert_eq!(got.len(), 2, "the free lane's jobs");
    assert!(got.iter().all(|c| c.priority == 2));
    assert!(frontier.is_waiting(), "a held lane is not a drained one");
    let mut conn = pool.acquire().await.unwrap();
    let again = PgExecPlane::new(schema())
        .claim(&mut conn, &queue("held"), 10, &mut frontier, None)
        .await
        .unwrap();
    assert!(again.is_empty());
    assert!(frontier.is_waiting(), "still held: look again");

    holder.rollback().await.unwrap();
    let rest = claim_batch(&pool, "held", 10, &mut frontier).await;
    assert_eq!(rest.len(), 2, "the held lane's jobs, once released");
    assert!(!frontier.is_waiting(), "nothing held, nothing left");
}

/// A claim that finds every lane held waits briefly for them under a
/// lock_timeout of its own; a caller's transaction keeps its own setting
/// afterwards, and the claim reports waiting, not an error.
#[tokio::test]
async fn a_claim_that_waits_for_held_lanes_leaves_the_callers_lock_timeout() {
    let (_db, pool) = setup().await;
    enqueue(&pool, &[job("all_held")]).await;
    let mut holder = pool.begin().await.unwrap();
    sqlx::query("SELECT 1 FROM awa.lane_heads WHERE queue = 'all_held' FOR UPDATE")
        .execute(&mut *holder)
        .await
        .unwrap();

    let mut caller = pool.begin().await.unwrap();
    sqlx::query("SET LOCAL lock_timeout = '7s'")
        .execute(&mut *caller)
        .await
        .unwrap();
    let mut frontier = Frontier::default();
    let got = PgExecPlane::new(schema())
        .claim(&mut caller, &queue("all_held"), 10, &mut frontier, None)
        .await
        .unwrap();
    assert!(got.is_empty(), "every lane was held");
    assert!(frontier.is_waiting(), "held, not drained");
    let timeout: String = sqlx::query_scalar("SHOW lock_timeout")
        .fetch_one(&mut *caller)
        .await
        .unwrap();
    assert_eq!(timeout, "7s");
    caller.rollback().await.unwrap();
    holder.rollback().await.unwrap();
    assert_eq!(claim_all(&pool, "all_held", 10, 1).await.len(), 1);
}
