//! The fast enqueue (one statement, call_enqueue_append.sql) and the COPY path
//! (`PgReadyPlane::enqueue_copy`) against real PostgreSQL: they write
//! exactly what `{schema}.enqueue` writes, keep input order, notify once
//! per queue, refuse oversized jobs with nothing written, and leave nothing
//! on rollback.

use awa_core::{NewJob, Priority, QueueName, SchemaName};
use awa_ready::{Enqueued, PgReadyPlane, ReadyError, ReadyPlane};
use sqlx::postgres::PgListener;
use sqlx::{Acquire, PgConnection};

fn plane() -> PgReadyPlane {
    PgReadyPlane::new(SchemaName::default_schema())
}

/// A varied batch: three queues (one with queue_meta defaults and four
/// shards), every priority, metadata present or not, max_attempts given or
/// not, and args with every character COPY text format escapes.
fn batch() -> Vec<NewJob> {
    (0..300)
        .map(|i: usize| {
            let q = ["alpha", "beta", "sharded"][i % 3];
            let mut job = NewJob::new(
                QueueName::new(q).unwrap(),
                format!("kind-{}", i % 5),
                serde_json::json!({
                    "i": i,
                    "s": format!("back\\slash\ttab\nnew\rcr \u{1} é \\N {i}"),
                    "nested": {"list": [1, 2, i]},
                }),
            );
            job.priority = Priority::new(1 + (i % 4) as i64).unwrap();
            if i.is_multiple_of(2) {
                job.max_attempts = Some(3 + (i % 7) as i32);
            }
            if i % 3 == 1 {
                job.metadata = Some(serde_json::json!({"trace": format!("t\\{i}\n")}));
            }
            job
        })
        .collect()
}

async fn configure_queues(conn: &mut PgConnection) {
    sqlx::query(
        "INSERT INTO awa.queue_meta (queue, max_attempts, shard_count) VALUES ('sharded', 7, 4)",
    )
    .execute(&mut *conn)
    .await
    .unwrap();
}

/// `{schema}.enqueue` called directly, as call_enqueue.sql does: the
/// reference every fast path must match.
async fn reference_enqueue(conn: &mut PgConnection, jobs: &[NewJob]) -> Vec<Enqueued> {
    let rows: Vec<(i64, bool, bool)> = sqlx::query_as(
        "SELECT job_id, inserted, scheduled FROM awa.enqueue($1, $2, $3, $4, $5, $6, $7, $8)",
    )
    .bind(jobs.iter().map(|j| j.queue.as_str()).collect::<Vec<_>>())
    .bind(jobs.iter().map(|j| j.kind.as_str()).collect::<Vec<_>>())
    .bind(jobs.iter().map(|j| &j.args).collect::<Vec<_>>())
    .bind(jobs.iter().map(|j| j.priority.get()).collect::<Vec<_>>())
    .bind(jobs.iter().map(|j| j.run_at).collect::<Vec<_>>())
    .bind(jobs.iter().map(|j| j.max_attempts).collect::<Vec<_>>())
    .bind(
        jobs.iter()
            .map(|j| j.unique_key.as_deref())
            .collect::<Vec<_>>(),
    )
    .bind(jobs.iter().map(|j| j.metadata.as_ref()).collect::<Vec<_>>())
    .fetch_all(&mut *conn)
    .await
    .unwrap();
    rows.into_iter()
        .map(|(id, inserted, scheduled)| Enqueued {
            job_id: awa_core::JobId(id),
            inserted,
            scheduled,
        })
        .collect()
}

#[derive(Debug, PartialEq)]
struct EntryRow {
    slot: i32,
    queue: String,
    priority: i16,
    shard: i16,
    lane_seq: i64,
    job_id: i64,
    kind: String,
    args: serde_json::Value,
    attempt: i32,
    max_attempts: i32,
    run_lease: i64,
    unique_key: Option<String>,
    metadata: Option<serde_json::Value>,
}

// By hand: sqlx's FromRow derive needs its `derive` feature (a host copy of
// sqlx-postgres and more to compile; docs/development.md "Compile once").
impl<'r> sqlx::FromRow<'r, sqlx::postgres::PgRow> for EntryRow {
    fn from_row(row: &'r sqlx::postgres::PgRow) -> Result<Self, sqlx::Error> {
        use sqlx::Row as _;
        Ok(Self {
            slot: row.try_get("slot")?,
            queue: row.try_get("queue")?,
            priority: row.try_get("priority")?,
            shard: row.try_get("shard")?,
            lane_seq: row.try_get("lane_seq")?,
            job_id: row.try_get("job_id")?,
            kind: row.try_get("kind")?,
            args: row.try_get("args")?,
            attempt: row.try_get("attempt")?,
            max_attempts: row.try_get("max_attempts")?,
            run_lease: row.try_get("run_lease")?,
            unique_key: row.try_get("unique_key")?,
            metadata: row.try_get("metadata")?,
        })
    }
}

/// Every column of ready_entries but the two timestamps, in lane order,
/// and the lane heads.
async fn written(conn: &mut PgConnection) -> (Vec<EntryRow>, Vec<(String, i16, i16)>) {
    let entries = sqlx::query_as(
        "SELECT slot, queue, priority, shard, lane_seq, job_id, kind, args, attempt,
                max_attempts, run_lease, unique_key, metadata
           FROM awa.ready_entries ORDER BY lane_seq",
    )
    .fetch_all(&mut *conn)
    .await
    .unwrap();
    let lanes = sqlx::query_as(
        "SELECT queue, priority, shard FROM awa.lane_heads ORDER BY queue, priority, shard",
    )
    .fetch_all(&mut *conn)
    .await
    .unwrap();
    (entries, lanes)
}

async fn count_jobs(conn: &mut PgConnection) -> i64 {
    sqlx::query_scalar(
        "SELECT (SELECT count(*) FROM awa.ready_entries) + (SELECT count(*) FROM awa.deferred_jobs)",
    )
    .fetch_one(&mut *conn)
    .await
    .unwrap()
}

#[derive(Debug, Clone, Copy)]
enum Path {
    Fast,
    Copy,
}

async fn enqueue_by(
    path: Path,
    conn: &mut PgConnection,
    jobs: &[NewJob],
) -> Result<Vec<Enqueued>, ReadyError> {
    match path {
        Path::Fast => plane().enqueue(conn, jobs).await,
        Path::Copy => plane().enqueue_copy(conn, jobs).await,
    }
}

#[tokio::test]
async fn the_fast_and_copy_paths_write_exactly_what_enqueue_writes() {
    let jobs = batch();
    // Each path in a fresh database: the same sequences, so even ids,
    // positions, slots and shards must be equal.
    let db = awa_maint::migrated_test_db().await.unwrap();
    let pool = db.pool().await.unwrap();
    let mut conn = pool.acquire().await.unwrap();
    configure_queues(&mut conn).await;
    let expected_result = reference_enqueue(&mut conn, &jobs).await;
    let expected = written(&mut conn).await;
    assert_eq!(expected.0.len(), jobs.len());
    // Lane positions follow input order, and the result is in input order.
    let ids: Vec<i64> = expected_result.iter().map(|e| e.job_id.0).collect();
    assert_eq!(
        expected.0.iter().map(|r| r.job_id).collect::<Vec<_>>(),
        ids,
        "reference: lane order = input order"
    );
    // Args travel unchanged (every COPY escape is in them).
    assert_eq!(
        expected
            .0
            .iter()
            .map(|r| r.args.clone())
            .collect::<Vec<_>>(),
        jobs.iter().map(|j| j.args.clone()).collect::<Vec<_>>()
    );
    // Shards and queue defaults were exercised.
    assert!(
        expected
            .0
            .iter()
            .any(|r| r.queue == "sharded" && r.shard > 0)
    );
    assert!(
        expected
            .0
            .iter()
            .any(|r| r.queue == "sharded" && r.max_attempts == 7)
    );
    assert!(
        expected
            .0
            .iter()
            .any(|r| r.queue == "alpha" && r.max_attempts == 25)
    );

    for path in [Path::Fast, Path::Copy] {
        let db = awa_maint::migrated_test_db().await.unwrap();
        let pool = db.pool().await.unwrap();
        let mut conn = pool.acquire().await.unwrap();
        configure_queues(&mut conn).await;
        let result = enqueue_by(path, &mut conn, &jobs).await.unwrap();
        assert_eq!(result, expected_result, "{path:?}: results");
        assert_eq!(written(&mut conn).await, expected, "{path:?}: rows");
        // Timestamps: created_at is the transaction's now(), like enqueue.
        let odd: i64 = sqlx::query_scalar(
            "SELECT count(*) FROM awa.ready_entries WHERE ready_at < created_at",
        )
        .fetch_one(&mut *conn)
        .await
        .unwrap();
        assert_eq!(odd, 0, "{path:?}");
    }
}

#[tokio::test]
async fn inside_a_transaction_rollback_leaves_nothing_and_commit_keeps_order() {
    let db = awa_maint::migrated_test_db().await.unwrap();
    let pool = db.pool().await.unwrap();
    let mut conn = pool.acquire().await.unwrap();
    let jobs = batch();
    for path in [Path::Fast, Path::Copy] {
        let mut tx = conn.begin().await.unwrap();
        enqueue_by(path, &mut tx, &jobs).await.unwrap();
        assert_eq!(count_jobs(&mut tx).await, jobs.len() as i64, "{path:?}");
        tx.rollback().await.unwrap();
        assert_eq!(count_jobs(&mut conn).await, 0, "{path:?}: rolled back");
    }
    // Two calls of each path in one transaction: all of them, in call order.
    let mut tx = conn.begin().await.unwrap();
    let mut ids = Vec::new();
    for path in [Path::Copy, Path::Fast, Path::Copy] {
        ids.extend(
            enqueue_by(path, &mut tx, &jobs[..50])
                .await
                .unwrap()
                .into_iter()
                .map(|e| e.job_id.0),
        );
    }
    tx.commit().await.unwrap();
    let by_position: Vec<i64> =
        sqlx::query_scalar("SELECT job_id FROM awa.ready_entries ORDER BY lane_seq")
            .fetch_all(&mut *conn)
            .await
            .unwrap();
    assert_eq!(by_position, ids);
    let staged: i64 = sqlx::query_scalar("SELECT count(*) FROM pg_temp.awa_enqueue_staging")
        .fetch_one(&mut *conn)
        .await
        .unwrap();
    assert_eq!(staged, 0, "the staging table keeps nothing");
}

/// One NOTIFY per queue per transaction, on both paths. A sentinel sent
/// after the commit marks the end, so no wait is timed.
#[tokio::test]
async fn one_notification_per_queue_per_transaction() {
    let db = awa_maint::migrated_test_db().await.unwrap();
    let pool = db.pool().await.unwrap();
    let mut listener = PgListener::connect_with(&pool).await.unwrap();
    listener.listen("awa_ready").await.unwrap();
    let jobs = batch();
    for path in [Path::Fast, Path::Copy] {
        let mut conn = pool.acquire().await.unwrap();
        let mut tx = conn.begin().await.unwrap();
        enqueue_by(path, &mut tx, &jobs).await.unwrap();
        enqueue_by(path, &mut tx, &jobs[..10]).await.unwrap();
        tx.commit().await.unwrap();
        sqlx::query("SELECT pg_notify('awa_ready', 'sentinel')")
            .execute(&mut *conn)
            .await
            .unwrap();
        let mut got = Vec::new();
        loop {
            let n = listener.recv().await.unwrap();
            if n.payload() == "sentinel" {
                break;
            }
            got.push(n.payload().to_string());
        }
        got.sort();
        assert_eq!(got, vec!["alpha", "beta", "sharded"], "{path:?}");
    }
}

/// Pseudo-random hex, which PostgreSQL cannot compress much.
fn noise(bytes: usize) -> String {
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    (0..bytes)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            char::from_digit((x % 16) as u32, 16).unwrap()
        })
        .collect()
}

fn sized(bytes: usize) -> NewJob {
    NewJob::new(
        QueueName::new("big").unwrap(),
        "t",
        serde_json::json!({ "blob": noise(bytes) }),
    )
}

#[tokio::test]
async fn the_database_limit_refuses_the_call_with_54000_and_nothing_written() {
    let db = awa_maint::migrated_test_db().await.unwrap();
    let pool = db.pool().await.unwrap();
    let mut conn = pool.acquire().await.unwrap();
    sqlx::query("UPDATE awa.substrate_info SET max_job_bytes = 4096")
        .execute(&mut *conn)
        .await
        .unwrap();
    // The Rust-side check is told a larger limit: the database refuses.
    let lax = plane().with_max_job_bytes(1 << 30);
    let mut compressible = sized(10);
    compressible.metadata = Some(serde_json::json!({"pad": "x".repeat(6000)}));
    for (done, path) in [Path::Fast, Path::Copy].into_iter().enumerate() {
        for bad in [sized(5000), compressible.clone()] {
            let jobs = [sized(100), bad, sized(6000)];
            let err = match path {
                Path::Fast => lax.enqueue(&mut conn, &jobs).await,
                Path::Copy => lax.enqueue_copy(&mut conn, &jobs).await,
            }
            .unwrap_err();
            assert!(matches!(err, ReadyError::TooLarge(_)), "{path:?}: {err}");
            let ReadyError::TooLarge(source) = &err else {
                unreachable!()
            };
            let db_err = source.as_database_error().unwrap();
            assert_eq!(db_err.code().as_deref(), Some("54000"), "{path:?}");
            assert!(
                db_err
                    .message()
                    .contains("job 2 of this enqueue (queue big, kind t)")
                    && db_err.message().contains("over the limit of 4096 bytes"),
                "{path:?}: {err}"
            );
            assert_eq!(
                count_jobs(&mut conn).await,
                done as i64,
                "{path:?}: nothing written"
            );
            let lanes: i64 = sqlx::query_scalar("SELECT count(*) FROM awa.lane_heads")
                .fetch_one(&mut *conn)
                .await
                .unwrap();
            assert_eq!(lanes, done.min(1) as i64, "{path:?}: no lane created");
        }
        // Under the limit goes through.
        let ok = match path {
            Path::Fast => lax.enqueue(&mut conn, &[sized(3000)]).await,
            Path::Copy => lax.enqueue_copy(&mut conn, &[sized(3000)]).await,
        }
        .unwrap();
        assert!(ok[0].inserted);
    }
    assert_eq!(count_jobs(&mut conn).await, 2);
}

/// The COPY path hands unique keys and run_at to enqueue: the same
/// uniqueness and scheduling.
#[tokio::test]
async fn enqueue_copy_keeps_uniqueness_and_scheduling() {
    let db = awa_maint::migrated_test_db().await.unwrap();
    let pool = db.pool().await.unwrap();
    let mut conn = pool.acquire().await.unwrap();
    let q = QueueName::new("u").unwrap();
    let mut keyed = NewJob::new(q.clone(), "t", serde_json::json!({}));
    keyed.unique_key = Some("k".into());
    let mut later = NewJob::new(q.clone(), "t", serde_json::json!({}));
    later.run_at = Some(chrono::Utc::now() + chrono::Duration::hours(1));
    let plain = NewJob::new(q, "t", serde_json::json!({}));
    let first = plane()
        .enqueue_copy(&mut conn, &[keyed.clone(), later, plain])
        .await
        .unwrap();
    assert!(first.iter().all(|e| e.inserted));
    assert_eq!(
        first.iter().map(|e| e.scheduled).collect::<Vec<_>>(),
        vec![false, true, false]
    );
    let again = plane().enqueue_copy(&mut conn, &[keyed]).await.unwrap();
    assert_eq!(again[0].job_id, first[0].job_id);
    assert!(!again[0].inserted);
    let deferred: i64 = sqlx::query_scalar("SELECT count(*) FROM awa.deferred_jobs")
        .fetch_one(&mut *conn)
        .await
        .unwrap();
    assert_eq!(deferred, 1);
}
