//! Issue 22 through the client an application uses: `Client::job` shows
//! every attempt (number, times, outcome, error, the runtime that ran it),
//! `Client::retry` brings a failed job back from a queue without the DLQ,
//! and `retry_matching` / `cancel_matching` act on a selection with a dry
//! run first.

use awa::{Client, JobContext, JobError, JobSelection, JobState, Outcome, QueueName, RetryPolicy};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

mod common;
use common::wait_for;

#[derive(Debug, Clone, serde::Serialize, serde::Deserialize, awa::Job)]
#[awa(kind = "flaky", queue = "flaky", max_attempts = 3)]
struct Flaky {
    user: i64,
}

#[tokio::test]
async fn every_attempt_is_shown_and_a_failed_job_is_retried_on_demand() {
    let db = awa::testing::test_db().await.unwrap();
    let pool = db.pool().await.unwrap();
    // Fails every attempt with its own error until told otherwise.
    let healed = Arc::new(AtomicBool::new(false));
    let client = Client::builder(pool.clone())
        .queue("flaky", 2)
        .maintenance(awa::MaintSettings {
            promote_interval: Duration::from_millis(50),
            ..Default::default()
        })
        .retry_policy::<Flaky>(RetryPolicy::fixed(Duration::from_millis(100)))
        .register::<Flaky>({
            let healed = healed.clone();
            move |_job: Flaky, ctx: JobContext| {
                let healed = healed.load(Ordering::SeqCst);
                async move {
                    if healed {
                        Ok(Outcome::Complete)
                    } else {
                        Err(JobError::Retry(format!("failure number {}", ctx.attempt())))
                    }
                }
            }
        })
        .start()
        .await
        .unwrap();

    let id = client.insert(&pool, &Flaky { user: 42 }).await.unwrap().id;
    let job = wait_for(&client, id, JobState::Failed).await;
    let attempts = job.attempts.expect("a one-job read carries the attempts");
    assert_eq!(attempts.len(), 3, "{attempts:#?}");
    let runtimes = {
        let mut conn = pool.acquire().await.unwrap();
        awa::planes::control::runtimes::list(&mut conn)
            .await
            .unwrap()
    };
    for (i, a) in attempts.iter().enumerate() {
        assert_eq!(a.attempt, i as i32 + 1);
        assert_eq!(
            a.error.as_deref(),
            Some(format!("failure number {}", i + 1).as_str())
        );
        assert!(a.started_at.as_ref().unwrap() <= a.ended_at.as_ref().unwrap());
        let rt = a.runtime.as_ref().expect("the runtime that ran it");
        assert_eq!(rt.pid, Some(std::process::id() as i32));
        assert!(
            runtimes
                .iter()
                .any(|r| Some(r.instance_id) == rt.id && r.role == "worker"),
            "{rt:?} is this client's worker: {runtimes:?}"
        );
    }
    let outcomes: Vec<&str> = attempts.iter().map(|a| a.outcome.as_str()).collect();
    assert_eq!(outcomes, ["retried", "retried", "failed"]);

    // The queue has no DLQ; retry brings the job back and it completes.
    healed.store(true, Ordering::SeqCst);
    let done = client
        .retry(id)
        .await
        .unwrap()
        .expect("its failure is kept");
    assert_eq!(done.retried, vec![id]);
    let job = wait_for(&client, id, JobState::Completed).await;
    let outcomes: Vec<String> = job
        .attempts
        .unwrap()
        .into_iter()
        .map(|a| a.outcome)
        .collect();
    assert_eq!(outcomes, ["retried", "retried", "failed", "completed"]);
    assert!(
        client.retry(id).await.unwrap().is_none(),
        "nothing left to retry"
    );

    // By selection: fail two of kind flaky again, count, then retry them;
    // cancel what waits, counted first.
    client.shutdown(Duration::from_secs(5)).await.unwrap();
    let mut conn = pool.acquire().await.unwrap();
    let ids: Vec<awa::JobId> = {
        let jobs = [Flaky { user: 1 }, Flaky { user: 2 }];
        client
            .insert_many(&mut *conn, &jobs)
            .await
            .unwrap()
            .into_iter()
            .map(|i| i.id)
            .collect()
    };
    for &id in &ids {
        assert_eq!(
            client.cancel(id).await.unwrap().as_deref(),
            Some("available")
        );
    }
    let cancelled_user_2 = JobSelection {
        queue: QueueName::new("flaky").unwrap(),
        state: Some(JobState::Cancelled),
        kind: Some("flaky".into()),
        args_contains: Some(serde_json::json!({ "user": 2 })),
    };
    let dry = client
        .retry_matching(&cancelled_user_2, true)
        .await
        .unwrap();
    assert_eq!((dry.matched, dry.retried.len()), (1, 0));
    let done = client
        .retry_matching(&cancelled_user_2, false)
        .await
        .unwrap();
    assert_eq!(done.retried, vec![ids[1]]);
    let waiting = JobSelection {
        queue: QueueName::new("flaky").unwrap(),
        state: None,
        kind: None,
        args_contains: None,
    };
    assert_eq!(
        client
            .cancel_matching(&waiting, true)
            .await
            .unwrap()
            .matched,
        1
    );
    let done = client.cancel_matching(&waiting, false).await.unwrap();
    assert_eq!(done.cancelled.len(), 1);
    assert_eq!(done.cancelled[0].id, ids[1]);
    let wrong = JobSelection {
        state: Some(JobState::Running),
        ..cancelled_user_2
    };
    assert!(client.retry_matching(&wrong, true).await.is_err());
}
