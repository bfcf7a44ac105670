//! Job timeouts (issue 23) in a running worker: a handler still running at
//! its timeout is dropped (its future, so its task) and the attempt fails
//! with a timeout error in the attempt history, within the timeout plus a
//! second, and the retry policy applies; the kind's default comes from
//! `#[awa(timeout = ...)]` or the builder, a job's own from `InsertOpts`,
//! and a job's own wins. `work_one` applies the same deadline.

use awa::{
    Client, HandlerResult, InsertOpts, JobContext, JobState, Outcome, RetryPolicy,
    planes::history::AttemptRecord,
};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;
use tokio::sync::mpsc;

mod common;

/// Sleeps `ms` (an hour by default), reporting when it starts and when
/// its future is dropped.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize, awa::Job)]
#[awa(kind = "slow", queue = "timeouts", max_attempts = 2, timeout = "1s")]
struct Slow {
    ms: u64,
}

#[derive(Debug, PartialEq)]
enum Seen {
    Started(i32),
    Dropped(i32),
}

struct DropGuard(i32, mpsc::UnboundedSender<Seen>);

impl Drop for DropGuard {
    fn drop(&mut self) {
        let _ = self.1.send(Seen::Dropped(self.0));
    }
}

fn slow(
    tx: mpsc::UnboundedSender<Seen>,
) -> impl Fn(Slow, JobContext) -> std::pin::Pin<Box<dyn Future<Output = HandlerResult> + Send>>
+ Send
+ Sync
+ 'static {
    move |job: Slow, ctx: JobContext| {
        let tx = tx.clone();
        Box::pin(async move {
            let _ = tx.send(Seen::Started(ctx.attempt()));
            let _guard = DropGuard(ctx.attempt(), tx);
            tokio::time::sleep(Duration::from_millis(job.ms)).await;
            Ok(Outcome::Complete)
        })
    }
}

/// The attempts of job `id` once it is in `state`.
async fn wait_for(client: &Client, id: awa::JobId, state: JobState) -> Vec<AttemptRecord> {
    common::wait_for(client, id, state)
        .await
        .attempts
        .expect("a one-job read carries the attempts")
}

/// Every attempt ended by its timeout: a timeout error, recorded within
/// the timeout plus one second of its claim.
fn assert_timed_out(attempts: &[AttemptRecord], timeout: Duration, outcomes: &[&str]) {
    assert_eq!(attempts.len(), outcomes.len(), "{attempts:#?}");
    for (a, outcome) in attempts.iter().zip(outcomes) {
        assert_eq!(a.outcome, *outcome, "{a:?}");
        let error = a.error.as_deref().unwrap_or_default();
        assert!(error.starts_with(awa::timeout::ERROR_PREFIX), "{a:?}");
        let time = |t: &Option<awa::DbTime>| t.as_ref().and_then(|t| t.time()).unwrap();
        let ran = (time(&a.ended_at) - time(&a.started_at)).to_std().unwrap();
        assert!(ran >= timeout, "stopped before its timeout: {a:?}");
        assert!(
            ran <= timeout + Duration::from_secs(1),
            "stopped {ran:?} after its claim, over the timeout plus one second: {a:?}"
        );
    }
}

#[tokio::test]
async fn a_job_over_its_kinds_timeout_fails_with_a_timeout_error_and_is_retried() {
    let db = awa::testing::test_db().await.unwrap();
    let pool = db.pool().await.unwrap();
    let (tx, mut rx) = mpsc::unbounded_channel();
    let policy_calls = Arc::new(AtomicUsize::new(0));
    let client = Client::builder(pool.clone())
        .queue("timeouts", 2)
        .maintenance(awa::MaintSettings {
            promote_interval: Duration::from_millis(50),
            ..Default::default()
        })
        .retry_policy::<Slow>(RetryPolicy::custom({
            let calls = policy_calls.clone();
            move |_| {
                calls.fetch_add(1, Ordering::SeqCst);
                Duration::from_millis(100)
            }
        }))
        .register::<Slow>(slow(tx))
        .start()
        .await
        .unwrap();

    let id = client
        .insert(&pool, &Slow { ms: 3_600_000 })
        .await
        .unwrap()
        .id;
    let attempts = wait_for(&client, id, JobState::Failed).await;
    assert_timed_out(&attempts, Duration::from_secs(1), &["retried", "failed"]);
    assert_eq!(
        policy_calls.load(Ordering::SeqCst),
        2,
        "the retry policy decided after each timed-out attempt"
    );
    // Each attempt's handler was started, then its future dropped.
    let mut seen = vec![];
    while let Ok(s) = rx.try_recv() {
        seen.push(s);
    }
    assert_eq!(
        seen,
        [
            Seen::Started(1),
            Seen::Dropped(1),
            Seen::Started(2),
            Seen::Dropped(2)
        ]
    );

    // A job within its timeout is not touched.
    let quick = client.insert(&pool, &Slow { ms: 10 }).await.unwrap().id;
    assert!(wait_for(&client, quick, JobState::Completed).await.len() <= 1);
    let stats = client.shutdown(Duration::from_secs(5)).await.unwrap();
    assert_eq!(
        (stats.retried, stats.failed, stats.completed),
        (1, 1, 1),
        "{stats:?}"
    );
}

#[tokio::test]
async fn a_jobs_own_timeout_wins_over_its_kinds_and_the_builders_over_the_types() {
    let db = awa::testing::test_db().await.unwrap();
    let pool = db.pool().await.unwrap();
    let (tx, _rx) = mpsc::unbounded_channel();
    let client = Client::builder(pool.clone())
        .queue("timeouts", 4)
        .register::<Slow>(slow(tx))
        // Over the type's 1 s.
        .timeout::<Slow>(Duration::from_secs(3600))
        .start()
        .await
        .unwrap();
    let own = client
        .insert_with(
            &pool,
            &Slow { ms: 3_600_000 },
            InsertOpts::new()
                .max_attempts(1)
                .timeout(Duration::from_millis(300))
                .metadata(serde_json::json!({"tenant": 7})),
        )
        .await
        .unwrap()
        .id;
    // Under the builder's hour, over the type's second: completes.
    let kind = client.insert(&pool, &Slow { ms: 1_500 }).await.unwrap().id;
    let attempts = wait_for(&client, own, JobState::Failed).await;
    assert_timed_out(&attempts, Duration::from_millis(300), &["failed"]);
    wait_for(&client, kind, JobState::Completed).await;
    let view = client.job(own).await.unwrap().unwrap();
    assert_eq!(
        view.metadata,
        Some(serde_json::json!({"tenant": 7, "awa_timeout_ms": 300})),
        "the job's own timeout is kept in its metadata beside the caller's"
    );
    client.shutdown(Duration::from_secs(5)).await.unwrap();

    // Refused before anything is sent.
    let err = client
        .insert_with(
            &pool,
            &Slow { ms: 1 },
            InsertOpts::new().timeout(Duration::ZERO),
        )
        .await
        .unwrap_err();
    assert!(err.to_string().contains("job timeout"), "{err}");
    let err = Client::builder(pool.clone())
        .queue("timeouts", 1)
        .kind_timeout("slow", Duration::from_secs(8 * 86_400))
        .start()
        .await
        .unwrap_err();
    assert!(err.to_string().contains("job timeout"), "{err}");
}

#[tokio::test]
async fn work_one_applies_the_timeout() {
    let db = awa::testing::test_db().await.unwrap();
    let pool = db.pool().await.unwrap();
    let (tx, mut rx) = mpsc::unbounded_channel();
    let client = Client::new(pool.clone());
    let id = client
        .insert_with(
            &pool,
            &Slow { ms: 3_600_000 },
            InsertOpts::new().timeout(Duration::from_millis(200)),
        )
        .await
        .unwrap()
        .id;
    let worker = Client::builder(pool.clone()).register::<Slow>(slow(tx));
    let worked = tokio::time::timeout(Duration::from_secs(60), worker.work_one("timeouts"))
        .await
        .expect("hang guard")
        .unwrap()
        .expect("a runnable job");
    assert_eq!(worked.job.token.job_id, id);
    assert_eq!(worked.finished.next_state, Some(JobState::Retryable));
    assert_eq!(rx.recv().await, Some(Seen::Started(1)));
    assert_eq!(rx.recv().await, Some(Seen::Dropped(1)));
    let view = client.job(id).await.unwrap().unwrap();
    let attempts = view.attempts.unwrap();
    assert!(
        attempts[0]
            .error
            .as_deref()
            .unwrap()
            .starts_with(awa::timeout::ERROR_PREFIX),
        "{attempts:?}"
    );
}
