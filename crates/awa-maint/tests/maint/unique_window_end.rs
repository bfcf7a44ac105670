//! The end of a key spec's window against real PostgreSQL. A key with a
//! period names the window of its transaction's start (`now()`), so a
//! transaction begun in a window may enqueue after the window has ended
//! by the clock. Its key row must still be there: a row a kept state
//! holds is deleted (by finish, cancel or the leader's prune) only a grace
//! of a minute past its window, and a producer that finds no row for a
//! window whose grace has passed (it cannot tell whether a job of that
//! window existed) is refused with 40001 and retries in a new window.
//!
//! The defect these pin down: a finish whose transaction began after the
//! window ended deleted the kept row, and a producer whose transaction
//! began inside the window then made a second job for it (the 32-producer
//! proof in `unique_specs` caught it about one run in five under load).

use awa_core::{JobId, NewJob, QueueName, Unique};
use awa_exec::{ExecPlane, Finish, PgExecPlane};
use awa_ready::{PgReadyPlane, ReadyPlane};
use sqlx::{Connection, PgConnection, PgPool};
use std::time::Duration;

use crate::common;
use common::sqlstate;
use common::{claim_all, schema, setup};

fn spec() -> Unique {
    Unique::by_args().period(Duration::from_secs(1))
}

fn job(n: i64) -> NewJob {
    let mut j = NewJob::new(
        QueueName::new("w").unwrap(),
        "w",
        serde_json::json!({ "n": n }),
    );
    j.unique = Some(spec());
    j
}

async fn window_of_job(pool: &PgPool, id: JobId) -> i64 {
    sqlx::query_scalar(
        "SELECT floor(extract(epoch FROM created_at))::bigint FROM awa.jobs WHERE id = $1",
    )
    .bind(id.0)
    .fetch_one(pool)
    .await
    .unwrap()
}

/// Sleep until the server's clock is 50 ms past the end of `window`.
async fn wait_past(pool: &PgPool, window: i64) {
    loop {
        let past: bool = sqlx::query_scalar(
            "SELECT clock_timestamp() >= to_timestamp($1) + interval '50 milliseconds'",
        )
        .bind(window + 1)
        .fetch_one(pool)
        .await
        .unwrap();
        if past {
            return;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Job A of args n is enqueued in window W, and a producer's transaction
/// begins in W; the window ends; a finish begun after it completes A;
/// then the producer enqueues the same args. Its key is W's: it must be
/// told A (READ COMMITTED) or refused with 40001 (REPEATABLE READ, whose
/// snapshot predates A's finish), never given a second job of W.
async fn late_producer_after_a_late_finish(level: &str) {
    let (db, pool) = setup().await;
    let mut n = 0;
    let (a, window, mut producer) = loop {
        n += 1;
        let a = common::enqueue_jobs(&pool, &[job(n)]).await[0];
        let window = window_of_job(&pool, a).await;
        let mut producer = PgConnection::connect(db.url()).await.unwrap();
        sqlx::query(sqlx::AssertSqlSafe(format!(
            "BEGIN ISOLATION LEVEL {level}"
        )))
        .execute(&mut producer)
        .await
        .unwrap();
        let mine: i64 = sqlx::query_scalar("SELECT floor(extract(epoch FROM now()))::bigint")
            .fetch_one(&mut producer)
            .await
            .unwrap();
        if mine == window {
            break (a, window, producer);
        }
        // A's enqueue and the producer's start straddled a window: again.
        let claimed = claim_all(&pool, "w", 10, 1).await;
        let batch: Vec<_> = claimed
            .iter()
            .map(|c| (c.token, Finish::Complete))
            .collect();
        common::finish_batch(&pool, &batch).await;
    };
    wait_past(&pool, window).await;
    let claimed = claim_all(&pool, "w", 10, 1).await;
    assert_eq!(claimed[0].token.job_id, a);
    let done = common::finish_batch(&pool, &[(claimed[0].token, Finish::Complete)]).await;
    assert!(done[0].accepted);

    let got = PgReadyPlane::new(schema())
        .enqueue(&mut producer, &[job(n)])
        .await;
    match got {
        Ok(got) => {
            sqlx::query("COMMIT").execute(&mut producer).await.unwrap();
            assert_eq!(
                (got[0].job_id, got[0].inserted),
                (a, false),
                "{level}: a producer of window {window} is told its job"
            );
        }
        Err(e) => {
            assert_eq!(
                sqlstate(&e).as_deref(),
                Some("40001"),
                "{level}: only a serialization failure may refuse it: {e}"
            );
            assert_ne!(level, "READ COMMITTED", "{level}: refused: {e}");
            let _ = sqlx::query("ROLLBACK").execute(&mut producer).await;
        }
    }
    let made: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM awa.jobs
          WHERE kind = 'w' AND (args ->> 'n')::bigint = $1
            AND floor(extract(epoch FROM created_at))::bigint = $2",
    )
    .bind(n)
    .bind(window)
    .fetch_one(&pool)
    .await
    .unwrap();
    assert_eq!(made, 1, "{level}: one job of args {n} in window {window}");

    // Within its grace the leader's prune leaves the row alone.
    let mut conn = pool.acquire().await.unwrap();
    assert_eq!(
        awa_control::uniques::prune(&mut conn, 100).await.unwrap(),
        0
    );
    let kept: bool = sqlx::query_scalar(
        "SELECT EXISTS (SELECT 1 FROM awa.job_uniques WHERE job_id = $1 AND finished_at IS NOT NULL)",
    )
    .bind(a.0)
    .fetch_one(&pool)
    .await
    .unwrap();
    assert!(
        kept,
        "{level}: the kept row outlives its window by the grace"
    );
}

#[tokio::test]
async fn a_producer_begun_in_a_window_is_told_its_job_after_the_window_ends_read_committed() {
    late_producer_after_a_late_finish("READ COMMITTED").await;
}

#[tokio::test]
async fn a_producer_begun_in_a_window_is_told_its_job_after_the_window_ends_repeatable_read() {
    late_producer_after_a_late_finish("REPEATABLE READ").await;
}

/// Move job `id`'s key row's window end `ago` into the past (as the owner).
async fn hold_ended(pool: &PgPool, id: JobId, ago: &str) {
    sqlx::query(sqlx::AssertSqlSafe(format!(
        "UPDATE awa.job_uniques SET hold_until = now() - interval '{ago}' WHERE job_id = $1"
    )))
    .bind(id.0)
    .execute(pool)
    .await
    .unwrap();
}

async fn row(pool: &PgPool, id: JobId) -> Option<bool> {
    sqlx::query_scalar("SELECT finished_at IS NOT NULL FROM awa.job_uniques WHERE job_id = $1")
        .bind(id.0)
        .fetch_optional(pool)
        .await
        .unwrap()
}

/// Every deleter waits out the grace: finish, cancel_job and prune keep a
/// row a kept state holds until a minute past its window, and delete it
/// after.
#[tokio::test]
async fn finish_cancel_and_prune_keep_a_held_row_a_minute_past_its_window() {
    let (_db, pool) = setup().await;
    let exec = PgExecPlane::new(schema());
    let hour = || Unique::by_args().period(Duration::from_secs(3600));
    let keep_cancelled = || hour().states([awa_core::JobState::Cancelled]);
    let mk = |n: i64, u: Unique| {
        let mut j = NewJob::new(
            QueueName::new("g").unwrap(),
            "g",
            serde_json::json!({ "n": n }),
        );
        j.unique = Some(u);
        j
    };
    let ids = common::enqueue_jobs(
        &pool,
        &[
            mk(1, hour()),
            mk(2, hour()),
            mk(3, keep_cancelled()),
            mk(4, keep_cancelled()),
        ],
    )
    .await;
    hold_ended(&pool, ids[0], "10 seconds").await;
    hold_ended(&pool, ids[1], "2 minutes").await;
    hold_ended(&pool, ids[2], "10 seconds").await;
    hold_ended(&pool, ids[3], "2 minutes").await;

    let mut conn = pool.acquire().await.unwrap();
    for id in &ids[2..] {
        exec.cancel_job(&mut conn, *id).await.unwrap();
    }
    drop(conn);
    let claimed = claim_all(&pool, "g", 10, 2).await;
    let batch: Vec<_> = claimed
        .iter()
        .map(|c| (c.token, Finish::Complete))
        .collect();
    assert!(
        common::finish_batch(&pool, &batch)
            .await
            .iter()
            .all(|f| f.accepted)
    );
    assert_eq!(
        row(&pool, ids[0]).await,
        Some(true),
        "finish, within the grace"
    );
    assert_eq!(row(&pool, ids[1]).await, None, "finish, past the grace");
    assert_eq!(
        row(&pool, ids[2]).await,
        Some(true),
        "cancel, within the grace"
    );
    assert_eq!(row(&pool, ids[3]).await, None, "cancel, past the grace");

    let mut conn = pool.acquire().await.unwrap();
    assert_eq!(
        awa_control::uniques::prune(&mut conn, 100).await.unwrap(),
        0
    );
    drop(conn);
    hold_ended(&pool, ids[0], "59 seconds").await;
    hold_ended(&pool, ids[2], "61 seconds").await;
    let mut conn = pool.acquire().await.unwrap();
    assert_eq!(
        awa_control::uniques::prune(&mut conn, 100).await.unwrap(),
        1
    );
    drop(conn);
    assert_eq!(row(&pool, ids[0]).await, Some(true));
    assert_eq!(row(&pool, ids[2]).await, None);
}

/// A producer that finds no row for a window whose grace has passed
/// cannot tell whether a job of that window existed: refused with 40001
/// (nothing written), as a snapshot conflict is. Within the grace it
/// takes the key. Keys without a hold (plain keys, retries) never are.
#[tokio::test]
async fn a_key_first_taken_past_its_windows_grace_is_refused_with_40001() {
    let (_db, pool) = setup().await;
    let take = |key: &'static str, until: &'static str| {
        let pool = pool.clone();
        async move {
            let mut tx = pool.begin().await.unwrap();
            let got: Result<Vec<i64>, sqlx::Error> = sqlx::query_scalar(sqlx::AssertSqlSafe(format!(
                "SELECT awa.unique_take(ARRAY[$1], ARRAY[-7]::bigint[],
                        ARRAY[jsonb_build_object('until', floor(extract(epoch FROM now() - interval '{until}')),
                                                 'states', jsonb_build_array('completed'))])"
            )))
            .bind(key)
            .fetch_one(&mut *tx)
            .await;
            let _ = tx.rollback().await;
            got
        }
    };
    assert_eq!(take("fresh", "10 seconds").await.unwrap(), vec![-7]);
    let err = take("late", "2 minutes").await.unwrap_err();
    let code = err
        .as_database_error()
        .and_then(|d| d.code())
        .map(|c| c.into_owned());
    assert_eq!(code.as_deref(), Some("40001"), "{err}");
    assert!(err.to_string().contains("window"), "{err}");

    let mut tx = pool.begin().await.unwrap();
    let plain: Vec<i64> =
        sqlx::query_scalar("SELECT awa.unique_take(ARRAY['plain'], ARRAY[-8]::bigint[], NULL)")
            .fetch_one(&mut *tx)
            .await
            .unwrap();
    assert_eq!(plain, vec![-8]);
    let _ = tx.rollback().await;
    let left: i64 = sqlx::query_scalar("SELECT count(*) FROM awa.job_uniques")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(left, 0);
}
