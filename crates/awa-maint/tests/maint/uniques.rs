//! Unique keys against real PostgreSQL, at every isolation level and under
//! a racing load: a key row never commits without its job, two unfinished
//! jobs never share a key, and an enqueue told "inserted" made a job.

use awa_core::{JobId, NewJob, QueueName};
use awa_exec::{ExecPlane, Finish, Frontier, PgExecPlane};
use awa_ready::{Enqueued, PgReadyPlane, ReadyError, ReadyPlane};
use sqlx::{PgConnection, PgPool};
use std::collections::{HashMap, HashSet};
use std::time::Duration;

use crate::common;
use common::sqlstate;
use common::{TERMINAL_FACTS, schema, setup};

fn keyed(q: &str, key: &str) -> NewJob {
    let mut j = NewJob::new(QueueName::new(q).unwrap(), "test", serde_json::json!({}));
    j.unique_key = Some(key.into());
    j
}

async fn enqueue_on(conn: &mut PgConnection, jobs: &[NewJob]) -> Result<Vec<Enqueued>, ReadyError> {
    PgReadyPlane::new(schema()).enqueue(conn, jobs).await
}

async fn enqueue(pool: &PgPool, jobs: &[NewJob]) -> Vec<Enqueued> {
    let mut conn = pool.acquire().await.unwrap();
    enqueue_on(&mut conn, jobs).await.unwrap()
}

/// The owner job_uniques records for `key`, if any.
async fn owner_of(pool: &PgPool, key: &str) -> Option<i64> {
    sqlx::query_scalar("SELECT job_id FROM awa.job_uniques WHERE unique_key = $1")
        .bind(key)
        .fetch_optional(pool)
        .await
        .unwrap()
}

async fn state_of(pool: &PgPool, id: i64) -> Option<String> {
    sqlx::query_scalar("SELECT state FROM awa.jobs WHERE id = $1")
        .bind(id)
        .fetch_optional(pool)
        .await
        .unwrap()
}

/// The uniqueness invariants over the whole substrate; panics with what
/// broke.
async fn check_uniques(pool: &PgPool) {
    // (a) every key row points at an existing, non-terminal job.
    let orphans: Vec<(String, i64)> = sqlx::query_as(
        "SELECT u.unique_key, u.job_id FROM awa.job_uniques u
          WHERE NOT EXISTS (SELECT 1 FROM awa.live_jobs l WHERE l.id = u.job_id)",
    )
    .fetch_all(pool)
    .await
    .unwrap();
    assert!(
        orphans.is_empty(),
        "key rows whose job is not live: {orphans:?}"
    );
    // (b) no two non-terminal jobs carry one key, and (d) every
    // non-terminal job carrying a key owns it.
    let live: Vec<(i64, String)> = sqlx::query_as(
        "SELECT DISTINCT l.id, k.unique_key
           FROM awa.live_jobs l
          CROSS JOIN LATERAL (
                SELECT e.unique_key FROM awa.ready_entries e
                 WHERE e.job_id = l.id AND e.unique_key IS NOT NULL
                UNION
                SELECT d.unique_key FROM awa.deferred_jobs d
                 WHERE d.job_id = l.id AND d.unique_key IS NOT NULL) k",
    )
    .fetch_all(pool)
    .await
    .unwrap();
    let mut by_key: HashMap<&str, Vec<i64>> = HashMap::new();
    for (id, key) in &live {
        by_key.entry(key).or_default().push(*id);
    }
    let shared: Vec<_> = by_key.iter().filter(|(_, ids)| ids.len() > 1).collect();
    assert!(
        shared.is_empty(),
        "unfinished jobs sharing a key: {shared:?}"
    );
    let owners: HashMap<String, i64> =
        sqlx::query_as::<_, (String, i64)>("SELECT unique_key, job_id FROM awa.job_uniques")
            .fetch_all(pool)
            .await
            .unwrap()
            .into_iter()
            .collect();
    let unowned: Vec<_> = live
        .iter()
        .filter(|(id, key)| owners.get(key) != Some(id))
        .collect();
    assert!(
        unowned.is_empty(),
        "unfinished jobs that do not own their key: {unowned:?} (owners {owners:?})"
    );
}

/// The reproduction: the key's owner finishes after the snapshot of
/// a snapshot-isolation transaction that then enqueues the same key.
async fn owner_finishes_after_the_snapshot(level: &'static str) {
    let (_db, pool) = setup().await;
    let first = enqueue(&pool, &[keyed("uq", "K1")]).await[0];
    assert!(first.inserted);

    let mut tx = pool.acquire().await.unwrap().detach();
    sqlx::query(level).execute(&mut tx).await.unwrap();
    sqlx::query("SELECT 1").execute(&mut tx).await.unwrap(); // takes the snapshot

    let mut other = pool.acquire().await.unwrap();
    let cancelled = PgExecPlane::new(schema())
        .cancel_job(&mut other, first.job_id)
        .await
        .unwrap();
    assert_eq!(cancelled.as_deref(), Some("available"));
    drop(other);

    let outcome = match enqueue_on(&mut tx, &[keyed("uq", "K1")]).await {
        Ok(r) => match sqlx::query("COMMIT").execute(&mut tx).await {
            Ok(_) => Ok(r[0]),
            Err(e) => Err(ReadyError::Database(e)),
        },
        Err(e) => Err(e),
    };
    let _ = sqlx::query("ROLLBACK").execute(&mut tx).await;
    match outcome {
        Ok(second) => {
            // The old owner was gone when we inserted: we own the key now.
            assert!(
                second.inserted,
                "{level}: the key was free, yet not inserted: {second:?} (first {first:?})"
            );
            assert_eq!(owner_of(&pool, "K1").await, Some(second.job_id.0));
            assert_eq!(
                state_of(&pool, second.job_id.0).await.as_deref(),
                Some("available")
            );
            let third = enqueue(&pool, &[keyed("uq", "K1")]).await[0];
            assert_eq!(
                (third.job_id, third.inserted),
                (second.job_id, false),
                "{level}: a later enqueue is told the live owner"
            );
        }
        Err(err) => {
            // Refused clearly is acceptable; nothing may have committed.
            assert_eq!(sqlstate(&err).as_deref(), Some("40001"), "{level}: {err}");
            assert_eq!(owner_of(&pool, "K1").await, None);
            let third = enqueue(&pool, &[keyed("uq", "K1")]).await[0];
            assert!(third.inserted, "{level}: the key is free after the refusal");
        }
    }
    check_uniques(&pool).await;
}

#[tokio::test]
async fn repeatable_read_enqueue_after_the_owner_finished_owns_the_key() {
    owner_finishes_after_the_snapshot("BEGIN ISOLATION LEVEL REPEATABLE READ").await;
}

#[tokio::test]
async fn serializable_enqueue_after_the_owner_finished_owns_the_key() {
    owner_finishes_after_the_snapshot("BEGIN ISOLATION LEVEL SERIALIZABLE").await;
}

/// A key taken by a transaction that committed after our snapshot: the
/// snapshot cannot see the owner, so the enqueue is refused with SQLSTATE
/// 40001 and a message, never answered wrongly.
#[tokio::test]
async fn a_key_taken_after_the_snapshot_is_refused_with_serialization_failure() {
    let (_db, pool) = setup().await;
    for level in [
        "BEGIN ISOLATION LEVEL REPEATABLE READ",
        "BEGIN ISOLATION LEVEL SERIALIZABLE",
    ] {
        let key = format!("K-{}", level.len());
        let mut tx = pool.acquire().await.unwrap().detach();
        sqlx::query(level).execute(&mut tx).await.unwrap();
        sqlx::query("SELECT 1").execute(&mut tx).await.unwrap();
        let owner = enqueue(&pool, &[keyed("uq", &key)]).await[0];
        let err = enqueue_on(&mut tx, &[keyed("uq", &key)])
            .await
            .expect_err("the owner is invisible to this snapshot");
        assert_eq!(sqlstate(&err).as_deref(), Some("40001"), "{level}: {err}");
        let text = err.to_string();
        assert!(
            text.contains("40001") && text.contains("retry"),
            "the message names the SQLSTATE and what to do: {text}"
        );
        sqlx::query("ROLLBACK").execute(&mut tx).await.unwrap();
        assert_eq!(owner_of(&pool, &key).await, Some(owner.job_id.0));
    }
    check_uniques(&pool).await;
}

/// Within one snapshot-isolation transaction, a second enqueue of a key the
/// transaction itself took after the old owner finished is told its own
/// job, not the old owner its snapshot still sees.
#[tokio::test]
async fn a_second_enqueue_in_the_same_snapshot_sees_its_own_key() {
    let (_db, pool) = setup().await;
    let first = enqueue(&pool, &[keyed("uq", "K1")]).await[0];
    let mut tx = pool.acquire().await.unwrap().detach();
    sqlx::query("BEGIN ISOLATION LEVEL REPEATABLE READ")
        .execute(&mut tx)
        .await
        .unwrap();
    sqlx::query("SELECT 1").execute(&mut tx).await.unwrap();
    let mut other = pool.acquire().await.unwrap();
    PgExecPlane::new(schema())
        .cancel_job(&mut other, first.job_id)
        .await
        .unwrap();
    drop(other);
    let mine = enqueue_on(&mut tx, &[keyed("uq", "K1")]).await.unwrap()[0];
    assert!(mine.inserted);
    let again = enqueue_on(&mut tx, &[keyed("uq", "K1")]).await.unwrap()[0];
    assert_eq!((again.job_id, again.inserted), (mine.job_id, false));
    sqlx::query("COMMIT").execute(&mut tx).await.unwrap();
    check_uniques(&pool).await;
}

#[tokio::test]
async fn duplicate_keys_in_one_batch_the_first_wins() {
    let (_db, pool) = setup().await;
    let mut later = keyed("uq", "B");
    later.run_at = Some(chrono::Utc::now() + chrono::Duration::hours(1));
    let r = enqueue(
        &pool,
        &[
            keyed("uq", "A"),
            keyed("uq", "B"),
            keyed("uq", "A"),
            later,
            keyed("uq", "A"),
        ],
    )
    .await;
    assert!(r[0].inserted && r[1].inserted);
    assert_eq!((r[2].job_id, r[2].inserted), (r[0].job_id, false));
    assert_eq!((r[3].job_id, r[3].inserted), (r[1].job_id, false));
    assert!(!r[3].scheduled || r[3].job_id == r[1].job_id);
    assert_eq!((r[4].job_id, r[4].inserted), (r[0].job_id, false));
    let live: i64 = sqlx::query_scalar("SELECT count(*) FROM awa.live_jobs")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(live, 2);
    check_uniques(&pool).await;
}

/// The racing load of the issue, bounded to a few seconds: six producers
/// enqueue a handful of keys in a tight loop (READ COMMITTED, one job per
/// transaction) while claimers complete or cancel what they get and an
/// operator cancels waiting owners.
#[tokio::test]
async fn racing_producers_finishers_and_cancellers_keep_keys_unique() {
    const KEYS: usize = 4;
    const RUN: Duration = Duration::from_secs(4);
    let (_db, pool) = setup().await;
    let until = tokio::time::Instant::now() + RUN;

    let mut producers = Vec::new();
    for p in 0..6usize {
        let pool = pool.clone();
        producers.push(tokio::spawn(async move {
            let mut conn = pool.acquire().await.unwrap().detach();
            let mut seen = Vec::new();
            let mut violations = Vec::new();
            let mut i = p;
            while tokio::time::Instant::now() < until {
                let key = format!("race:{}", i % KEYS);
                i += 1;
                let r = enqueue_on(&mut conn, &[keyed("race", &key)]).await.unwrap()[0];
                if r.inserted {
                    // One snapshot: while our job is live it must own the
                    // key (finishing releases the key in the same commit).
                    let holds: bool = sqlx::query_scalar(
                        "SELECT NOT EXISTS (SELECT 1 FROM awa.live_jobs WHERE id = $2)
                             OR (SELECT job_id FROM awa.job_uniques WHERE unique_key = $1)
                                IS NOT DISTINCT FROM $2",
                    )
                    .bind(&key)
                    .bind(r.job_id.0)
                    .fetch_one(&mut conn)
                    .await
                    .unwrap();
                    if !holds {
                        let how: Vec<(String, String)> = sqlx::query_as(
                            "SELECT 'done', state FROM awa.jobs WHERE id = $1
                             UNION ALL SELECT 'tomb', lane_seq::text FROM awa.ready_tombstones WHERE job_id = $1
                             UNION ALL SELECT 'key', coalesce((SELECT job_id::text FROM awa.job_uniques WHERE unique_key = $2), 'none')",
                        )
                        .bind(r.job_id.0)
                        .bind(&key)
                        .fetch_all(&mut conn)
                        .await
                        .unwrap();
                        eprintln!("DIAG {} {key}: {how:?}", r.job_id.0);
                        violations.push((key.clone(), r.job_id.0));
                    }
                }
                seen.push((key, r));
            }
            (seen, violations)
        }));
    }
    let mut finishers = Vec::new();
    for f in 0..2usize {
        let pool = pool.clone();
        finishers.push(tokio::spawn(async move {
            let exec = PgExecPlane::new(schema());
            let mut conn = pool.acquire().await.unwrap().detach();
            let mut frontier = Frontier::default();
            let mut n = f;
            let mut finished = 0usize;
            while tokio::time::Instant::now() < until {
                let got = exec
                    .claim(
                        &mut conn,
                        &QueueName::new("race").unwrap(),
                        4,
                        &mut frontier,
                        None,
                    )
                    .await
                    .unwrap();
                if got.is_empty() {
                    tokio::time::sleep(Duration::from_millis(2)).await;
                    continue;
                }
                let batch: Vec<_> = got
                    .iter()
                    .map(|c| {
                        n += 1;
                        let how = if n % 3 == 0 {
                            Finish::Cancel { reason: "x".into() }
                        } else {
                            Finish::Complete
                        };
                        (c.token, how)
                    })
                    .collect();
                finished += exec
                    .finish(&mut conn, &batch)
                    .await
                    .unwrap()
                    .iter()
                    .filter(|f| f.accepted)
                    .count();
            }
            finished
        }));
    }
    let canceller = {
        let pool = pool.clone();
        tokio::spawn(async move {
            let exec = PgExecPlane::new(schema());
            let mut conn = pool.acquire().await.unwrap().detach();
            let mut cancelled = 0usize;
            let mut i = 0usize;
            while tokio::time::Instant::now() < until {
                i += 1;
                let owner: Option<i64> =
                    sqlx::query_scalar("SELECT job_id FROM awa.job_uniques WHERE unique_key = $1")
                        .bind(format!("race:{}", i % KEYS))
                        .fetch_optional(&mut conn)
                        .await
                        .unwrap();
                if let Some(id) = owner
                    && exec
                        .cancel_job(&mut conn, JobId(id))
                        .await
                        .unwrap()
                        .is_some()
                {
                    cancelled += 1;
                }
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
            cancelled
        })
    };

    let mut results = Vec::new();
    let mut violations = Vec::new();
    for t in producers {
        let (seen, bad) = t.await.unwrap();
        results.extend(seen);
        violations.extend(bad);
    }
    let mut finished = 0;
    for t in finishers {
        finished += t.await.unwrap();
    }
    let cancelled = canceller.await.unwrap();
    let inserted: Vec<i64> = results
        .iter()
        .filter(|(_, r)| r.inserted)
        .map(|(_, r)| r.job_id.0)
        .collect();
    eprintln!(
        "racing load: {} enqueues, {} inserted, {finished} finished by claimers, {cancelled} cancelled waiting",
        results.len(),
        inserted.len()
    );
    assert!(
        inserted.len() > 20 && finished + cancelled > 10,
        "the load did not churn the keys enough to prove anything"
    );
    assert!(
        violations.is_empty(),
        "{} live jobs made by an enqueue that said inserted did not own their key: {violations:?}",
        violations.len()
    );

    // (c) every enqueue told "inserted" created a job, each a distinct one;
    // every "not inserted" answer named a job that exists.
    let known: HashSet<i64> = sqlx::query_scalar("SELECT id FROM awa.jobs")
        .fetch_all(&pool)
        .await
        .unwrap()
        .into_iter()
        .collect();
    let missing: Vec<_> = inserted.iter().filter(|id| !known.contains(id)).collect();
    assert!(
        missing.is_empty(),
        "{} enqueues said inserted but made no job: {missing:?}",
        missing.len()
    );
    assert_eq!(
        inserted.iter().collect::<HashSet<_>>().len(),
        inserted.len()
    );
    let phantom: Vec<_> = results
        .iter()
        .filter(|(_, r)| !r.inserted && !known.contains(&r.job_id.0))
        .collect();
    assert!(
        phantom.is_empty(),
        "owners reported that exist nowhere: {phantom:?}"
    );
    // Every job this load made carried its key and held it when made.
    let keyless: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM awa.ready_entries WHERE queue = 'race' AND unique_key IS NULL",
    )
    .fetch_one(&pool)
    .await
    .unwrap();
    assert_eq!(keyless, 0);
    // A job ends once: never cancelled while waiting and also claimed.
    let twice: Vec<(i64, i64)> = sqlx::query_as(sqlx::AssertSqlSafe(format!(
        "SELECT job_id, count(*) FROM {TERMINAL_FACTS} GROUP BY job_id HAVING count(*) > 1"
    )))
    .fetch_all(&pool)
    .await
    .unwrap();
    assert!(twice.is_empty(), "jobs with two terminal facts: {twice:?}");
    // (a), (b) and every live keyed job owning its key.
    check_uniques(&pool).await;
}

/// Dead-letter `id` (max_attempts 1, fails once); returns when it is there.
async fn dead_letter(pool: &PgPool, id: JobId) {
    let claimed = common::claim_all(pool, "dq", 10, 1).await;
    let c = claimed
        .iter()
        .find(|c| c.token.job_id == id)
        .expect("the job was claimed");
    let mut conn = pool.acquire().await.unwrap();
    let r = PgExecPlane::new(schema())
        .finish(
            &mut conn,
            &[(
                c.token,
                Finish::Fail {
                    error: "bad".into(),
                },
            )],
        )
        .await
        .unwrap();
    assert_eq!(r[0].next_state, Some(awa_core::JobState::DeadLettered));
}

/// A dead-lettered job released its key; retrying it takes the key again,
/// and when a newer job holds the key the entry stays dead-lettered and
/// says who holds it.
#[tokio::test]
async fn a_dlq_retry_takes_its_key_again_or_stays_when_a_newer_job_holds_it() {
    use awa_dlq::{DlqPlane, KeyHeld, PgDlqPlane, Selection};
    let (_db, pool) = setup().await;
    let mut conn = pool.acquire().await.unwrap();
    awa_control::queues::QueueConfig {
        dlq_enabled: Some(true),
        ..Default::default()
    }
    .apply(&mut conn, &QueueName::new("dq").unwrap())
    .await
    .unwrap();
    drop(conn);
    let dlq = PgDlqPlane::new(schema());
    let mut once = keyed("dq", "D1");
    once.max_attempts = Some(1);

    let first = enqueue(&pool, std::slice::from_ref(&once)).await[0];
    dead_letter(&pool, first.job_id).await;
    assert_eq!(owner_of(&pool, "D1").await, None, "dead-lettering releases");

    // Free key: the retry owns it again, and a producer is told so.
    let mut conn = pool.acquire().await.unwrap();
    let r = dlq
        .retry(&mut conn, &Selection::One(first.job_id))
        .await
        .unwrap();
    drop(conn);
    assert_eq!((r.retried, r.kept), (vec![first.job_id], vec![]));
    assert_eq!(owner_of(&pool, "D1").await, Some(first.job_id.0));
    let dup = enqueue(&pool, std::slice::from_ref(&once)).await[0];
    assert_eq!((dup.job_id, dup.inserted), (first.job_id, false));
    check_uniques(&pool).await;

    // Dead again; a newer job takes the key meanwhile.
    dead_letter(&pool, first.job_id).await;
    let newer = enqueue(&pool, &[keyed("other", "D1")]).await[0];
    assert!(newer.inserted);
    let mut conn = pool.acquire().await.unwrap();
    let r = dlq
        .retry(&mut conn, &Selection::All { queue: None })
        .await
        .unwrap();
    drop(conn);
    assert_eq!(r.retried, vec![]);
    assert_eq!(
        r.kept,
        vec![KeyHeld {
            job_id: first.job_id,
            unique_key: "D1".into(),
            held_by: newer.job_id,
        }]
    );
    assert_eq!(
        state_of(&pool, first.job_id.0).await.as_deref(),
        Some("dead_lettered")
    );
    assert_eq!(owner_of(&pool, "D1").await, Some(newer.job_id.0));
    check_uniques(&pool).await;

    // Once the newer job is gone, the retry goes through.
    let mut conn = pool.acquire().await.unwrap();
    PgExecPlane::new(schema())
        .cancel_job(&mut conn, newer.job_id)
        .await
        .unwrap();
    let r = dlq
        .retry(&mut conn, &Selection::One(first.job_id))
        .await
        .unwrap();
    drop(conn);
    assert_eq!(r.retried, vec![first.job_id]);
    assert_eq!(owner_of(&pool, "D1").await, Some(first.job_id.0));
    check_uniques(&pool).await;
}
