//! A worker cannot get stuck on one result: handler results are bounded
//! before they are sent, an unstorable result is isolated from its batch
//! (and recorded in a fallback form, or dropped for rescue), and graceful
//! shutdown ends within its grace period whatever the database does.

use crate::common;

use async_trait::async_trait;
use awa_core::{JobId, JobState, NewJob, QueueName};
use awa_exec::worker::{
    Handler, HandlerResult, JobContext, JobError, Outcome, RECORD_GRACE, StatsSnapshot, Worker,
    WorkerConfig,
};
use awa_history::{HistoryPlane, JobView, PgHistoryPlane};
use awa_ready::{PgReadyPlane, ReadyPlane};
use common::schema;
use std::time::{Duration, Instant};

const GOOD: usize = 200;
const GRACE: Duration = Duration::from_secs(2);
/// Scheduling slack on a loaded test machine, on top of grace + record grace.
const MARGIN: Duration = Duration::from_secs(3);

/// `poison` jobs get the given result; every other kind completes.
struct Handlers(HandlerResult);

#[async_trait]
impl Handler for Handlers {
    async fn handle(&self, ctx: JobContext) -> HandlerResult {
        if ctx.job.kind == "poison" {
            self.0.clone()
        } else {
            Ok(Outcome::Complete)
        }
    }
}

async fn completed(pool: &sqlx::PgPool, queue: &str) -> i64 {
    sqlx::query_scalar(
        "SELECT count(*) FROM awa.terminal_jobs WHERE state = 'completed' AND queue = $1",
    )
    .bind(queue)
    .fetch_one(pool)
    .await
    .unwrap()
}

/// Enqueue one poison job, then `GOOD` good ones behind it.
async fn enqueue(pool: &sqlx::PgPool, q: &QueueName) -> JobId {
    let plane = PgReadyPlane::new(schema());
    let mut conn = pool.acquire().await.unwrap();
    let mut jobs = vec![NewJob::new(
        q.clone(),
        "poison",
        serde_json::json!({ "poison": true }),
    )];
    jobs.extend((0..GOOD).map(|i| NewJob::new(q.clone(), "good", serde_json::json!({ "i": i }))));
    plane.enqueue(&mut conn, &jobs).await.unwrap()[0].job_id
}

/// Run a worker until all good jobs are recorded (or 60 s pass), then shut
/// it down and check shutdown kept to its grace period.
async fn run_until_good_recorded(
    pool: &sqlx::PgPool,
    q: &QueueName,
    result: HandlerResult,
) -> StatsSnapshot {
    let mut config = WorkerConfig::new(schema(), vec![(q.clone(), 16)]);
    config.shutdown_grace = GRACE;
    let mut worker = Worker::new(pool.clone(), config);
    worker.register_default(Handlers(result));
    let (stop_tx, mut stop_rx) = tokio::sync::watch::channel(false);
    let run = tokio::spawn(worker.run(async move {
        let _ = stop_rx.wait_for(|s| *s).await;
    }));
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut done = 0;
    while Instant::now() < deadline {
        done = completed(pool, q.as_str()).await;
        if done >= GOOD as i64 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let stopping = Instant::now();
    stop_tx.send(true).unwrap();
    let stats = tokio::time::timeout(GRACE + RECORD_GRACE + MARGIN, run)
        .await
        .expect("shutdown finishes within its grace period")
        .unwrap()
        .unwrap();
    assert!(stopping.elapsed() <= GRACE + RECORD_GRACE + MARGIN);
    assert_eq!(done, GOOD as i64, "every good job was recorded");
    stats
}

async fn view(pool: &sqlx::PgPool, id: JobId) -> JobView {
    let mut conn = pool.acquire().await.unwrap();
    PgHistoryPlane::new(schema())
        .job(&mut conn, id)
        .await
        .unwrap()
        .expect("the poison job is still known")
}

#[tokio::test]
async fn an_error_text_with_nul_is_stored_without_it() {
    let (_db, pool) = common::setup().await;
    let q = QueueName::new("nul").unwrap();
    let poison = enqueue(&pool, &q).await;
    let long_tail = "x".repeat(100_000);
    let stats = run_until_good_recorded(
        &pool,
        &q,
        Err(JobError::Retry(format!("bad\0text {long_tail}"))),
    )
    .await;
    assert_eq!(stats.unstorable, 0, "sanitized, so storable as it is");
    let job = view(&pool, poison).await;
    assert_eq!(job.state, JobState::Retryable);
    let error = job.last_error.unwrap();
    assert!(error.starts_with("badtext x"), "{error:.40}");
    assert!(error.len() <= awa_core::bounds::MAX_ERROR_BYTES);
    assert!(
        error.contains("[truncated:"),
        "{:.40}",
        &error[error.len() - 60..]
    );
}

#[tokio::test]
async fn a_huge_snooze_is_clamped_to_the_longest_delay() {
    let (_db, pool) = common::setup().await;
    let q = QueueName::new("snooze").unwrap();
    let poison = enqueue(&pool, &q).await;
    run_until_good_recorded(
        &pool,
        &q,
        Ok(Outcome::Snooze(Duration::from_secs(u64::MAX / 4))),
    )
    .await;
    let job = view(&pool, poison).await;
    assert_eq!(job.state, JobState::Snoozed);
    let due_in = job.at.time().unwrap() - chrono::Utc::now();
    let max = chrono::Duration::from_std(awa_core::bounds::MAX_HANDLER_DELAY).unwrap();
    assert!(
        due_in <= max && due_in > max - chrono::Duration::hours(1),
        "due in {due_in}"
    );
}

#[tokio::test]
async fn a_huge_retry_after_is_clamped_to_the_longest_delay() {
    let (_db, pool) = common::setup().await;
    let q = QueueName::new("retry_after").unwrap();
    let poison = enqueue(&pool, &q).await;
    run_until_good_recorded(
        &pool,
        &q,
        Err(JobError::RetryAfter(
            Duration::from_secs(10_u64.pow(13)),
            "later".into(),
        )),
    )
    .await;
    let job = view(&pool, poison).await;
    assert_eq!(job.state, JobState::Retryable);
    let due_in = job.at.time().unwrap() - chrono::Utc::now();
    let max = chrono::Duration::from_std(awa_core::bounds::MAX_HANDLER_DELAY).unwrap();
    assert!(
        due_in <= max && due_in > max - chrono::Duration::hours(1),
        "due in {due_in}"
    );
}

/// A result that passes every bound but the database still refuses (here a
/// constraint the test adds): the rest of its batch is recorded, and it
/// becomes a retry with the default backoff saying what happened.
#[tokio::test]
async fn a_result_the_database_refuses_is_isolated_and_recorded_as_a_fallback() {
    let (_db, pool) = common::setup().await;
    sqlx::query(
        "ALTER TABLE awa.deferred_jobs ADD CONSTRAINT test_refuses_poison \
         CHECK (last_error IS NULL OR last_error NOT LIKE '%refuse me%')",
    )
    .execute(&pool)
    .await
    .unwrap();
    let q = QueueName::new("refused").unwrap();
    let poison = enqueue(&pool, &q).await;
    let stats =
        run_until_good_recorded(&pool, &q, Err(JobError::Retry("please refuse me".into()))).await;
    assert_eq!(stats.unstorable, 1);
    assert_eq!(stats.retried, 1, "recorded as a retry");
    let job = view(&pool, poison).await;
    assert_eq!(job.state, JobState::Retryable);
    let error = job.last_error.unwrap();
    assert!(error.contains("could not be stored"), "{error}");
    assert!(error.contains("test_refuses_poison"), "{error}");
}

/// Even the fallback cannot be stored: the result is dropped (the attempt
/// stays open for rescue), the others are recorded, and nothing spins.
#[tokio::test]
async fn a_result_whose_fallback_is_refused_too_is_left_for_rescue() {
    let (_db, pool) = common::setup().await;
    let q = QueueName::new("dropped").unwrap();
    let poison = enqueue(&pool, &q).await;
    sqlx::query(
        "ALTER TABLE awa.deferred_jobs ADD CONSTRAINT test_refuses_job \
         CHECK (NOT args ? 'poison')",
    )
    .execute(&pool)
    .await
    .unwrap();
    let stats = run_until_good_recorded(&pool, &q, Err(JobError::Retry("no".into()))).await;
    assert_eq!(stats.unstorable, 1);
    assert_eq!(stats.retried, 0);
    assert_eq!(
        view(&pool, poison).await.state,
        JobState::Running,
        "its attempt is still open: maintenance rescues it"
    );
}

/// Handlers that wait for `go`, then complete.
struct Gate(tokio::sync::watch::Receiver<bool>);

#[async_trait]
impl Handler for Gate {
    async fn handle(&self, _ctx: JobContext) -> HandlerResult {
        let mut go = self.0.clone();
        let _ = go.wait_for(|g| *g).await;
        Ok(Outcome::Complete)
    }
}

/// The database stops answering finishes (a lock held elsewhere): shutdown
/// still ends within grace + record grace (what was not recorded is left
/// for rescue).
#[tokio::test]
async fn shutdown_is_bounded_when_the_database_does_not_answer() {
    const JOBS: usize = 20;
    let (_db, pool) = common::setup().await;
    let q = QueueName::new("blocked").unwrap();
    let mut conn = pool.acquire().await.unwrap();
    let jobs: Vec<NewJob> = (0..JOBS)
        .map(|i| NewJob::new(q.clone(), "gate", serde_json::json!({ "i": i })))
        .collect();
    PgReadyPlane::new(schema())
        .enqueue(&mut conn, &jobs)
        .await
        .unwrap();
    drop(conn);

    let (go_tx, go_rx) = tokio::sync::watch::channel(false);
    let mut config = WorkerConfig::new(schema(), vec![(q.clone(), JOBS)]);
    config.shutdown_grace = GRACE;
    let mut worker = Worker::new(pool.clone(), config);
    worker.register_default(Gate(go_rx));
    let stats = worker.stats();
    let (stop_tx, mut stop_rx) = tokio::sync::watch::channel(false);
    let run = tokio::spawn(worker.run(async move {
        let _ = stop_rx.wait_for(|s| *s).await;
    }));
    let deadline = Instant::now() + Duration::from_secs(30);
    while stats.snapshot().claimed < JOBS as u64 {
        assert!(Instant::now() < deadline, "jobs were never claimed");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }

    // Block every finish, then let the handlers complete.
    let mut blocker = pool.begin().await.unwrap();
    sqlx::query("LOCK TABLE awa.claim_closures IN ACCESS EXCLUSIVE MODE")
        .execute(&mut *blocker)
        .await
        .unwrap();
    go_tx.send(true).unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let waiting: i64 = sqlx::query_scalar(
            "SELECT count(*) FROM pg_stat_activity \
              WHERE datname = current_database() AND wait_event_type = 'Lock'",
        )
        .fetch_one(&pool)
        .await
        .unwrap();
        if waiting > 0 {
            break;
        }
        assert!(Instant::now() < deadline, "the finish never blocked");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }

    let stopping = Instant::now();
    stop_tx.send(true).unwrap();
    let report = tokio::time::timeout(GRACE + RECORD_GRACE + MARGIN, run)
        .await
        .expect("shutdown finishes within its grace period though finishes hang")
        .unwrap()
        .unwrap();
    assert!(stopping.elapsed() <= GRACE + RECORD_GRACE + MARGIN);
    assert_eq!(report.completed, 0, "nothing could be recorded");
    blocker.rollback().await.unwrap();
}
