//! The worker runtime against real PostgreSQL: many workers, exactly-once
//! completion from the queue's point of view, graceful shutdown.

use async_trait::async_trait;
use awa_core::{JobId, JobState, NewJob, QueueName, SchemaName};
use awa_exec::worker::{Handler, HandlerResult, JobContext, Outcome, Worker, WorkerConfig};
use awa_history::{HistoryPlane, PgHistoryPlane};
use awa_ready::{PgReadyPlane, ReadyPlane};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

fn schema() -> SchemaName {
    SchemaName::default_schema()
}

#[derive(Clone, Default)]
struct Recorder(Arc<Mutex<HashMap<JobId, u32>>>);

#[async_trait]
impl Handler for Recorder {
    async fn handle(&self, ctx: JobContext) -> HandlerResult {
        *self
            .0
            .lock()
            .unwrap()
            .entry(ctx.job.token.job_id)
            .or_default() += 1;
        Ok(Outcome::Complete)
    }
}

async fn completed(pool: &sqlx::PgPool) -> i64 {
    sqlx::query_scalar("SELECT count(*) FROM awa.done_entries WHERE state = 'completed'")
        .fetch_one(pool)
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn eight_workers_drain_fifty_thousand_jobs_each_completed_once() {
    const JOBS: usize = 50_000;
    let db = awa_maint::migrated_test_db().await.unwrap();
    let pool = sqlx::postgres::PgPoolOptions::new()
        .max_connections(40)
        .connect(db.url())
        .await
        .unwrap();
    let q = QueueName::new("drain").unwrap();
    let plane = PgReadyPlane::new(schema());
    let mut conn = pool.acquire().await.unwrap();
    for chunk in 0..(JOBS / 5000) {
        let jobs: Vec<NewJob> = (0..5000)
            .map(|i| {
                NewJob::new(
                    q.clone(),
                    "noop",
                    serde_json::json!({ "i": chunk * 5000 + i }),
                )
            })
            .collect();
        plane.enqueue(&mut conn, &jobs).await.unwrap();
    }
    drop(conn);

    let recorder = Recorder::default();
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let mut workers = Vec::new();
    for _ in 0..8 {
        let mut worker = Worker::new(
            pool.clone(),
            WorkerConfig::new(schema(), vec![(q.clone(), 16)]),
        );
        worker.register("noop", recorder.clone());
        let mut stop = stop_rx.clone();
        workers.push(tokio::spawn(worker.run(async move {
            let _ = stop.wait_for(|s| *s).await;
        })));
    }
    let deadline = tokio::time::Instant::now() + Duration::from_secs(240);
    while completed(&pool).await < JOBS as i64 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "drain did not finish in time"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    stop_tx.send(true).unwrap();
    let mut rejected = 0;
    for w in workers {
        rejected += w.await.unwrap().unwrap().rejected;
    }
    assert_eq!(rejected, 0);
    let runs = recorder.0.lock().unwrap().clone();
    assert_eq!(runs.len(), JOBS, "every job ran");
    assert!(runs.values().all(|&n| n == 1), "no job ran twice");
    let distinct: i64 = sqlx::query_scalar("SELECT count(DISTINCT job_id) FROM awa.done_entries")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(distinct, JOBS as i64);
    assert_eq!(
        completed(&pool).await,
        JOBS as i64,
        "each completed exactly once"
    );
}

struct Sleeper;

#[async_trait]
impl Handler for Sleeper {
    async fn handle(&self, _ctx: JobContext) -> HandlerResult {
        tokio::time::sleep(Duration::from_secs(30)).await;
        Ok(Outcome::Complete)
    }
}

#[tokio::test]
async fn graceful_shutdown_releases_unfinished_jobs_so_they_run_again() {
    let db = awa_maint::migrated_test_db().await.unwrap();
    let pool = db.pool().await.unwrap();
    let q = QueueName::new("slow").unwrap();
    let mut conn = pool.acquire().await.unwrap();
    let id = PgReadyPlane::new(schema())
        .enqueue(
            &mut conn,
            &[NewJob::new(q.clone(), "sleep", serde_json::json!({}))],
        )
        .await
        .unwrap()[0]
        .job_id;
    drop(conn);

    let mut config = WorkerConfig::new(schema(), vec![(q.clone(), 4)]);
    config.shutdown_grace = Duration::from_millis(300);
    let mut worker = Worker::new(pool.clone(), config);
    worker.register("sleep", Sleeper);
    let stats = worker.stats();
    let (stop_tx, mut stop_rx) = tokio::sync::watch::channel(false);
    let run = tokio::spawn(worker.run(async move {
        let _ = stop_rx.wait_for(|s| *s).await;
    }));
    let history = PgHistoryPlane::new(schema());
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    loop {
        let mut conn = pool.acquire().await.unwrap();
        if history.job(&mut conn, id).await.unwrap().unwrap().state == JobState::Running {
            break;
        }
        assert!(tokio::time::Instant::now() < deadline, "job never started");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    stop_tx.send(true).unwrap();
    let report = tokio::time::timeout(Duration::from_secs(10), run)
        .await
        .expect("shutdown respects its grace period")
        .unwrap()
        .unwrap();
    assert_eq!(report.released, 1);
    assert_eq!(stats.snapshot().released, 1);

    let mut conn = pool.acquire().await.unwrap();
    let view = history.job(&mut conn, id).await.unwrap().unwrap();
    assert_eq!(
        view.state,
        JobState::Available,
        "released, waiting to be promoted"
    );
    use awa_deferred::DeferredPlane;
    awa_deferred::PgDeferredPlane::new(schema())
        .promote_due(&mut conn, 10)
        .await
        .unwrap();
    let mut frontier = awa_exec::Frontier::default();
    use awa_exec::ExecPlane;
    let plane = awa_exec::PgExecPlane::new(schema());
    let mut again = Vec::new();
    for _ in 0..50 {
        again = plane
            .claim(&mut conn, &q, 1, &mut frontier, None)
            .await
            .unwrap();
        if !again.is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(again.len(), 1, "the released job is claimable again");
    assert_eq!(again[0].attempt, 1, "a released attempt does not count");
    assert_eq!(again[0].token.run_lease.0, 2);
}
