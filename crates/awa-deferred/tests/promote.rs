//! Promotion against real PostgreSQL: due work only, and several promoters
//! at once move each job exactly once.

use awa_core::{NewJob, QueueName, SchemaName};
use awa_deferred::{DeferredPlane, PgDeferredPlane};
use awa_ready::{PgReadyPlane, ReadyPlane};

#[tokio::test]
async fn several_promoters_move_each_due_job_once() {
    let db = awa_maint::migrated_test_db().await.unwrap();
    let pool = db.pool().await.unwrap();
    let q = QueueName::new("later").unwrap();
    // Far enough ahead that enqueueing 2,000 jobs on a loaded machine
    // cannot reach it before the "nothing is due yet" check (300 ms could).
    let soon = chrono::Utc::now() + chrono::Duration::seconds(3);
    let far = chrono::Utc::now() + chrono::Duration::hours(1);
    let jobs: Vec<NewJob> = (0..2_000)
        .map(|i| {
            let mut j = NewJob::new(q.clone(), "t", serde_json::json!({ "i": i }));
            j.run_at = Some(if i % 10 == 0 { far } else { soon });
            j
        })
        .collect();
    let mut conn = pool.acquire().await.unwrap();
    let done = PgReadyPlane::new(SchemaName::default_schema())
        .enqueue(&mut conn, &jobs)
        .await
        .unwrap();
    assert!(done.iter().all(|e| e.scheduled));
    let plane = PgDeferredPlane::new(SchemaName::default_schema());
    assert_eq!(
        plane.promote_due(&mut conn, 10_000).await.unwrap(),
        0,
        "nothing is due yet"
    );
    drop(conn);
    let until_due = (soon - chrono::Utc::now()).to_std().unwrap_or_default();
    tokio::time::sleep(until_due + std::time::Duration::from_millis(100)).await;

    let mut promoters = Vec::new();
    for _ in 0..4 {
        let pool = pool.clone();
        promoters.push(tokio::spawn(async move {
            let plane = PgDeferredPlane::new(SchemaName::default_schema());
            let mut moved = 0;
            loop {
                let mut conn = pool.acquire().await.unwrap();
                let n = plane.promote_due(&mut conn, 100).await.unwrap();
                if n == 0 {
                    return moved;
                }
                moved += n;
            }
        }));
    }
    let mut total = 0;
    for p in promoters {
        total += p.await.unwrap();
    }
    assert_eq!(total, 1_800, "every due job moved once, none of the others");
    let ready: i64 = sqlx::query_scalar("SELECT count(DISTINCT job_id) FROM awa.ready_entries")
        .fetch_one(&pool)
        .await
        .unwrap();
    let rows: i64 = sqlx::query_scalar("SELECT count(*) FROM awa.ready_entries")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!((ready, rows), (1_800, 1_800), "no job appended twice");
    let left: i64 = sqlx::query_scalar("SELECT count(*) FROM awa.deferred_jobs")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(left, 200);
}
