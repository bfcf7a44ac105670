//! The operator reads (`awa serve`) against real PostgreSQL: a filtered,
//! cursor-paged job list, the oldest waiting job per queue, and terminal
//! outcomes per minute; and the exec plane's attempt progress.

use awa_core::{JobId, JobState, NewJob, QueueName, SchemaName};
use awa_exec::{ExecPlane, Finish, Frontier, PgExecPlane, Progress};
use awa_history::{JobFilter, PgHistoryPlane};
use awa_ready::{PgReadyPlane, ReadyPlane};
use std::time::Duration;

fn q(name: &str) -> QueueName {
    QueueName::new(name).unwrap()
}

#[tokio::test]
async fn pages_ages_throughput_and_progress() {
    let db = awa_maint::migrated_test_db().await.unwrap();
    let pool = db.pool().await.unwrap();
    let schema = SchemaName::default_schema();
    let mut conn = pool.acquire().await.unwrap();
    let jobs: Vec<NewJob> = (0..7)
        .map(|i| {
            let queue = if i < 5 { "a" } else { "b" };
            let kind = if i % 2 == 0 { "even" } else { "odd" };
            NewJob::new(q(queue), kind, serde_json::json!({ "i": i }))
        })
        .collect();
    let ids: Vec<JobId> = PgReadyPlane::new(schema.clone())
        .enqueue(&mut conn, &jobs)
        .await
        .unwrap()
        .into_iter()
        .map(|e| e.job_id)
        .collect();
    let history = PgHistoryPlane::new(schema.clone());

    // Pages of 2 over queue a, newest first, the cursor walking all five.
    let mut walked = Vec::new();
    let mut filter = JobFilter {
        queue: Some(q("a")),
        ..Default::default()
    };
    loop {
        let page = history.list_page(&mut conn, &filter, 2).await.unwrap();
        walked.extend(page.iter().map(|j| j.id));
        match page.last() {
            Some(last) if page.len() == 2 => filter.before = Some(last.id),
            _ => break,
        }
    }
    let mut want: Vec<JobId> = ids[..5].to_vec();
    want.reverse();
    assert_eq!(walked, want);
    let odd = JobFilter {
        kind: Some("odd".into()),
        state: Some(JobState::Available),
        ..Default::default()
    };
    let odd: Vec<JobId> = history
        .list_page(&mut conn, &odd, 100)
        .await
        .unwrap()
        .iter()
        .map(|j| j.id)
        .collect();
    assert_eq!(odd, vec![ids[5], ids[3], ids[1]]);
    let bad = JobFilter {
        kind: Some("bad\u{0}kind".into()),
        ..Default::default()
    };
    assert!(history.list_page(&mut conn, &bad, 10).await.is_err());

    let ages = history.queue_ages(&mut conn).await.unwrap();
    let names: Vec<&str> = ages.iter().map(|(q, _)| q.as_str()).collect();
    assert_eq!(names, vec!["a", "b"]);
    assert!(ages.iter().all(|(_, secs)| *secs >= 0.0));

    // Claim two of b, report progress on one, complete one and fail one.
    let exec = PgExecPlane::new(schema.clone());
    let mut frontier = Frontier::default();
    let mut claimed = Vec::new();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    while claimed.len() < 2 {
        assert!(tokio::time::Instant::now() < deadline, "claim b");
        claimed.extend(
            exec.claim(&mut conn, &q("b"), 2, &mut frontier, None)
                .await
                .unwrap(),
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let progress = Progress {
        percent: Some(40),
        message: Some("halfway-ish".into()),
        checkpoint: Some(serde_json::json!({ "page": 4 })),
    };
    assert!(
        exec.heartbeat(&mut conn, &claimed[0].token, &progress)
            .await
            .unwrap()
    );
    let seen = exec
        .attempt_progress(&mut conn, claimed[0].token.job_id)
        .await
        .unwrap()
        .expect("progress reported");
    assert_eq!(seen.percent, Some(40));
    assert_eq!(seen.message.as_deref(), Some("halfway-ish"));
    assert_eq!(seen.checkpoint, Some(serde_json::json!({ "page": 4 })));
    assert_eq!(seen.run_lease, claimed[0].token.run_lease.0);
    assert!(
        exec.attempt_progress(&mut conn, ids[0])
            .await
            .unwrap()
            .is_none()
    );
    let done = exec
        .finish(
            &mut conn,
            &[
                (claimed[0].token, Finish::Complete),
                (claimed[1].token, Finish::Fail { error: "no".into() }),
            ],
        )
        .await
        .unwrap();
    assert!(done.iter().all(|f| f.accepted));
    let points = history.throughput(&mut conn, 15).await.unwrap();
    let total = |state: JobState| -> i64 {
        points
            .iter()
            .filter(|p| p.queue == "b" && p.state == state)
            .map(|p| p.jobs)
            .sum()
    };
    assert_eq!(total(JobState::Completed), 1);
    assert_eq!(total(JobState::Failed), 1);
    assert!(points.iter().all(|p| p.queue == "b"), "{points:?}");
}
