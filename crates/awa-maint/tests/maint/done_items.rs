//! Every completion the finish records names its own job: the lean path
//! (every attempt a completion, one claim slot) writes one done_batches row
//! per queue slot and queue with six parallel arrays and no sort, so each
//! array position must still describe one job (its id, lease, attempt and
//! the lane position of its body). Completions are sent in scrambled
//! order, from one claim batch whose jobs sit in two queue slots, in calls
//! that take the lean path, the general path (a pair named twice) and the
//! rejection of what is already finished; then every job's history row is
//! read back through its lane position and held to the job it was.

use crate::common::{claim_some, enqueue_jobs, finish_batch, schema, setup};
use awa_core::{ClaimedJob, NewJob, QueueName};
use awa_exec::Finish;
use sqlx::PgPool;
use std::collections::HashMap;

/// Jobs of `q` with args {"i": i} for i in `range`.
async fn enqueue_numbered(pool: &PgPool, q: &str, range: std::ops::Range<i64>) {
    let jobs: Vec<NewJob> = range
        .map(|i| {
            NewJob::new(
                QueueName::new(q).unwrap(),
                "k",
                serde_json::json!({ "i": i }),
            )
        })
        .collect();
    enqueue_jobs(pool, &jobs).await;
}

type DoneRow = (
    i32,
    Vec<i64>,
    Vec<i64>,
    Vec<i32>,
    Vec<i64>,
    Vec<i16>,
    Vec<i16>,
);

#[tokio::test]
async fn every_completion_in_done_batches_names_its_own_job_and_body() {
    let (_db, pool) = setup().await;
    // One lane over two queue slots, so one claim batch's completions go
    // to two done_batches rows.
    enqueue_numbered(&pool, "d", 0..40).await;
    // A plain rotation, no prune: a prune past the (test-short) retention
    // would move the waiting jobs into the current slot.
    let mut conn = pool.acquire().await.unwrap();
    awa_control::rings::PgRings::new(schema())
        .rotate(&mut conn, awa_control::rings::Ring::Queue, "test")
        .await
        .unwrap();
    drop(conn);
    enqueue_numbered(&pool, "d", 40..80).await;
    let mut claimed: Vec<ClaimedJob> = Vec::new();
    while claimed.len() < 80 {
        claimed.extend(claim_some(&pool, "d", 80).await);
    }
    assert_eq!(claimed.len(), 80);
    let slots: std::collections::HashSet<i32> =
        claimed.iter().map(|c| c.token.ready_slot).collect();
    assert_eq!(slots.len(), 2, "the bodies sit in two queue slots");
    let args_of: HashMap<i64, serde_json::Value> = claimed
        .iter()
        .map(|c| (c.token.job_id.0, c.args.clone()))
        .collect();

    // Scrambled: every other attempt, last first (the lean path).
    let first: Vec<_> = claimed
        .iter()
        .rev()
        .step_by(2)
        .map(|c| (c.token, Finish::Complete))
        .collect();
    let done = finish_batch(&pool, &first).await;
    assert!(done.iter().all(|f| f.accepted), "lean path: all accepted");
    assert_eq!(
        done.iter().map(|f| f.job_id).collect::<Vec<_>>(),
        first.iter().map(|(t, _)| t.job_id).collect::<Vec<_>>(),
        "answers in input order"
    );

    // The rest, one of them named twice: the general path finishes it once.
    let mut rest: Vec<_> = claimed
        .iter()
        .rev()
        .skip(1)
        .step_by(2)
        .map(|c| (c.token, Finish::Complete))
        .collect();
    rest.swap(0, 7);
    rest.push(rest[3].clone());
    let done = finish_batch(&pool, &rest).await;
    let accepted = done.iter().filter(|f| f.accepted).count();
    assert_eq!(accepted, 40, "each of the rest once: {done:?}");
    assert!(
        !done.last().unwrap().accepted,
        "the second naming is refused"
    );

    // Already finished: refused, nothing written.
    let again = finish_batch(&pool, &first[..5]).await;
    assert!(again.iter().all(|f| !f.accepted), "{again:?}");

    // Each done_batches position names one job whose body is at the lane
    // position it records (the view joins the body through it).
    let rows: Vec<DoneRow> = sqlx::query_as(
        "SELECT slot, job_ids, run_leases, attempts, ready_seqs, priorities, shards
           FROM awa.done_batches WHERE queue = 'd'",
    )
    .fetch_all(&pool)
    .await
    .unwrap();
    let by_job: HashMap<i64, &ClaimedJob> = claimed.iter().map(|c| (c.token.job_id.0, c)).collect();
    let mut seen = 0;
    for (slot, ids, leases, attempts, seqs, prios, shards) in &rows {
        let n = ids.len();
        assert!(
            [
                leases.len(),
                attempts.len(),
                seqs.len(),
                prios.len(),
                shards.len()
            ]
            .iter()
            .all(|&l| l == n),
            "parallel arrays"
        );
        for i in 0..n {
            let c = by_job[&ids[i]];
            assert_eq!(
                (*slot, leases[i], attempts[i], seqs[i], prios[i]),
                (
                    c.token.ready_slot,
                    c.token.run_lease.0,
                    c.attempt,
                    c.token.ready_seq,
                    c.priority
                ),
                "position {i} of a done_batches row names another job's attempt"
            );
            let body: i64 = sqlx::query_scalar(
                "SELECT e.job_id FROM awa.ready_entries e
                  WHERE e.slot = $1 AND e.queue = 'd' AND e.priority = $2 AND e.shard = $3
                    AND e.lane_seq = $4",
            )
            .bind(slot)
            .bind(prios[i])
            .bind(shards[i])
            .bind(seqs[i])
            .fetch_one(&pool)
            .await
            .unwrap();
            assert_eq!(body, ids[i], "position {i}: the body of another job");
            seen += 1;
        }
    }
    assert_eq!(seen, 80, "every completion recorded once");

    // And the history operators read shows each job as it was.
    let shown: Vec<(i64, String, Option<serde_json::Value>, i64, i32)> = sqlx::query_as(
        "SELECT id, state, args, run_lease, attempt FROM awa.terminal_jobs WHERE queue = 'd'",
    )
    .fetch_all(&pool)
    .await
    .unwrap();
    assert_eq!(shown.len(), 80);
    for (id, state, args, lease, attempt) in shown {
        assert_eq!(state, "completed");
        assert_eq!(args.as_ref(), Some(&args_of[&id]), "job {id}'s args");
        assert_eq!(
            (lease, attempt),
            (by_job[&id].token.run_lease.0, by_job[&id].attempt)
        );
    }
}
