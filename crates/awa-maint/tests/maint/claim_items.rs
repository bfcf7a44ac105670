//! Every row a claim returns names its own item of the claim batch it
//! wrote, in every shape a claim takes: the hot path (one lane in the
//! newest two slots, one statement that reads the lane and writes the
//! batch without sorting what is already in lane order) and the general
//! path (several lanes, or a lane spread over older slots), with
//! tombstoned entries skipped, the 8 MiB byte bound cutting a claim, and a
//! lane spanning a rotation. The batch row is read back and held to each
//! row (job, lease, attempt, body slot and lane position at its item), the
//! items are 1..n in the order rows come back, each lane is taken in lane
//! order, and every attempt then completes through the guarded finish.

use crate::common::{
    claim_all, claim_some, enqueue_jobs, enqueue_sql, finish_batch, rotate_and_seal, setup,
};
use awa_core::{ClaimedJob, NewJob, QueueName};
use awa_exec::{ExecPlane, Finish, PgExecPlane};
use sqlx::PgPool;

type BatchRow = (Vec<i64>, Vec<i64>, Vec<i32>, Vec<i32>, Vec<i64>, Vec<i16>);

/// Hold one claim call's rows to the batch row it wrote.
async fn check_call(pool: &PgPool, what: &str, rows: &[ClaimedJob]) {
    assert!(!rows.is_empty(), "{what}: nothing claimed");
    let t0 = &rows[0].token;
    for (i, r) in rows.iter().enumerate() {
        assert_eq!(
            (r.token.claim_slot, r.token.batch_id),
            (t0.claim_slot, t0.batch_id),
            "{what}: one call, one batch"
        );
        assert_eq!(
            r.token.item,
            i as i32 + 1,
            "{what}: items are 1..n in row order"
        );
    }
    let (job_ids, leases, attempts, slots, seqs, prios): BatchRow = sqlx::query_as(
        "SELECT job_ids, run_leases, attempts, ready_slots, ready_seqs, priorities
           FROM awa.claim_batches WHERE slot = $1 AND batch_id = $2",
    )
    .bind(t0.claim_slot)
    .bind(t0.batch_id)
    .fetch_one(pool)
    .await
    .unwrap();
    assert_eq!(job_ids.len(), rows.len(), "{what}: one item per row");
    for r in rows {
        let i = (r.token.item - 1) as usize;
        let named = (
            job_ids[i],
            leases[i],
            attempts[i],
            slots[i],
            seqs[i],
            prios[i],
        );
        let row = (
            r.token.job_id.0,
            r.token.run_lease.0,
            r.attempt,
            r.token.ready_slot,
            r.token.ready_seq,
            r.priority,
        );
        assert_eq!(named, row, "{what}: item {} names another attempt", i + 1);
    }
    // Within a lane (one priority here: the queues keep one shard), lane
    // order.
    for p in 1..=4i16 {
        let seqs: Vec<i64> = rows
            .iter()
            .filter(|r| r.priority == p)
            .map(|r| r.token.ready_seq)
            .collect();
        assert!(
            seqs.windows(2).all(|w| w[0] < w[1]),
            "{what}: priority {p} out of lane order: {seqs:?}"
        );
    }
}

/// Complete every attempt: each is accepted (its item names it).
async fn complete_all(pool: &PgPool, what: &str, rows: &[ClaimedJob]) {
    let batch: Vec<_> = rows.iter().map(|r| (r.token, Finish::Complete)).collect();
    let done = finish_batch(pool, &batch).await;
    let refused: Vec<_> = done
        .iter()
        .filter(|f| !f.accepted)
        .map(|f| f.job_id)
        .collect();
    assert!(
        refused.is_empty(),
        "{what}: completions refused: {refused:?}"
    );
}

/// Whether every lane of `q` is read from the newest two slots only: the
/// claim's hot path when the queue has one lane.
async fn lanes_fast(pool: &PgPool, q: &str) -> bool {
    sqlx::query_scalar(
        "SELECT bool_and(h.low_gen >= (SELECT max(generation) FROM awa.ring_ledger
                                        WHERE ring = 'queue') - 1)
           FROM awa.lane_heads h WHERE h.queue = $1",
    )
    .bind(q)
    .fetch_one(pool)
    .await
    .unwrap()
}

async fn claim_check_complete(pool: &PgPool, what: &str, q: &str, limit: i32) -> usize {
    let rows = claim_some(pool, q, limit).await;
    check_call(pool, what, &rows).await;
    complete_all(pool, what, &rows).await;
    rows.len()
}

#[tokio::test]
async fn every_claimed_row_names_its_item_on_the_hot_and_the_general_path() {
    let (_db, pool) = setup().await;

    // The hot path: one lane, claims that take part of it, then the rest.
    enqueue_sql(&pool, "one", 300, 2, "NULL").await;
    assert_eq!(
        claim_check_complete(&pool, "one lane", "one", 128).await,
        128
    );
    assert!(
        lanes_fast(&pool, "one").await,
        "the hot path is what runs next"
    );
    assert_eq!(
        claim_check_complete(&pool, "one lane", "one", 128).await,
        128
    );
    assert_eq!(
        claim_check_complete(&pool, "one lane, rest", "one", 128).await,
        44
    );

    // Tombstoned entries skipped on the hot path: every third job cancelled.
    let last = enqueue_sql(&pool, "tombs", 90, 2, "NULL").await;
    let mut conn = pool.acquire().await.unwrap();
    let exec = PgExecPlane::new(crate::common::schema());
    for id in (last - 89..=last).step_by(3) {
        assert!(
            exec.cancel_job(&mut conn, awa_core::JobId(id))
                .await
                .unwrap()
                .is_some()
        );
    }
    drop(conn);
    let mut taken = 0;
    while taken < 60 {
        taken += claim_check_complete(&pool, "tombstones", "tombs", 25).await;
    }
    assert_eq!(taken, 60);

    // The byte bound: about 1 MB of args each, stored as is (hex of a
    // xorshift stream: it does not compress), so a claim stops at 8 MiB.
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
    let jobs: Vec<NewJob> = (0..12)
        .map(|_| {
            let pad: String = (0..62_500)
                .map(|_| {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    format!("{x:016x}")
                })
                .collect();
            NewJob::new(
                QueueName::new("big").unwrap(),
                "k",
                serde_json::json!({ "pad": pad }),
            )
        })
        .collect();
    enqueue_jobs(&pool, &jobs).await;
    let first = claim_check_complete(&pool, "byte bound", "big", 1024).await;
    assert!(
        (1..12).contains(&first),
        "the byte bound cut the claim: {first}"
    );
    let rest = claim_all(&pool, "big", 1024, 12 - first).await;
    assert_eq!(rest.len(), 12 - first);
    complete_all(&pool, "byte bound, rest", &rest).await;

    // Two lanes (two priorities): the general path, priority 1 first.
    enqueue_sql(&pool, "two", 40, 3, "NULL").await;
    enqueue_sql(&pool, "two", 40, 1, "NULL").await;
    let rows = claim_some(&pool, "two", 60).await;
    check_call(&pool, "two lanes", &rows).await;
    assert!(
        rows[..40].iter().all(|r| r.priority == 1),
        "priority 1 first"
    );
    complete_all(&pool, "two lanes", &rows).await;

    // A lane across a rotation: the newest two slots (hot path), then one
    // spread over three generations (the general path until its low_gen
    // catches up).
    enqueue_sql(&pool, "rot", 50, 2, "NULL").await;
    rotate_and_seal(&pool).await;
    enqueue_sql(&pool, "rot", 50, 2, "NULL").await;
    assert!(
        lanes_fast(&pool, "rot").await,
        "the hot path reads the newest two slots"
    );
    // (Usually one call takes all 80 from both slots; a claim that meets
    // an unsettled frontier, with other tests' transactions open, takes
    // what it may and the next takes the rest.)
    let mut got = 0;
    while got < 100 {
        let rows = claim_some(&pool, "rot", 80).await;
        check_call(&pool, "a lane over two slots", &rows).await;
        got += rows.len();
        complete_all(&pool, "a lane over two slots", &rows).await;
    }
    assert_eq!(got, 100);
    enqueue_sql(&pool, "rot", 30, 2, "NULL").await;
    rotate_and_seal(&pool).await;
    enqueue_sql(&pool, "rot", 30, 2, "NULL").await;
    rotate_and_seal(&pool).await;
    enqueue_sql(&pool, "rot", 30, 2, "NULL").await;
    assert!(
        !lanes_fast(&pool, "rot").await,
        "the general path for a lane this old"
    );
    let mut left = 90;
    while left > 0 {
        left -= claim_check_complete(&pool, "a lane over older slots", "rot", 35).await;
    }
}
