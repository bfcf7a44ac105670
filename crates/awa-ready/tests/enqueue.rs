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
