//! Compact execution and history evidence (issue 9): a claim call writes one
//! claim batch, a finish call one closure link per batch and one done batch
//! per queue slot, and the guard still lets exactly one finisher win per
//! attempt, whatever the evidence shape and the isolation level.

use crate::common;

use awa_control::rings::{PgRings, Ring, RotateOutcome};
use awa_core::{AttemptToken, ClaimedJob, JobId, NewJob, QueueName, RunLease};
use awa_exec::{ExecPlane, Finish, PgExecPlane, Progress};
use common::{claim_all, enqueue_jobs, finish_batch, schema, setup};
use sqlx::PgPool;
use std::collections::{BTreeMap, BTreeSet};

fn jobs(q: &str, n: usize) -> Vec<NewJob> {
    (0..n)
        .map(|i| {
            NewJob::new(
                QueueName::new(q).unwrap(),
                "t",
                serde_json::json!({ "i": i }),
            )
        })
        .collect()
}

async fn count(pool: &PgPool, sql: &str) -> i64 {
    sqlx::query_scalar(sqlx::AssertSqlSafe(sql.to_owned()))
        .fetch_one(pool)
        .await
        .unwrap()
}

/// Why claim-ring slot `slot` is still live (the prune predicate), or None.
async fn claim_slot_live(pool: &PgPool, slot: i32) -> Option<String> {
    sqlx::query_scalar("SELECT awa.exec_slot_live('claim', $1)")
        .bind(slot)
        .fetch_one(pool)
        .await
        .unwrap()
}

fn complete_all(jobs: &[ClaimedJob]) -> Vec<(AttemptToken, Finish)> {
    jobs.iter().map(|j| (j.token, Finish::Complete)).collect()
}

async fn state_of(pool: &PgPool, id: JobId) -> String {
    sqlx::query_scalar("SELECT state FROM awa.jobs WHERE id = $1 ORDER BY run_lease DESC LIMIT 1")
        .bind(id.0)
        .fetch_one(pool)
        .await
        .unwrap()
}

/// The done-when of issue 9: draining 10,000 jobs in batches of 100 writes
/// one claim batch per claim call, one closure link per finish call and one
/// done batch per finish call, and no per-job execution or history row;
/// the read views still show every job once, hydrated, with exact totals.
#[tokio::test]
async fn draining_in_batches_writes_rows_per_call_not_per_job() {
    let (_db, pool) = setup().await;
    const N: usize = 10_000;
    const BATCH: usize = 100;
    for chunk in jobs("rows", N).chunks(2_000) {
        enqueue_jobs(&pool, chunk).await;
    }
    let plane = PgExecPlane::new(schema());
    let mut frontier = awa_exec::Frontier::default();
    let (mut claims, mut finishes, mut done) = (0, 0, 0);
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(60);
    while done < N {
        assert!(
            tokio::time::Instant::now() < deadline,
            "drained {done} of {N}"
        );
        let mut conn = pool.acquire().await.unwrap();
        let got = plane
            .claim(
                &mut conn,
                &QueueName::new("rows").unwrap(),
                BATCH as i32,
                &mut frontier,
                None,
            )
            .await
            .unwrap();
        if got.is_empty() {
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
            continue;
        }
        claims += 1;
        let batch = got.first().unwrap().token.batch_id;
        assert!(
            got.iter().all(|j| j.token.batch_id == batch),
            "one batch per claim call"
        );
        let items: Vec<i32> = got.iter().map(|j| j.token.item).collect();
        assert_eq!(items, (1..=got.len() as i32).collect::<Vec<_>>());
        let finished = plane.finish(&mut conn, &complete_all(&got)).await.unwrap();
        assert!(finished.iter().all(|f| f.accepted));
        finishes += 1;
        done += got.len();
    }
    assert_eq!(done, N);
    assert_eq!(
        count(&pool, "SELECT count(*) FROM awa.claim_batches").await,
        claims
    );
    assert_eq!(
        count(&pool, "SELECT count(*) FROM awa.claim_closures").await,
        finishes
    );
    assert_eq!(
        count(&pool, "SELECT count(*) FROM awa.done_batches").await,
        finishes
    );
    assert_eq!(
        count(&pool, "SELECT count(*) FROM awa.done_entries").await,
        0
    );
    assert_eq!(count(&pool, "SELECT count(*) FROM awa.leases").await, 0);
    assert!(claims <= (N / BATCH) as i64 + 5, "{claims} claim calls");
    // Rows per call, not per job: at most a few hundred rows for 10,000 jobs.
    assert!(
        count(
            &pool,
            "SELECT (SELECT count(*) FROM awa.claim_batches) + (SELECT count(*) FROM awa.claim_closures)
                  + (SELECT count(*) FROM awa.done_batches) + (SELECT count(*) FROM awa.done_entries)"
        )
        .await
            <= 3 * claims
    );
    // Every batch is closed: nothing counts as running or live.
    assert_eq!(
        count(
            &pool,
            "SELECT count(*) FROM awa.claim_closures WHERE open_after = 0"
        )
        .await,
        claims
    );
    assert_eq!(count(&pool, "SELECT count(*) FROM awa.live_jobs").await, 0);
    // One terminal row per job, hydrated with its body.
    assert_eq!(
        count(
            &pool,
            "SELECT count(DISTINCT id) FROM awa.terminal_jobs
              WHERE state = 'completed' AND kind = 't' AND args ? 'i' AND attempt = 1"
        )
        .await,
        N as i64
    );
    assert_eq!(
        count(&pool, "SELECT count(*) FROM awa.terminal_jobs").await,
        N as i64
    );
    let stats = awa_history::PgHistoryPlane::new(schema());
    let mut conn = pool.acquire().await.unwrap();
    let stats = awa_history::HistoryPlane::queue_stats(
        &stats,
        &mut conn,
        Some(&QueueName::new("rows").unwrap()),
    )
    .await
    .unwrap();
    assert_eq!(stats["rows"].get("completed"), Some(&(N as i64)));
    // A lookup by id finds a job inside a done batch (by index).
    let some = JobId(count(&pool, "SELECT min(id) FROM awa.terminal_jobs").await + 4_321);
    let job = awa_history::HistoryPlane::job(
        &awa_history::PgHistoryPlane::new(schema()),
        &mut conn,
        some,
    )
    .await
    .unwrap()
    .expect("the job is found");
    assert_eq!(job.state, awa_core::JobState::Completed);
    assert_eq!(job.kind, "t");
}

/// Partial closure: a finish call closes some items of a batch; the others
/// stay open (running, live for reclamation) until a later call closes them.
#[tokio::test]
async fn a_batch_closes_item_by_item_and_stays_live_until_the_last() {
    let (_db, pool) = setup().await;
    enqueue_jobs(&pool, &jobs("part", 10)).await;
    let got = claim_all(&pool, "part", 10, 10).await;
    assert_eq!(got.len(), 10);
    let slot = got[0].token.claim_slot;
    let first: Vec<_> = complete_all(&got[..4]);
    assert!(finish_batch(&pool, &first).await.iter().all(|f| f.accepted));
    assert_eq!(
        count(
            &pool,
            "SELECT count(*) FROM awa.live_jobs WHERE state = 'running'"
        )
        .await,
        6
    );
    let live = claim_slot_live(&pool, slot).await;
    assert!(
        live.is_some(),
        "a partly closed batch keeps its claim slot live"
    );
    // The closed items cannot be finished again, in any way.
    for how in [
        Finish::Complete,
        Finish::Rescue {
            reason: "late".into(),
        },
        Finish::Cancel {
            reason: "late".into(),
        },
    ] {
        let again: Vec<_> = got[..4].iter().map(|j| (j.token, how.clone())).collect();
        assert!(
            finish_batch(&pool, &again)
                .await
                .iter()
                .all(|f| !f.accepted)
        );
    }
    // Mixed outcomes in one call make one link.
    let rest: Vec<_> = got[4..]
        .iter()
        .enumerate()
        .map(|(i, j)| {
            let how = if i % 2 == 0 {
                Finish::Complete
            } else {
                Finish::Fail {
                    error: "boom".into(),
                }
            };
            (j.token, how)
        })
        .collect();
    assert!(finish_batch(&pool, &rest).await.iter().all(|f| f.accepted));
    assert_eq!(
        count(&pool, "SELECT count(*) FROM awa.claim_closures").await,
        2
    );
    assert_eq!(
        count(
            &pool,
            "SELECT count(*) FROM awa.claim_closures WHERE outcome = 'mixed' AND open_after = 0"
        )
        .await,
        1
    );
    let live = claim_slot_live(&pool, slot).await;
    assert_eq!(live, None);
    assert_eq!(
        count(
            &pool,
            "SELECT count(*) FROM awa.terminal_jobs WHERE state = 'completed'"
        )
        .await,
        7
    );
    assert_eq!(
        count(
            &pool,
            "SELECT count(*) FROM awa.terminal_jobs WHERE state = 'failed'"
        )
        .await,
        3
    );
}

/// A token must name its item exactly: a wrong item, batch, slot or lease
/// is rejected and changes nothing.
#[tokio::test]
async fn a_token_that_does_not_name_its_item_is_rejected() {
    let (_db, pool) = setup().await;
    enqueue_jobs(&pool, &jobs("tok", 3)).await;
    let got = claim_all(&pool, "tok", 3, 3).await;
    let t = got[0].token;
    let wrong = [
        AttemptToken { item: 2, ..t },
        AttemptToken { item: 0, ..t },
        AttemptToken { item: 99, ..t },
        AttemptToken {
            batch_id: t.batch_id + 1,
            ..t
        },
        AttemptToken {
            claim_slot: (t.claim_slot + 1) % 4,
            ..t
        },
        AttemptToken {
            run_lease: RunLease(t.run_lease.0 + 1),
            ..t
        },
        AttemptToken {
            run_lease: RunLease(t.run_lease.0 - 1),
            ..t
        },
    ];
    for w in wrong {
        let r = finish_batch(&pool, &[(w, Finish::Complete)]).await;
        assert!(!r[0].accepted, "{w:?} was accepted");
        let mut conn = pool.acquire().await.unwrap();
        let beat = PgExecPlane::new(schema())
            .heartbeat(&mut conn, &w, &Progress::default())
            .await
            .unwrap();
        assert!(!beat, "{w:?} heartbeated");
    }
    assert_eq!(
        count(&pool, "SELECT count(*) FROM awa.claim_closures").await,
        0
    );
    assert_eq!(
        count(
            &pool,
            "SELECT count(*) FROM awa.live_jobs WHERE state = 'running'"
        )
        .await,
        3
    );
    assert!(
        finish_batch(&pool, &complete_all(&got))
            .await
            .iter()
            .all(|f| f.accepted)
    );
}

/// Rescue of one item of a batch: the heartbeating item stays, the silent
/// ones are rescued, and the silent worker's late completion is rejected.
#[tokio::test]
async fn rescue_takes_one_item_of_a_batch_and_leaves_the_rest() {
    let (_db, pool) = setup().await;
    enqueue_jobs(&pool, &jobs("resc", 3)).await;
    let got = claim_all(&pool, "resc", 3, 3).await;
    let plane = PgExecPlane::new(schema());
    let mut conn = pool.acquire().await.unwrap();
    tokio::time::sleep(std::time::Duration::from_millis(1_200)).await;
    assert!(
        plane
            .heartbeat(&mut conn, &got[1].token, &Progress::default())
            .await
            .unwrap()
    );
    let rescued = plane
        .rescue_stale(&mut conn, std::time::Duration::from_secs(1), 100)
        .await
        .unwrap();
    assert_eq!(rescued, 2);
    assert_eq!(state_of(&pool, got[0].token.job_id).await, "retryable");
    assert_eq!(state_of(&pool, got[1].token.job_id).await, "running");
    assert_eq!(state_of(&pool, got[2].token.job_id).await, "retryable");
    let late = finish_batch(&pool, &complete_all(&got)).await;
    assert_eq!(
        late.iter().map(|f| f.accepted).collect::<Vec<_>>(),
        [false, true, false]
    );
    assert_eq!(state_of(&pool, got[1].token.job_id).await, "completed");
}

/// A batch whose bodies are in two queue slots: one claim batch, and the
/// completion writes one done batch in each slot (history stays with the
/// body it hydrates from).
#[tokio::test]
async fn a_batch_spanning_two_queue_slots_writes_history_in_each() {
    let (_db, pool) = setup().await;
    let first = enqueue_jobs(&pool, &jobs("span", 5)).await;
    let mut conn = pool.acquire().await.unwrap();
    assert!(matches!(
        PgRings::new(schema())
            .rotate(&mut conn, Ring::Queue, "test")
            .await
            .unwrap(),
        RotateOutcome::Rotated { .. }
    ));
    let second = enqueue_jobs(&pool, &jobs("span", 5)).await;
    let got = claim_all(&pool, "span", 10, 10).await;
    assert_eq!(got.len(), 10);
    assert_eq!(
        count(&pool, "SELECT count(*) FROM awa.claim_batches").await,
        1
    );
    assert_eq!(
        count(
            &pool,
            "SELECT cardinality(body_slots)::bigint FROM awa.claim_batches"
        )
        .await,
        2
    );
    let slots: BTreeSet<i32> = got.iter().map(|j| j.token.ready_slot).collect();
    assert_eq!(slots.len(), 2);
    assert!(
        finish_batch(&pool, &complete_all(&got))
            .await
            .iter()
            .all(|f| f.accepted)
    );
    let rows: Vec<(i32, i64)> = sqlx::query_as(
        "SELECT slot, cardinality(job_ids)::bigint FROM awa.done_batches ORDER BY slot",
    )
    .fetch_all(&pool)
    .await
    .unwrap();
    assert_eq!(rows.len(), 2, "{rows:?}");
    assert!(rows.iter().all(|(_, n)| *n == 5));
    let by_slot: BTreeMap<i64, i32> =
        sqlx::query_as::<_, (i64, i32)>("SELECT id, ring_slot FROM awa.terminal_jobs")
            .fetch_all(&pool)
            .await
            .unwrap()
            .into_iter()
            .collect();
    assert_eq!(by_slot.len(), 10);
    for id in first.iter().chain(&second) {
        let ready: i32 = sqlx::query_scalar("SELECT slot FROM awa.ready_entries WHERE job_id = $1")
            .bind(id.0)
            .fetch_one(&pool)
            .await
            .unwrap();
        assert_eq!(
            by_slot[&id.0], ready,
            "job {id}'s history is in its body's slot"
        );
    }
}

/// Racing finishers of the same batch (worker completions, rescue, operator
/// cancels, a second completer) on separate connections: every item is
/// finished exactly once, and the job's state is what the winner decided.
#[tokio::test]
async fn racing_finishers_of_one_batch_finish_each_item_once() {
    // Under heavy contention `finish` may give up after 8 rounds with
    // 40001 (its documented contract: the whole call rolled back; retry
    // it), as the worker's completer does.
    let (_db, pool) = setup().await;
    for round in 0..6 {
        let q = format!("race{round}");
        enqueue_jobs(&pool, &jobs(&q, 40)).await;
        let got = claim_all(&pool, &q, 40, 40).await;
        assert_eq!(got.len(), 40);
        let mut tasks = Vec::new();
        for racer in 0..4usize {
            let pool = pool.clone();
            let mut mine: Vec<ClaimedJob> = got.clone();
            // Different orders and splits so calls overlap in many ways.
            if racer % 2 == 1 {
                mine.reverse();
            }
            tasks.push(tokio::spawn(async move {
                let mut won = Vec::new();
                for chunk in mine.chunks(3 + racer * 4) {
                    if racer == 3 {
                        // The operator cancels one job at a time.
                        for j in chunk {
                            // Retried on 40001 by cancel_job itself.
                            let mut conn = pool.acquire().await.unwrap();
                            let r = PgExecPlane::new(schema())
                                .cancel_job(&mut conn, j.token.job_id)
                                .await
                                .expect("cancel_job");
                            match r.as_deref() {
                                Some("running") => {
                                    won.push((j.token.job_id, "cancelled".to_owned()))
                                }
                                // Another racer finished the attempt first and
                                // the job waits for its retry: cancelling it
                                // there is a later, separate transition.
                                Some(_) => won.push((j.token.job_id, "then cancelled".to_owned())),
                                None => {}
                            }
                        }
                        continue;
                    }
                    let how = match racer {
                        0 => Finish::Complete,
                        1 => Finish::Rescue {
                            reason: "race".into(),
                        },
                        _ => Finish::Fail {
                            error: "race".into(),
                        },
                    };
                    let batch: Vec<_> = chunk.iter().map(|j| (j.token, how.clone())).collect();
                    for f in finish_retrying_40001(&pool, &batch).await {
                        if f.accepted {
                            won.push((f.job_id, f.next_state.unwrap().to_string()));
                        }
                    }
                }
                won
            }));
        }
        let mut winners: BTreeMap<JobId, Vec<String>> = BTreeMap::new();
        let mut then_cancelled = BTreeSet::new();
        for t in tasks {
            for (id, state) in t.await.unwrap() {
                if state == "then cancelled" {
                    then_cancelled.insert(id);
                } else {
                    winners.entry(id).or_default().push(state);
                }
            }
        }
        assert_eq!(winners.len(), 40, "round {round}: every item finished");
        for (id, states) in &winners {
            assert_eq!(
                states.len(),
                1,
                "round {round}: job {id} finished by {states:?}"
            );
            let now = state_of(&pool, *id).await;
            let expected = if then_cancelled.contains(id) {
                assert!(
                    ["retryable", "snoozed", "available"].contains(&states[0].as_str()),
                    "round {round}: job {id} cancelled from {states:?}"
                );
                "cancelled"
            } else {
                states[0].as_str()
            };
            if now != expected {
                let evidence: Vec<(String, String)> = sqlx::query_as(
                    "SELECT 'link', c.link || ':' || c.outcome || ':' || coalesce(c.outcomes::text, '') || ':' || c.items::text
                       FROM awa.claim_closures c JOIN awa.claim_batches b USING (slot, batch_id)
                      WHERE $1 = ANY (b.job_ids)
                     UNION ALL SELECT 'deferred', reason || ':' || run_lease FROM awa.deferred_jobs WHERE job_id = $1
                     UNION ALL SELECT 'done', state || ':' || run_lease FROM awa.done_entries WHERE job_id = $1
                     UNION ALL SELECT 'failure', state || ':' || run_lease FROM awa.failure_entries WHERE job_id = $1
                     UNION ALL SELECT 'item', array_position(b.job_ids, $1)::text FROM awa.claim_batches b WHERE $1 = ANY (b.job_ids)",
                )
                .bind(id.0)
                .fetch_all(&pool)
                .await
                .unwrap();
                panic!("round {round}: job {id} won by {states:?} but is {now}: {evidence:#?}");
            }
        }
        let listed = count(
            &pool,
            &format!(
                "SELECT coalesce(sum(cardinality(c.items)), 0)::bigint FROM awa.claim_closures c
                   JOIN awa.claim_batches b USING (slot, batch_id) WHERE b.queue = '{q}'"
            ),
        )
        .await;
        assert_eq!(listed, 40, "round {round}: each item listed by one link");
    }
}

/// Under REPEATABLE READ and SERIALIZABLE, a finisher whose snapshot
/// predates another finisher's committed link of the same batch gets a
/// serialization failure (retry), never a second finish.
#[tokio::test]
async fn a_stale_snapshot_cannot_finish_an_item_twice() {
    let (_db, pool) = setup().await;
    for level in ["REPEATABLE READ", "SERIALIZABLE"] {
        let q = format!("iso{}", level.len());
        enqueue_jobs(&pool, &jobs(&q, 2)).await;
        let got = claim_all(&pool, &q, 2, 2).await;
        let mut slow = pool.acquire().await.unwrap();
        sqlx::query(sqlx::AssertSqlSafe(format!(
            "BEGIN ISOLATION LEVEL {level}"
        )))
        .execute(&mut *slow)
        .await
        .unwrap();
        sqlx::query("SELECT count(*) FROM awa.claim_closures")
            .execute(&mut *slow)
            .await
            .unwrap();
        // Another finisher closes item 1 and commits.
        assert!(finish_batch(&pool, &[(got[0].token, Finish::Complete)]).await[0].accepted);
        // The slow one, on its old snapshot, tries item 1 (and item 2).
        for tokens in [vec![got[0].token], vec![got[1].token]] {
            let batch: Vec<_> = tokens
                .iter()
                .map(|t| {
                    (
                        *t,
                        Finish::Rescue {
                            reason: "slow".into(),
                        },
                    )
                })
                .collect();
            sqlx::query("SAVEPOINT s")
                .execute(&mut *slow)
                .await
                .unwrap();
            let r = PgExecPlane::new(schema()).finish(&mut slow, &batch).await;
            match r {
                Err(e) => {
                    let text = e.to_string();
                    assert!(
                        text.contains("serializ") || text.contains("40001"),
                        "{level}: {text}"
                    );
                    sqlx::query("ROLLBACK TO SAVEPOINT s")
                        .execute(&mut *slow)
                        .await
                        .unwrap();
                }
                Ok(f) => {
                    // Rejecting without an error is the other correct answer.
                    assert!(
                        !f[0].accepted || tokens[0] == got[1].token,
                        "{level}: {f:?}"
                    );
                    sqlx::query("ROLLBACK TO SAVEPOINT s")
                        .execute(&mut *slow)
                        .await
                        .unwrap();
                }
            }
        }
        sqlx::query("ROLLBACK").execute(&mut *slow).await.unwrap();
        assert_eq!(state_of(&pool, got[0].token.job_id).await, "completed");
        assert!(finish_batch(&pool, &[(got[1].token, Finish::Complete)]).await[0].accepted);
    }
}

/// `finish` as the completer calls it: a serialization failure (40001,
/// nothing written) is retried; anything else fails the test.
async fn finish_retrying_40001(
    pool: &sqlx::PgPool,
    batch: &[(awa_core::AttemptToken, Finish)],
) -> Vec<awa_exec::Finished> {
    for _ in 0..50 {
        let mut conn = pool.acquire().await.unwrap();
        match PgExecPlane::new(schema()).finish(&mut conn, batch).await {
            Ok(done) => return done,
            Err(awa_exec::ExecError::Database(sqlx::Error::Database(db)))
                if db.code().as_deref() == Some("40001") =>
            {
                tokio::time::sleep(std::time::Duration::from_millis(5)).await;
            }
            Err(err) => panic!("finish failed: {err}"),
        }
    }
    panic!("finish lost the race 50 calls in a row")
}

/// The worker's claim commits without waiting for the WAL flush, and only
/// its own commit: the setting lasts until the end of the claim's own
/// transaction and the session's value holds again for the next statement
/// on the same connection (a finish on it, say, still waits). What it
/// claims is what `claim` would, and the finish of it is accepted.
#[tokio::test]
async fn the_workers_claim_commits_asynchronously_and_only_itself() {
    let (_db, pool) = setup().await;
    enqueue_jobs(&pool, &jobs("async_claim", 5)).await;
    let plane = PgExecPlane::new(schema());
    let q = QueueName::new("async_claim").unwrap();
    let mut conn = pool.acquire().await.unwrap();
    // The test servers run with synchronous_commit off; this session says on.
    sqlx::query("SET synchronous_commit = on")
        .execute(&mut *conn)
        .await
        .unwrap();
    let mut frontier = awa_exec::Frontier::default();
    let mut claimed = Vec::new();
    for _ in 0..200 {
        let got = plane
            .claim_committing_async(&mut conn, &q, 10, &mut frontier, None)
            .await
            .unwrap();
        claimed.extend(got);
        if claimed.len() == 5 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    assert_eq!(claimed.len(), 5, "the async claim takes what claim would");
    let after: String = sqlx::query_scalar("SHOW synchronous_commit")
        .fetch_one(&mut *conn)
        .await
        .unwrap();
    assert_eq!(
        after, "on",
        "the claim's setting outlived its own transaction"
    );
    let done = plane
        .finish(&mut conn, &complete_all(&claimed))
        .await
        .unwrap();
    assert!(done.iter().all(|f| f.accepted), "{done:?}");
    for j in &claimed {
        assert_eq!(state_of(&pool, j.token.job_id).await, "completed");
    }
}
