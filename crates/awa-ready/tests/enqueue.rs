//! Enqueue against real PostgreSQL: bad input is refused before anything
//! is written; a batch keeps its order.

use awa_core::{InvalidInput, NewJob, QueueName, SchemaName};
use awa_ready::{PgReadyPlane, ReadyError, ReadyPlane};

fn job(i: usize) -> NewJob {
    NewJob::new(
        QueueName::new("batch").unwrap(),
        "t",
        serde_json::json!({ "i": i }),
    )
}

#[tokio::test]
async fn bad_jobs_are_refused_and_nothing_of_the_batch_is_written() {
    let db = awa_maint::migrated_test_db().await.unwrap();
    let pool = db.pool().await.unwrap();
    let plane = PgReadyPlane::new(SchemaName::default_schema());
    let mut conn = pool.acquire().await.unwrap();
    for bad in [
        NewJob {
            kind: String::new(),
            ..job(0)
        },
        NewJob {
            kind: "bell\u{7}".into(),
            ..job(0)
        },
        NewJob {
            max_attempts: Some(0),
            ..job(0)
        },
        NewJob {
            max_attempts: Some(-3),
            ..job(0)
        },
        NewJob {
            unique_key: Some(String::new()),
            ..job(0)
        },
        // PostgreSQL cannot store a NUL in text or jsonb.
        NewJob {
            unique_key: Some("a\u{0}b".into()),
            ..job(0)
        },
        NewJob {
            args: serde_json::json!({"a": ["x", "y\u{0}"]}),
            ..job(0)
        },
        NewJob {
            metadata: Some(serde_json::json!({"k\u{0}": 1})),
            ..job(0)
        },
    ] {
        let err = plane.enqueue(&mut conn, &[job(1), bad]).await.unwrap_err();
        assert!(
            matches!(
                err,
                ReadyError::Invalid(InvalidInput::Name { .. } | InvalidInput::OutOfRange { .. })
            ),
            "{err}"
        );
    }
    let rows: i64 = sqlx::query_scalar("SELECT count(*) FROM awa.ready_entries")
        .fetch_one(&mut *conn)
        .await
        .unwrap();
    assert_eq!(rows, 0);
}

#[tokio::test]
async fn a_batch_is_appended_in_order_in_one_call() {
    let db = awa_maint::migrated_test_db().await.unwrap();
    let pool = db.pool().await.unwrap();
    let plane = PgReadyPlane::new(SchemaName::default_schema());
    let mut conn = pool.acquire().await.unwrap();
    let jobs: Vec<NewJob> = (0..5_000).map(job).collect();
    let ids: Vec<i64> = plane
        .enqueue(&mut conn, &jobs)
        .await
        .unwrap()
        .iter()
        .map(|e| e.job_id.0)
        .collect();
    let by_position: Vec<i64> =
        sqlx::query_scalar("SELECT job_id FROM awa.ready_entries ORDER BY lane_seq")
            .fetch_all(&mut *conn)
            .await
            .unwrap();
    assert_eq!(by_position, ids, "lane positions follow the batch order");
    let args: Vec<serde_json::Value> =
        sqlx::query_scalar("SELECT args FROM awa.ready_entries ORDER BY lane_seq LIMIT 3")
            .fetch_all(&mut *conn)
            .await
            .unwrap();
    assert_eq!(
        args,
        vec![
            serde_json::json!({"i": 0}),
            serde_json::json!({"i": 1}),
            serde_json::json!({"i": 2})
        ]
    );
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

async fn count_jobs(conn: &mut sqlx::PgConnection) -> i64 {
    sqlx::query_scalar(
        "SELECT (SELECT count(*) FROM awa.ready_entries) + (SELECT count(*) FROM awa.deferred_jobs)",
    )
    .fetch_one(&mut *conn)
    .await
    .unwrap()
}

#[tokio::test]
async fn a_job_over_the_size_limit_is_refused_before_it_is_sent() {
    let db = awa_maint::migrated_test_db().await.unwrap();
    let pool = db.pool().await.unwrap();
    let plane = PgReadyPlane::new(SchemaName::default_schema());
    let mut conn = pool.acquire().await.unwrap();
    let limit = NewJob::DEFAULT_MAX_BYTES;
    let ok = sized(limit - 100);
    assert!(ok.json_bytes() <= limit);
    let mut over = sized(limit);
    over.metadata = Some(serde_json::json!({"m": 1}));
    assert!(over.json_bytes() > limit);
    let err = plane.enqueue(&mut conn, &[job(1), over]).await.unwrap_err();
    assert!(
        matches!(
            err,
            ReadyError::Invalid(InvalidInput::TooLarge { bytes, limit: l, .. })
                if bytes > limit && l == limit
        ),
        "{err}"
    );
    assert!(
        err.to_string().contains("over the limit of 1048576 bytes"),
        "{err}"
    );
    assert_eq!(count_jobs(&mut conn).await, 0, "nothing of the batch");
    // Just under the limit goes through.
    assert!(plane.enqueue(&mut conn, &[ok]).await.unwrap()[0].inserted);
}

/// Raw SQL producers are held to the same limit, by the database: the
/// substrate's max_job_bytes, which can be changed.
#[tokio::test]
async fn the_database_refuses_an_oversized_job_from_any_producer() {
    let db = awa_maint::migrated_test_db().await.unwrap();
    let pool = db.pool().await.unwrap();
    let mut conn = pool.acquire().await.unwrap();
    let raw = "SELECT * FROM awa.enqueue(ARRAY['big', 'big'], ARRAY['t', 't'],
                   ARRAY['{}'::jsonb, jsonb_build_object('blob', repeat('x', $1))],
                   ARRAY[2, 2]::smallint[], ARRAY[NULL, NULL]::timestamptz[],
                   ARRAY[NULL, NULL]::integer[], ARRAY[NULL, $2]::text[],
                   ARRAY[NULL, NULL]::jsonb[])";
    for key in [None, Some("k")] {
        let err = sqlx::query(raw)
            .bind(2_000_000i32)
            .bind(key)
            .fetch_all(&mut *conn)
            .await
            .unwrap_err();
        let db_err = err.as_database_error().expect("a database error");
        assert_eq!(db_err.code().as_deref(), Some("54000"), "{err}");
        assert!(
            db_err.message().contains("job 2 of this enqueue")
                && db_err.message().contains("over the limit of 1048576 bytes"),
            "{err}"
        );
    }
    assert_eq!(count_jobs(&mut conn).await, 0);

    // A smaller substrate limit; the Rust producer told a larger one is
    // still refused, by the database, with its own error.
    sqlx::query("UPDATE awa.substrate_info SET max_job_bytes = 4096")
        .execute(&mut *conn)
        .await
        .unwrap();
    let plane = PgReadyPlane::new(SchemaName::default_schema()).with_max_job_bytes(1 << 30);
    let err = plane.enqueue(&mut conn, &[sized(5000)]).await.unwrap_err();
    assert!(matches!(err, ReadyError::TooLarge(_)), "{err}");
    assert!(err.to_string().contains("max_job_bytes"), "{err}");
    assert!(plane.enqueue(&mut conn, &[sized(3000)]).await.unwrap()[0].inserted);
    assert_eq!(count_jobs(&mut conn).await, 1);
    let too_small = sqlx::query("UPDATE awa.substrate_info SET max_job_bytes = 10")
        .execute(&mut *conn)
        .await;
    assert!(too_small.is_err(), "the limit has a floor");
}
