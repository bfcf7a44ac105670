//! Activity per queue and minute (`awa.queue_minutes`, the dashboard's
//! charts) against real PostgreSQL: what the health task records from the
//! count deltas, the claim batches and the health measurement; that a
//! second pass does not count twice; that two hours is the limit.

use awa_core::{NewJob, QueueName, SchemaName};
use awa_exec::{ExecPlane, Finish, Frontier, PgExecPlane};
use awa_history::{ActivityMinute, HistoryPlane, PgHistoryPlane};
use awa_ready::{PgReadyPlane, ReadyPlane};
use std::time::Duration;

fn q(name: &str) -> QueueName {
    QueueName::new(name).unwrap()
}

fn total(rows: &[ActivityMinute], queue: &str, f: impl Fn(&ActivityMinute) -> i64) -> i64 {
    rows.iter().filter(|r| r.queue == queue).map(f).sum()
}

#[tokio::test]
async fn the_health_task_records_counts_latency_and_waits_per_minute() {
    let db = awa_maint::migrated_test_db().await.unwrap();
    let pool = db.pool().await.unwrap();
    let schema = SchemaName::default_schema();
    let mut conn = pool.acquire().await.unwrap();
    let ready = PgReadyPlane::new(schema.clone());
    let jobs: Vec<NewJob> = (0..5)
        .map(|i| NewJob::new(q("busy"), "work", serde_json::json!({ "i": i })))
        .collect();
    ready.enqueue(&mut conn, &jobs).await.unwrap();
    ready
        .enqueue(
            &mut conn,
            &[NewJob::new(q("waiting"), "work", serde_json::json!({}))],
        )
        .await
        .unwrap();
    let history = PgHistoryPlane::new(schema.clone());
    assert!(
        history.activity(&mut conn, 60).await.unwrap().is_empty(),
        "nothing recorded before the first pass"
    );

    // Four of busy claimed (in at least one claim call), three completed
    // and one failed.
    let exec = PgExecPlane::new(schema.clone());
    let mut frontier = Frontier::default();
    let mut claimed = Vec::new();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    while claimed.len() < 4 {
        assert!(tokio::time::Instant::now() < deadline, "claim busy");
        claimed.extend(
            exec.claim(
                &mut conn,
                &q("busy"),
                4 - claimed.len() as i32,
                &mut frontier,
                None,
            )
            .await
            .unwrap(),
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let results: Vec<_> = claimed
        .iter()
        .enumerate()
        .map(|(i, c)| {
            let finish = if i < 3 {
                Finish::Complete
            } else {
                Finish::Fail {
                    error: "broken".into(),
                }
            };
            (c.token, finish)
        })
        .collect();
    assert!(
        exec.finish(&mut conn, &results)
            .await
            .unwrap()
            .iter()
            .all(|f| f.accepted)
    );

    history.publish_health(&mut conn).await.unwrap();
    assert!(history.publish_activity(&mut conn).await.unwrap() > 0);
    let rows = history.activity(&mut conn, 60).await.unwrap();
    assert_eq!(total(&rows, "busy", |r| r.completed), 3, "{rows:#?}");
    assert_eq!(total(&rows, "busy", |r| r.failed), 1, "{rows:#?}");
    assert_eq!(total(&rows, "busy", |r| r.cancelled), 0);
    assert!(
        total(&rows, "busy", |r| i64::from(r.claims_sampled)) >= 1,
        "the claim was sampled: {rows:#?}"
    );
    let busy: Vec<&ActivityMinute> = rows.iter().filter(|r| r.queue == "busy").collect();
    assert!(
        busy.iter()
            .any(|r| r.pickup_avg_secs.is_some_and(|s| s >= 0.0)
                && r.pickup_max_secs >= r.pickup_avg_secs)
    );
    // The job nobody claims: its queue's wait is recorded, and no counts.
    let waiting: Vec<&ActivityMinute> = rows.iter().filter(|r| r.queue == "waiting").collect();
    assert_eq!(waiting.len(), 1, "{rows:#?}");
    assert!(waiting[0].wait_max_secs.is_some_and(|s| s >= 0.0));
    assert_eq!(waiting[0].completed + waiting[0].claims_sampled as i64, 0);

    // A second pass recounts the same minutes: nothing doubles.
    history.publish_health(&mut conn).await.unwrap();
    history.publish_activity(&mut conn).await.unwrap();
    let again = history.activity(&mut conn, 60).await.unwrap();
    assert_eq!(total(&again, "busy", |r| r.completed), 3);
    assert_eq!(total(&again, "busy", |r| r.failed), 1);

    // Rows older than two hours go at the next pass; reads are bounded.
    sqlx::query(
        "INSERT INTO awa.queue_minutes (schema_name, queue, minute, completed) \
         VALUES ('awa', 'old', date_trunc('minute', now()) - interval '3 hours', 9), \
                ('awa', 'old', date_trunc('minute', now()) - interval '90 minutes', 7)",
    )
    .execute(&mut *conn)
    .await
    .unwrap();
    history.publish_activity(&mut conn).await.unwrap();
    let kept: Vec<i64> = sqlx::query_scalar(
        "SELECT completed FROM awa.queue_minutes WHERE queue = 'old' ORDER BY minute",
    )
    .fetch_all(&mut *conn)
    .await
    .unwrap();
    assert_eq!(kept, vec![7]);
    assert_eq!(
        total(
            &history.activity(&mut conn, 120).await.unwrap(),
            "old",
            |r| r.completed
        ),
        7
    );
    assert_eq!(
        total(
            &history.activity(&mut conn, 60).await.unwrap(),
            "old",
            |r| r.completed
        ),
        0
    );
    for bad in [0, 121] {
        let err = history.activity(&mut conn, bad).await.unwrap_err();
        assert!(err.to_string().contains("minutes"), "{err}");
    }
}
