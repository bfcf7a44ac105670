//! The heartbeat cadence follows the rescue bound: a short `--rescue-after`
//! in a maintenance process does not take a healthy long job from a worker
//! (another process, sharing only the database), and a dead worker's job is
//! still rescued by it.

use crate::common;

use async_trait::async_trait;
use awa_core::{JobState, NewJob, QueueName};
use awa_exec::worker::{Handler, HandlerResult, JobContext, Outcome, Worker, WorkerConfig};
use awa_exec::{ExecPlane, PgExecPlane};
use awa_history::{HistoryPlane, PgHistoryPlane};
use awa_maint::tasks::{MaintTask, Rescue};
use awa_ready::{PgReadyPlane, ReadyPlane};
use common::schema;
use std::time::{Duration, Instant};

const BOUND: Duration = Duration::from_secs(1);
const JOB_RUNS: Duration = Duration::from_secs(8);

struct Long;

#[async_trait]
impl Handler for Long {
    async fn handle(&self, _ctx: JobContext) -> HandlerResult {
        tokio::time::sleep(JOB_RUNS).await;
        Ok(Outcome::Complete)
    }
}

async fn enqueue_one(pool: &sqlx::PgPool, q: &QueueName) -> awa_core::JobId {
    let mut conn = pool.acquire().await.unwrap();
    PgReadyPlane::new(schema())
        .enqueue(
            &mut conn,
            &[NewJob::new(q.clone(), "long", serde_json::json!({}))],
        )
        .await
        .unwrap()[0]
        .job_id
}

#[tokio::test]
async fn a_long_healthy_job_under_a_short_rescue_bound_is_not_rescued() {
    let (_db, pool) = common::setup().await;
    let q = QueueName::new("long").unwrap();
    let id = enqueue_one(&pool, &q).await;

    // The worker starts before any bound is published (its default cadence
    // is 15 s, far slower than the bound); maintenance then rescues with a
    // 1 s bound, a pass every 100 ms, for the whole run of the job.
    let mut worker = Worker::new(
        pool.clone(),
        WorkerConfig::new(schema(), vec![(q.clone(), 1)]),
    );
    worker.register("long", Long);
    let stats = worker.stats();
    let (stop_tx, mut stop_rx) = tokio::sync::watch::channel(false);
    let run = tokio::spawn(worker.run(async move {
        let _ = stop_rx.wait_for(|s| *s).await;
    }));
    let rescue = Rescue::new(schema(), BOUND, Duration::from_millis(100));
    let deadline = Instant::now() + JOB_RUNS + Duration::from_secs(30);
    let history = PgHistoryPlane::new(schema());
    let mut rescued = 0;
    loop {
        let outcome = rescue.run_once(&pool).await.unwrap();
        if let awa_maint::tasks::TaskOutcome::Worked { items } = outcome {
            rescued += items;
        }
        if stats.snapshot().completed + stats.snapshot().rejected > 0 {
            break;
        }
        assert!(Instant::now() < deadline, "the job never finished");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    stop_tx.send(true).unwrap();
    let report = run.await.unwrap().unwrap();
    assert_eq!(rescued, 0, "a healthy job was rescued");
    assert_eq!(report.rejected, 0, "the worker's result was rejected");
    assert_eq!(report.completed, 1);
    let mut conn = pool.acquire().await.unwrap();
    let job = history.job(&mut conn, id).await.unwrap().unwrap();
    assert_eq!(job.state, JobState::Completed);
    assert_eq!(job.attempt, 1, "completed on its first attempt");
}

#[tokio::test]
async fn a_dead_workers_job_is_still_rescued_under_the_short_bound() {
    let (_db, pool) = common::setup().await;
    let q = QueueName::new("orphan").unwrap();
    let id = enqueue_one(&pool, &q).await;
    // Claimed by a "worker" that then dies: nothing ever heartbeats it.
    let claimed = common::claim_all(&pool, "orphan", 1, 1).await;
    assert_eq!(claimed.len(), 1);

    let rescue = Rescue::new(schema(), BOUND, Duration::from_millis(100));
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut rescued = 0;
    while rescued == 0 {
        assert!(Instant::now() < deadline, "the orphan was never rescued");
        if let awa_maint::tasks::TaskOutcome::Worked { items } =
            rescue.run_once(&pool).await.unwrap()
        {
            rescued += items;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(rescued, 1);
    let mut conn = pool.acquire().await.unwrap();
    let job = PgHistoryPlane::new(schema())
        .job(&mut conn, id)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(job.state, JobState::Retryable, "rescued, to run again");

    // The published bound is what workers read; out-of-range values are
    // refused by the API and by the table.
    let plane = PgExecPlane::new(schema());
    assert_eq!(plane.rescue_bound(&mut conn).await.unwrap(), Some(BOUND));
    assert!(
        plane
            .publish_rescue_bound(&mut conn, Duration::from_millis(999))
            .await
            .is_err()
    );
    let err = sqlx::query("UPDATE awa.exec_settings SET rescue_after = interval '0 seconds'")
        .execute(&mut *conn)
        .await
        .unwrap_err();
    assert_eq!(
        err.as_database_error().and_then(|e| e.code()).as_deref(),
        Some("23514"),
        "{err}"
    );
}

struct Medium;

#[async_trait]
impl Handler for Medium {
    async fn handle(&self, _ctx: JobContext) -> HandlerResult {
        tokio::time::sleep(Duration::from_secs(4)).await;
        Ok(Outcome::Complete)
    }
}

/// A job claimed into the worker's buffer waits there behind a running one
/// for 4 s, four times the rescue bound: the worker heartbeats it while it
/// waits, so maintenance does not take it, and both complete first time.
#[tokio::test]
async fn a_buffered_job_waiting_longer_than_the_rescue_bound_is_not_rescued() {
    let (_db, pool) = common::setup().await;
    let q = QueueName::new("queued").unwrap();
    let mut conn = pool.acquire().await.unwrap();
    let ids: Vec<_> = PgReadyPlane::new(schema())
        .enqueue(
            &mut conn,
            &[
                NewJob::new(q.clone(), "medium", serde_json::json!({})),
                NewJob::new(q.clone(), "medium", serde_json::json!({})),
            ],
        )
        .await
        .unwrap()
        .into_iter()
        .map(|e| e.job_id)
        .collect();
    drop(conn);

    let mut worker = Worker::new(
        pool.clone(),
        WorkerConfig::new(schema(), vec![(q.clone(), 1)]),
    );
    worker.register("medium", Medium);
    let stats = worker.stats();
    let (stop_tx, mut stop_rx) = tokio::sync::watch::channel(false);
    let run = tokio::spawn(worker.run(async move {
        let _ = stop_rx.wait_for(|s| *s).await;
    }));
    let rescue = Rescue::new(schema(), BOUND, Duration::from_millis(100));
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut rescued = 0;
    let mut both_claimed_while_one_ran = false;
    loop {
        let s = stats.snapshot();
        if s.claimed == 2 && s.completed == 0 {
            both_claimed_while_one_ran = true;
        }
        if s.completed + s.rejected >= 2 {
            break;
        }
        if let awa_maint::tasks::TaskOutcome::Worked { items } =
            rescue.run_once(&pool).await.unwrap()
        {
            rescued += items;
        }
        assert!(Instant::now() < deadline, "the jobs never finished");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    stop_tx.send(true).unwrap();
    let report = run.await.unwrap().unwrap();
    assert!(
        both_claimed_while_one_ran,
        "the second job was never buffered behind the first"
    );
    assert_eq!(rescued, 0, "a buffered job was rescued");
    assert_eq!(report.rejected, 0);
    assert_eq!(report.completed, 2);
    let mut conn = pool.acquire().await.unwrap();
    for id in ids {
        let job = PgHistoryPlane::new(schema())
            .job(&mut conn, id)
            .await
            .unwrap()
            .unwrap();
        assert_eq!(job.state, JobState::Completed);
        assert_eq!(job.attempt, 1, "completed on its first attempt");
    }
}
