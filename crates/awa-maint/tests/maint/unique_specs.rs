//! Key specs (`awa_core::Unique`, ADR 10) against real PostgreSQL: one key
//! for one job from every producer, holding after completion until the
//! period ends and only in the states asked for, takeover and pruning past
//! the period, refusals of malformed specs, and the issue's proof: one job
//! per args per period under 32 concurrent producers at READ COMMITTED and
//! REPEATABLE READ, each producer told the job that holds it.

use awa_core::{JobId, JobState, NewJob, QueueName, Unique};
use awa_exec::{ExecPlane, Finish, Frontier, PgExecPlane};
use awa_ready::{Enqueued, PgReadyPlane, ReadyError, ReadyPlane};
use sqlx::{Connection, PgConnection, PgPool};
use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use crate::common;
use common::sqlstate;
use common::{claim_all, schema, setup};

const HOUR: Duration = Duration::from_secs(3600);

fn job(q: &str, kind: &str, args: serde_json::Value, unique: Unique) -> NewJob {
    let mut j = NewJob::new(QueueName::new(q).unwrap(), kind, args);
    j.unique = Some(unique);
    j
}

async fn enqueue(pool: &PgPool, jobs: &[NewJob]) -> Vec<Enqueued> {
    let mut conn = pool.acquire().await.unwrap();
    PgReadyPlane::new(schema())
        .enqueue(&mut conn, jobs)
        .await
        .unwrap()
}

async fn one(pool: &PgPool, j: NewJob) -> Enqueued {
    enqueue(pool, &[j]).await[0]
}

/// `awa.enqueue` as a raw-SQL producer calls it, one job, with a key spec
/// given as JSON text (None: the version-1 call, eight arguments).
async fn raw_sql(
    pool: &PgPool,
    queue: &str,
    kind: &str,
    args: &str,
    key: Option<&str>,
    spec: Option<&str>,
) -> Result<(i64, bool), sqlx::Error> {
    let v1 = "SELECT job_id, inserted FROM awa.enqueue(ARRAY[$1], ARRAY[$2], ARRAY[$3::jsonb], \
              ARRAY[2::smallint], ARRAY[NULL::timestamptz], ARRAY[NULL::integer], ARRAY[$4::text], \
              ARRAY[NULL::jsonb])";
    let v2 = "SELECT job_id, inserted FROM awa.enqueue(ARRAY[$1], ARRAY[$2], ARRAY[$3::jsonb], \
              ARRAY[2::smallint], ARRAY[NULL::timestamptz], ARRAY[NULL::integer], ARRAY[$4::text], \
              ARRAY[NULL::jsonb], ARRAY[$5::jsonb])";
    match spec {
        None => {
            sqlx::query_as(v1)
                .bind(queue)
                .bind(kind)
                .bind(args)
                .bind(key)
                .fetch_one(pool)
                .await
        }
        Some(spec) => {
            sqlx::query_as(v2)
                .bind(queue)
                .bind(kind)
                .bind(args)
                .bind(key)
                .bind(spec)
                .fetch_one(pool)
                .await
        }
    }
}

/// The key row of `job`: (key, hold_until set, hold_states, finished).
async fn key_row(pool: &PgPool, id: JobId) -> Option<(String, bool, Option<Vec<String>>, bool)> {
    sqlx::query_as(
        "SELECT unique_key, hold_until IS NOT NULL, hold_states, finished_at IS NOT NULL
           FROM awa.job_uniques WHERE job_id = $1",
    )
    .bind(id.0)
    .fetch_optional(pool)
    .await
    .unwrap()
}

async fn count(pool: &PgPool, sql: &str) -> i64 {
    sqlx::query_scalar(sqlx::AssertSqlSafe(sql.to_string()))
        .fetch_one(pool)
        .await
        .unwrap()
}

/// Claim and finish every job of `queue` (expecting `n`) with `how`.
async fn finish_all(pool: &PgPool, queue: &str, n: usize, how: Finish) -> Vec<JobId> {
    let claimed = claim_all(pool, queue, 100, n).await;
    assert_eq!(claimed.len(), n, "claimed from {queue}");
    let batch: Vec<_> = claimed.iter().map(|c| (c.token, how.clone())).collect();
    let done = common::finish_batch(pool, &batch).await;
    assert!(done.iter().all(|f| f.accepted), "{done:?}");
    claimed.iter().map(|c| c.token.job_id).collect()
}

/// The uniqueness invariants with key specs, over the whole database: an
/// unfinished key row names a live job carrying that key, a finished one a
/// terminal job in a state it keeps (dead-lettered counts as failed), and
/// no two unfinished jobs share a key.
async fn check_keys(pool: &PgPool) {
    let bad: Vec<(String, i64, Option<String>, bool)> = sqlx::query_as(
        "SELECT u.unique_key, u.job_id, j.state, u.finished_at IS NOT NULL
           FROM awa.job_uniques u
           LEFT JOIN awa.jobs j ON j.id = u.job_id
          WHERE CASE WHEN u.finished_at IS NULL
                     THEN j.state IS NULL OR j.state IN ('completed', 'failed', 'cancelled', 'dead_lettered')
                     ELSE j.state IS NOT NULL AND NOT (
                          CASE j.state WHEN 'dead_lettered' THEN 'failed' ELSE j.state END = ANY (u.hold_states))
                END",
    )
    .fetch_all(pool)
    .await
    .unwrap();
    assert!(
        bad.is_empty(),
        "key rows that do not match their job: {bad:?}"
    );
    let shared: Vec<(String, i64)> = sqlx::query_as(
        "SELECT k.unique_key, count(DISTINCT k.id) FROM (
             SELECT l.id, e.unique_key FROM awa.live_jobs l JOIN awa.ready_entries e ON e.job_id = l.id
              WHERE e.unique_key IS NOT NULL
             UNION ALL
             SELECT d.job_id, d.unique_key FROM awa.deferred_jobs d WHERE d.unique_key IS NOT NULL) k
          GROUP BY k.unique_key HAVING count(DISTINCT k.id) > 1",
    )
    .fetch_all(pool)
    .await
    .unwrap();
    assert!(
        shared.is_empty(),
        "unfinished jobs sharing a key: {shared:?}"
    );
}

#[tokio::test]
async fn every_producer_derives_one_key_for_one_job() {
    let (_db, pool) = setup().await;
    let by_args = || Unique::by_args().period(HOUR);
    let first = one(
        &pool,
        job(
            "u",
            "refresh",
            serde_json::json!({"account": 1, "note": "a"}),
            by_args(),
        ),
    )
    .await;
    assert!(first.inserted);

    // Raw SQL, the members in another order and other whitespace, the spec
    // as the Rust client sends it: the same job.
    let spec = by_args().to_json().to_string();
    let raw = raw_sql(
        &pool,
        "u",
        "refresh",
        r#"{ "note":"a",  "account":1 }"#,
        None,
        Some(&spec),
    )
    .await
    .unwrap();
    assert_eq!(raw, (first.job_id.0, false), "raw SQL sees the Rust job");
    // Other args, another kind: other jobs.
    let other = raw_sql(
        &pool,
        "u",
        "refresh",
        r#"{"account": 2}"#,
        None,
        Some(&spec),
    )
    .await
    .unwrap();
    assert!(other.1);
    let kind = one(
        &pool,
        job(
            "u",
            "report",
            serde_json::json!({"account": 1, "note": "a"}),
            by_args(),
        ),
    )
    .await;
    assert!(kind.inserted, "the kind is always part of the key");

    // Version-1 calls (eight arguments) are unchanged.
    let v1 = raw_sql(&pool, "u", "plain", "{}", Some("k1"), None)
        .await
        .unwrap();
    assert!(v1.1);
    assert_eq!(
        raw_sql(&pool, "u", "plain", "{}", Some("k1"), None)
            .await
            .unwrap(),
        (v1.0, false)
    );

    // Without the queue in the key, another queue is a duplicate; with it,
    // not.
    let elsewhere = one(
        &pool,
        job(
            "u2",
            "refresh",
            serde_json::json!({"account": 1, "note": "a"}),
            by_args(),
        ),
    )
    .await;
    assert_eq!(
        (elsewhere.job_id, elsewhere.inserted),
        (first.job_id, false)
    );
    let q1 = one(
        &pool,
        job(
            "u",
            "q",
            serde_json::json!({}),
            Unique::by_args().with_queue(),
        ),
    )
    .await;
    let q2 = one(
        &pool,
        job(
            "u2",
            "q",
            serde_json::json!({}),
            Unique::by_args().with_queue(),
        ),
    )
    .await;
    assert!(q1.inserted && q2.inserted && q1.job_id != q2.job_id);

    // By fields: the other fields do not matter; missing is null.
    let by_tenant = || Unique::by_fields(["tenant"]);
    let t1 = one(
        &pool,
        job(
            "u",
            "sync",
            serde_json::json!({"tenant": "t1", "x": 1}),
            by_tenant(),
        ),
    )
    .await;
    let t1b = one(
        &pool,
        job(
            "u",
            "sync",
            serde_json::json!({"x": 2, "tenant": "t1"}),
            by_tenant(),
        ),
    )
    .await;
    let t2 = one(
        &pool,
        job(
            "u",
            "sync",
            serde_json::json!({"tenant": "t2"}),
            by_tenant(),
        ),
    )
    .await;
    let none = one(
        &pool,
        job("u", "sync", serde_json::json!({"x": 3}), by_tenant()),
    )
    .await;
    let null = one(
        &pool,
        job(
            "u",
            "sync",
            serde_json::json!({"tenant": null}),
            by_tenant(),
        ),
    )
    .await;
    assert!(t1.inserted && t2.inserted && none.inserted);
    assert_eq!((t1b.job_id, t1b.inserted), (t1.job_id, false));
    assert_eq!((null.job_id, null.inserted), (none.job_id, false));
    // By args and by the same field never share a key.
    let whole = one(
        &pool,
        job(
            "u",
            "sync",
            serde_json::json!({"tenant": "t3"}),
            Unique::by_args(),
        ),
    )
    .await;
    let field = one(
        &pool,
        job(
            "u",
            "sync",
            serde_json::json!({"tenant": "t3"}),
            by_tenant(),
        ),
    )
    .await;
    assert!(whole.inserted && field.inserted);

    // By kind alone, and the caller's key as one more part.
    let k1 = one(
        &pool,
        job(
            "u",
            "nightly",
            serde_json::json!({"a": 1}),
            Unique::by_kind(),
        ),
    )
    .await;
    let k2 = one(
        &pool,
        job(
            "u",
            "nightly",
            serde_json::json!({"a": 2}),
            Unique::by_kind(),
        ),
    )
    .await;
    assert_eq!((k2.job_id, k2.inserted), (k1.job_id, false));
    let mut keyed = job("u", "nightly", serde_json::json!({}), Unique::by_kind());
    keyed.unique_key = Some("eu".into());
    let with_key = one(&pool, keyed.clone()).await;
    assert!(
        with_key.inserted,
        "the key is a part: another key than none"
    );
    assert_eq!(one(&pool, keyed).await.job_id, with_key.job_id);

    // The job carries the derived key it holds.
    let (key, hold, states, finished) = key_row(&pool, first.job_id).await.unwrap();
    assert!(
        key.starts_with("u1:refresh:") && key.len() == "u1:refresh:".len() + 64,
        "{key}"
    );
    assert!(hold && !finished);
    assert_eq!(states, Some(vec!["completed".to_string()]));
    let carried: String =
        sqlx::query_scalar("SELECT unique_key FROM awa.ready_entries WHERE job_id = $1")
            .bind(first.job_id.0)
            .fetch_one(&pool)
            .await
            .unwrap();
    assert_eq!(carried, key);
    // Several in one call: the first wins, the rest report it.
    let batch = enqueue(
        &pool,
        &[
            job("u", "b", serde_json::json!({"n": 1}), Unique::by_args()),
            job("u", "b", serde_json::json!({"n": 2}), Unique::by_args()),
            NewJob::new(
                QueueName::new("u").unwrap(),
                "b",
                serde_json::json!({"n": 1}),
            ),
            job("u", "b", serde_json::json!({"n": 1}), Unique::by_args()),
        ],
    )
    .await;
    assert!(batch[0].inserted && batch[1].inserted && batch[2].inserted);
    assert_eq!(
        (batch[3].job_id, batch[3].inserted),
        (batch[0].job_id, false)
    );
    check_keys(&pool).await;
}

#[tokio::test]
async fn malformed_specs_are_refused_by_the_database_and_nothing_is_written() {
    let (_db, pool) = setup().await;
    for (spec, says) in [
        (r#"["args"]"#, "must be a JSON object"),
        (
            r#"{"by": ["args"], "perod": 60}"#,
            r#"unknown member "perod""#,
        ),
        (r#"{"by": "args"}"#, r#""by" must be an array"#),
        (r#"{"by": ["arguments"]}"#, r#"names "arguments" in "by""#),
        (r#"{"by": ["args."]}"#, r#"names "args." in "by""#),
        (r#"{"by": [1]}"#, r#"names 1 in "by""#),
        (r#"{"period": 0}"#, "whole seconds from 1 to 31622400"),
        (r#"{"period": 1.5}"#, "whole seconds from 1 to 31622400"),
        (
            r#"{"period": 31622401}"#,
            "whole seconds from 1 to 31622400",
        ),
        (r#"{"period": "10m"}"#, "must be a number of seconds"),
        (
            r#"{"period": 60, "states": ["running"]}"#,
            r#"names "running" in "states""#,
        ),
        (
            r#"{"period": 60, "states": "completed"}"#,
            r#""states" must be an array"#,
        ),
        (r#"{"states": ["completed"]}"#, "has no period"),
    ] {
        let err = raw_sql(&pool, "bad", "k", "{}", None, Some(spec))
            .await
            .expect_err(spec);
        let db = err.as_database_error().expect("a database error");
        assert_eq!(db.code().as_deref(), Some("22023"), "{spec}: {db}");
        assert!(db.message().contains(says), "{spec}: {}", db.message());
    }
    assert_eq!(count(&pool, "SELECT count(*) FROM awa.jobs").await, 0);
    assert_eq!(
        count(&pool, "SELECT count(*) FROM awa.job_uniques").await,
        0
    );
    // What the database accepts at the edges.
    for (i, spec) in [
        r#"{}"#,
        r#"{"by": null, "period": null, "states": null}"#,
        r#"{"by": ["kind"], "period": 31622400, "states": []}"#,
        r#"{"by": ["args.a", "args.a"], "period": 1, "states": ["failed", "cancelled", "completed"]}"#,
    ]
    .into_iter()
    .enumerate()
    {
        let kind = format!("k{i}");
        let (_, inserted) = raw_sql(&pool, "ok", &kind, r#"{"a": 1}"#, None, Some(spec))
            .await
            .unwrap_or_else(|e| panic!("{spec}: {e}"));
        assert!(inserted, "{spec}");
    }
}

#[tokio::test]
async fn a_finished_job_keeps_its_key_in_the_chosen_states_until_the_period_ends() {
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
    let exec = PgExecPlane::new(schema());

    // Default states with a period: completed keeps, failed releases.
    let done = one(
        &pool,
        job(
            "c",
            "k",
            serde_json::json!({"n": 1}),
            Unique::by_args().period(HOUR),
        ),
    )
    .await;
    finish_all(&pool, "c", 1, Finish::Complete).await;
    let (_, _, _, finished) = key_row(&pool, done.job_id).await.expect("kept");
    assert!(finished);
    let again = one(
        &pool,
        job(
            "c",
            "k",
            serde_json::json!({"n": 1}),
            Unique::by_args().period(HOUR),
        ),
    )
    .await;
    assert_eq!(
        (again.job_id, again.inserted),
        (done.job_id, false),
        "completed within the period"
    );

    let mut failing = job(
        "f",
        "f",
        serde_json::json!({"n": 1}),
        Unique::by_args().period(HOUR),
    );
    failing.max_attempts = Some(1);
    let failed = one(&pool, failing.clone()).await;
    finish_all(&pool, "f", 1, Finish::Fail { error: "x".into() }).await;
    assert_eq!(
        key_row(&pool, failed.job_id).await,
        None,
        "failed is not kept by default"
    );
    assert!(one(&pool, failing).await.inserted);

    // states [] with a period: released at completion.
    let bare = one(
        &pool,
        job(
            "e",
            "e",
            serde_json::json!({}),
            Unique::by_args().period(HOUR).states([]),
        ),
    )
    .await;
    finish_all(&pool, "e", 1, Finish::Complete).await;
    assert_eq!(key_row(&pool, bare.job_id).await, None);

    // A plain key is released as ever.
    let mut plain = NewJob::new(QueueName::new("p").unwrap(), "p", serde_json::json!({}));
    plain.unique_key = Some("plain".into());
    let p = one(&pool, plain).await;
    finish_all(&pool, "p", 1, Finish::Complete).await;
    assert_eq!(key_row(&pool, p.job_id).await, None);

    // Cancelled kept: waiting (cancel_job) and running (through finish).
    let keep_cancelled = || Unique::by_args().period(HOUR).states([JobState::Cancelled]);
    let waiting = one(
        &pool,
        job("x", "x", serde_json::json!({"n": 1}), keep_cancelled()),
    )
    .await;
    let mut conn = pool.acquire().await.unwrap();
    assert_eq!(
        exec.cancel_job(&mut conn, waiting.job_id)
            .await
            .unwrap()
            .as_deref(),
        Some("available")
    );
    drop(conn);
    assert!(key_row(&pool, waiting.job_id).await.unwrap().3);
    let dup = one(
        &pool,
        job("x", "x", serde_json::json!({"n": 1}), keep_cancelled()),
    )
    .await;
    assert_eq!((dup.job_id, dup.inserted), (waiting.job_id, false));
    let mut scheduled = job("x", "x", serde_json::json!({"n": 3}), keep_cancelled());
    scheduled.run_at = Some(chrono::Utc::now() + chrono::Duration::hours(1));
    let scheduled = one(&pool, scheduled).await;
    assert!(scheduled.scheduled);
    let mut conn = pool.acquire().await.unwrap();
    assert_eq!(
        exec.cancel_job(&mut conn, scheduled.job_id)
            .await
            .unwrap()
            .as_deref(),
        Some("scheduled")
    );
    drop(conn);
    assert!(key_row(&pool, scheduled.job_id).await.unwrap().3);
    let running = one(
        &pool,
        job("x", "x", serde_json::json!({"n": 2}), keep_cancelled()),
    )
    .await;
    let claimed = claim_all(&pool, "x", 10, 1).await;
    assert_eq!(claimed[0].token.job_id, running.job_id);
    let mut conn = pool.acquire().await.unwrap();
    assert_eq!(
        exec.cancel_job(&mut conn, running.job_id)
            .await
            .unwrap()
            .as_deref(),
        Some("running")
    );
    drop(conn);
    assert!(key_row(&pool, running.job_id).await.unwrap().3);
    // ... but a completion is not kept by that spec.
    let completes = one(
        &pool,
        job("x", "x", serde_json::json!({"n": 9}), keep_cancelled()),
    )
    .await;
    finish_all(&pool, "x", 1, Finish::Complete).await;
    assert_eq!(key_row(&pool, completes.job_id).await, None);

    // Failed kept, through the dead-letter queue: a retry takes its own row
    // over, with its hold, and duplicates are told the retried job.
    let keep_failed = || Unique::by_args().period(HOUR).states([JobState::Failed]);
    let mut dead = job("dq", "dq", serde_json::json!({"n": 1}), keep_failed());
    dead.max_attempts = Some(1);
    let dead = one(&pool, dead).await;
    let got = finish_all(&pool, "dq", 1, Finish::Fail { error: "x".into() }).await;
    assert_eq!(got, vec![dead.job_id]);
    let (key, _, states, finished) = key_row(&pool, dead.job_id).await.expect("kept");
    assert!(finished);
    assert_eq!(states, Some(vec!["failed".to_string()]));
    assert_eq!(
        one(
            &pool,
            job("dq", "dq", serde_json::json!({"n": 1}), keep_failed())
        )
        .await
        .job_id,
        dead.job_id
    );
    let mut conn = pool.acquire().await.unwrap();
    let r = awa_dlq::DlqPlane::retry(
        &awa_dlq::PgDlqPlane::new(schema()),
        &mut conn,
        &awa_dlq::Selection::One(dead.job_id),
    )
    .await
    .unwrap();
    drop(conn);
    assert_eq!(r.retried, vec![dead.job_id]);
    assert_eq!(
        key_row(&pool, dead.job_id).await,
        Some((key, true, Some(vec!["failed".to_string()]), false)),
        "taken over by the retried job, hold kept"
    );
    let dup = one(
        &pool,
        job("dq", "dq", serde_json::json!({"n": 1}), keep_failed()),
    )
    .await;
    assert_eq!((dup.job_id, dup.inserted), (dead.job_id, false));
    check_keys(&pool).await;
}

/// The end of a period, simulated by moving a kept row's hold_until into
/// the past (the key's window is the same, so only the row's expiry
/// decides): the next enqueue takes the row over, and prune deletes rows
/// past their period and nothing else.
#[tokio::test]
async fn a_key_past_its_period_is_taken_over_and_pruned() {
    let (_db, pool) = setup().await;
    let spec = || Unique::by_args().period(HOUR);
    let old = one(&pool, job("t", "k", serde_json::json!({"n": 1}), spec())).await;
    let other = one(&pool, job("t", "k", serde_json::json!({"n": 2}), spec())).await;
    let live = one(&pool, job("t", "k", serde_json::json!({"n": 3}), spec())).await;
    let done = finish_all(&pool, "t", 3, Finish::Complete).await;
    assert_eq!(done.len(), 3);
    let expire = |id: JobId| {
        let pool = pool.clone();
        async move {
            sqlx::query(
                "UPDATE awa.job_uniques SET hold_until = now() - interval '2 minutes' WHERE job_id = $1",
            )
            .bind(id.0)
            .execute(&pool)
            .await
            .unwrap();
        }
    };
    expire(old.job_id).await;
    expire(other.job_id).await;
    let renewed = one(&pool, job("t", "k", serde_json::json!({"n": 1}), spec())).await;
    assert!(renewed.inserted, "a row past its period holds nothing");
    let (_, hold, _, finished) = key_row(&pool, renewed.job_id).await.expect("taken over");
    assert!(hold && !finished);
    assert_eq!(key_row(&pool, old.job_id).await, None);
    let still = one(&pool, job("t", "k", serde_json::json!({"n": 3}), spec())).await;
    assert_eq!((still.job_id, still.inserted), (live.job_id, false));

    // Prune: only `other` is finished and past its period.
    let mut conn = pool.acquire().await.unwrap();
    assert_eq!(
        awa_control::uniques::prune(&mut conn, 100).await.unwrap(),
        1
    );
    assert_eq!(
        awa_control::uniques::prune(&mut conn, 100).await.unwrap(),
        0
    );
    drop(conn);
    assert_eq!(key_row(&pool, other.job_id).await, None);
    assert!(key_row(&pool, live.job_id).await.is_some());
    assert!(key_row(&pool, renewed.job_id).await.is_some());
    // The leader's task is the same statement.
    let task = awa_maint::tasks::UniquePrune::new(Duration::from_secs(60));
    expire(live.job_id).await;
    let outcome = awa_maint::tasks::MaintTask::run_once(&task, &pool)
        .await
        .unwrap();
    assert_eq!(outcome, awa_maint::tasks::TaskOutcome::Worked { items: 1 });
    check_keys(&pool).await;
}

/// One producer's view of one enqueue: its args, the window of its
/// transaction (by its now()), and what it was told.
#[derive(Debug, Clone, Copy)]
struct Seen {
    n: i64,
    window: i64,
    got: Enqueued,
}

const PERIOD_SECS: u64 = 2;

/// The issue's proof: 32 producers, each on its own connection, enqueue
/// one of 4 args values in a tight loop, one job per transaction at
/// `level`, with `unique(by_args, period = 2s)` (completed jobs keep the
/// key), while a worker completes whatever it can claim. Whatever the
/// interleaving: exactly one job per args per window, and every producer
/// is told that job (inserted or duplicate). REPEATABLE READ producers
/// retry on 40001, as the contract says.
async fn one_job_per_args_per_period(level: &'static str) {
    const PRODUCERS: usize = 32;
    const RUN: Duration = Duration::from_secs(5);
    let (db, pool) = setup().await;
    let spec = Unique::by_args().period(Duration::from_secs(PERIOD_SECS));
    let until = tokio::time::Instant::now() + RUN;

    let mut producers = Vec::new();
    for p in 0..PRODUCERS {
        let url = db.url().to_string();
        let spec = spec.clone();
        producers.push(tokio::spawn(async move {
            let mut conn = PgConnection::connect(&url).await.unwrap();
            let mut seen = Vec::new();
            let mut retries = 0usize;
            let mut i = p;
            while tokio::time::Instant::now() < until {
                let n = (i % 4) as i64;
                i += 1;
                let j = job("tick", "tick", serde_json::json!({"n": n}), spec.clone());
                loop {
                    match attempt(&mut conn, level, &j).await {
                        Ok((window, got)) => {
                            seen.push(Seen { n, window, got });
                            break;
                        }
                        Err(e) if sqlstate(&e).as_deref() == Some("40001") => {
                            let _ = sqlx::query("ROLLBACK").execute(&mut conn).await;
                            retries += 1;
                        }
                        Err(e) => panic!("{level}: {e}"),
                    }
                }
            }
            (seen, retries)
        }));
    }
    let worker = {
        let pool = pool.clone();
        tokio::spawn(async move {
            let exec = PgExecPlane::new(schema());
            let mut conn = pool.acquire().await.unwrap().detach();
            let mut frontier = Frontier::default();
            let mut completed = 0usize;
            while tokio::time::Instant::now() < until {
                let got = exec
                    .claim(
                        &mut conn,
                        &QueueName::new("tick").unwrap(),
                        16,
                        &mut frontier,
                        None,
                    )
                    .await
                    .unwrap();
                if got.is_empty() {
                    tokio::time::sleep(Duration::from_millis(5)).await;
                    continue;
                }
                let batch: Vec<_> = got.iter().map(|c| (c.token, Finish::Complete)).collect();
                completed += exec
                    .finish(&mut conn, &batch)
                    .await
                    .unwrap()
                    .iter()
                    .filter(|f| f.accepted)
                    .count();
            }
            completed
        })
    };

    let mut seen = Vec::new();
    let mut retries = 0;
    for t in producers {
        let (s, r) = t.await.unwrap();
        seen.extend(s);
        retries += r;
    }
    let completed = worker.await.unwrap();

    // Every job the load made, by args and window of its created_at (the
    // transaction start its key was derived from).
    let jobs: Vec<(i64, i64, i64)> = sqlx::query_as(sqlx::AssertSqlSafe(format!(
        "SELECT id, (args ->> 'n')::bigint, floor(extract(epoch FROM created_at) / {PERIOD_SECS})::bigint
           FROM awa.jobs WHERE kind = 'tick'"
    )))
    .fetch_all(&pool)
    .await
    .unwrap();
    let mut by_window: BTreeMap<(i64, i64), Vec<i64>> = BTreeMap::new();
    for (id, n, window) in &jobs {
        by_window.entry((*n, *window)).or_default().push(*id);
    }
    let twice: Vec<_> = by_window.iter().filter(|(_, ids)| ids.len() > 1).collect();
    assert!(
        twice.is_empty(),
        "{level}: more than one job per args and window: {twice:?}"
    );
    let windows: std::collections::BTreeSet<i64> = seen.iter().map(|s| s.window).collect();
    let inserted = seen.iter().filter(|s| s.got.inserted).count();
    eprintln!(
        "{level}: {} enqueues, {inserted} inserted, {} duplicates, {retries} retried on 40001, \
         {completed} completed, windows {windows:?}",
        seen.len(),
        seen.len() - inserted
    );
    assert_eq!(
        inserted,
        jobs.len(),
        "{level}: every job made was reported inserted once"
    );
    assert!(
        seen.len() > 4 * inserted && completed > 0,
        "{level}: the load made too few duplicates to prove anything"
    );
    // Each producer was told the one job of its args and window.
    let owner: HashMap<(i64, i64), i64> = by_window.iter().map(|(k, ids)| (*k, ids[0])).collect();
    let wrong: Vec<_> = seen
        .iter()
        .filter(|s| owner.get(&(s.n, s.window)) != Some(&s.got.job_id.0))
        .collect();
    assert!(
        wrong.is_empty(),
        "{level}: producers told another job: {wrong:?}"
    );
    check_keys(&pool).await;
}

/// One job in one transaction at `level`; the window of its now().
async fn attempt(
    conn: &mut PgConnection,
    level: &str,
    j: &NewJob,
) -> Result<(i64, Enqueued), ReadyError> {
    sqlx::query(sqlx::AssertSqlSafe(format!(
        "BEGIN ISOLATION LEVEL {level}"
    )))
    .execute(&mut *conn)
    .await
    .map_err(ReadyError::Database)?;
    let window: i64 = sqlx::query_scalar(sqlx::AssertSqlSafe(format!(
        "SELECT floor(extract(epoch FROM now()) / {PERIOD_SECS})::bigint"
    )))
    .fetch_one(&mut *conn)
    .await
    .map_err(ReadyError::Database)?;
    let got = PgReadyPlane::new(schema())
        .enqueue(conn, std::slice::from_ref(j))
        .await?[0];
    sqlx::query("COMMIT")
        .execute(&mut *conn)
        .await
        .map_err(ReadyError::Database)?;
    Ok((window, got))
}

#[tokio::test]
async fn one_job_per_args_per_period_under_32_producers_read_committed() {
    one_job_per_args_per_period("READ COMMITTED").await;
}

#[tokio::test]
async fn one_job_per_args_per_period_under_32_producers_repeatable_read() {
    one_job_per_args_per_period("REPEATABLE READ").await;
}
