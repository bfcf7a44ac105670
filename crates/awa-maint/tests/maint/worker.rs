//! The worker runtime against real PostgreSQL: many workers, exactly-once
//! completion from the queue's point of view, graceful shutdown.

use crate::common;

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
    sqlx::query_scalar("SELECT count(*) FROM awa.terminal_jobs WHERE state = 'completed'")
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
    let distinct: i64 = sqlx::query_scalar("SELECT count(DISTINCT id) FROM awa.terminal_jobs")
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

async fn enqueue_noops(pool: &sqlx::PgPool, q: &QueueName, kind: &str, n: usize) -> Vec<JobId> {
    let jobs: Vec<NewJob> = (0..n)
        .map(|i| NewJob::new(q.clone(), kind, serde_json::json!({ "i": i })))
        .collect();
    common::enqueue_jobs(pool, &jobs).await
}

/// Poll `cond` every 10 ms until it holds, failing after `within`.
async fn wait_for(what: &str, within: Duration, mut cond: impl FnMut() -> bool) {
    let deadline = tokio::time::Instant::now() + within;
    while !cond() {
        assert!(tokio::time::Instant::now() < deadline, "{what}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Claims are sized by the work, not by the permits free at that instant:
/// at concurrency 16 a claim sized by free permits takes at most 16 jobs,
/// so 2,000 jobs would need at least 125 claims that take something. The
/// buffer keeps claims large (up to the claim batch) once jobs prove short.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_drain_of_short_jobs_at_concurrency_16_needs_few_claims() {
    const JOBS: usize = 2_000;
    let db = awa_maint::migrated_test_db().await.unwrap();
    let pool = db.pool().await.unwrap();
    let q = QueueName::new("short").unwrap();
    enqueue_noops(&pool, &q, "noop", JOBS).await;

    let recorder = Recorder::default();
    let mut worker = Worker::new(
        pool.clone(),
        WorkerConfig::new(schema(), vec![(q.clone(), 16)]),
    );
    worker.register("noop", recorder.clone());
    let stats = worker.stats();
    let (stop_tx, mut stop_rx) = tokio::sync::watch::channel(false);
    let run = tokio::spawn(worker.run(async move {
        let _ = stop_rx.wait_for(|s| *s).await;
    }));
    wait_for("drain did not finish", Duration::from_secs(120), || {
        stats.snapshot().completed >= JOBS as u64
    })
    .await;
    stop_tx.send(true).unwrap();
    let report = run.await.unwrap().unwrap();
    assert_eq!(report.completed, JOBS as u64);
    assert_eq!(report.claimed, JOBS as u64);
    assert_eq!(report.released, 0, "nothing was left buffered");
    let runs = recorder.0.lock().unwrap().clone();
    assert_eq!(runs.len(), JOBS);
    assert!(runs.values().all(|&n| n == 1), "no job ran twice");
    let taking = report.claim_calls - report.empty_claims;
    eprintln!(
        "{} claim calls ({} empty) for {JOBS} jobs: {:.1} jobs per claim that took any",
        report.claim_calls,
        report.empty_claims,
        JOBS as f64 / taking as f64
    );
    assert!(
        taking <= 60,
        "{taking} claims took jobs: claims are not sized by the work \
         (at most 16 per claim would need at least 125)"
    );
    assert_eq!(completed(&pool).await, JOBS as i64);
}

/// While claims come back full, a second claim waits behind the one in
/// flight (for the lane lock, in the server) instead of being sent only
/// after the worker has read the first's rows: two claim statements of one
/// dispatcher are seen running at once, and every job still runs once.
#[tokio::test]
async fn a_drain_keeps_a_second_claim_waiting_behind_the_one_in_flight() {
    const JOBS: usize = 20_000;
    let db = awa_maint::migrated_test_db().await.unwrap();
    let pool = db.pool().await.unwrap();
    let q = QueueName::new("piped").unwrap();
    enqueue_noops(&pool, &q, "noop", JOBS).await;

    let recorder = Recorder::default();
    let mut worker = Worker::new(
        pool.clone(),
        WorkerConfig::new(schema(), vec![(q.clone(), 64)]),
    );
    worker.register("noop", recorder.clone());
    let stats = worker.stats();
    let (stop_tx, mut stop_rx) = tokio::sync::watch::channel(false);
    let run = tokio::spawn(worker.run(async move {
        let _ = stop_rx.wait_for(|s| *s).await;
    }));
    // Sample the claims running in this database until the drain ends.
    let mut watcher = pool.acquire().await.unwrap();
    let mut most: i64 = 0;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(120);
    while stats.snapshot().completed < JOBS as u64 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "drain did not finish"
        );
        let now: i64 = sqlx::query_scalar(
            "SELECT count(*) FROM pg_stat_activity
              WHERE datname = current_database() AND state = 'active'
                AND query LIKE '-- ExecPlane::claim.%'",
        )
        .fetch_one(&mut *watcher)
        .await
        .unwrap();
        most = most.max(now);
    }
    stop_tx.send(true).unwrap();
    let report = run.await.unwrap().unwrap();
    assert_eq!(report.completed, JOBS as u64);
    let runs = recorder.0.lock().unwrap().clone();
    assert_eq!(runs.len(), JOBS);
    assert!(runs.values().all(|&n| n == 1), "no job ran twice");
    assert!(
        most >= 2,
        "at most {most} claim running at once: the next claim waits for the worker"
    );
    assert_eq!(completed(&pool).await, JOBS as i64);
}

/// Completes once the worker shuts down; until then it holds its permit,
/// so claimed jobs behind it stay in the dispatcher's buffer.
struct UntilShutdown;

#[async_trait]
impl Handler for UntilShutdown {
    async fn handle(&self, ctx: JobContext) -> HandlerResult {
        while !ctx.is_shutting_down() {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        Ok(Outcome::Complete)
    }
}

#[tokio::test]
async fn shutdown_with_a_full_buffer_releases_every_buffered_job() {
    const CONCURRENCY: usize = 4;
    let db = awa_maint::migrated_test_db().await.unwrap();
    let pool = db.pool().await.unwrap();
    let q = QueueName::new("held").unwrap();
    let ids = enqueue_noops(&pool, &q, "hold", 40).await;

    let mut config = WorkerConfig::new(schema(), vec![(q.clone(), CONCURRENCY)]);
    config.shutdown_grace = Duration::from_secs(5);
    let mut worker = Worker::new(pool.clone(), config);
    worker.register("hold", UntilShutdown);
    let stats = worker.stats();
    let (stop_tx, mut stop_rx) = tokio::sync::watch::channel(false);
    let run = tokio::spawn(worker.run(async move {
        let _ = stop_rx.wait_for(|s| *s).await;
    }));
    // Every permit busy, and jobs claimed beyond them: a buffer.
    wait_for(
        "the worker never claimed beyond its free permits",
        Duration::from_secs(20),
        || stats.snapshot().claimed > CONCURRENCY as u64,
    )
    .await;
    // Let it settle: with every permit held and the buffer full, it claims
    // no more.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let claimed = stats.snapshot().claimed;
    let buffered = claimed - CONCURRENCY as u64;
    assert!(buffered > 0);

    stop_tx.send(true).unwrap();
    let report = tokio::time::timeout(
        Duration::from_secs(5) + awa_exec::worker::RECORD_GRACE + Duration::from_secs(2),
        run,
    )
    .await
    .expect("shutdown respects its grace period")
    .unwrap()
    .unwrap();
    assert_eq!(report.claimed, claimed, "no claim after the buffer filled");
    assert_eq!(
        report.completed, CONCURRENCY as u64,
        "running jobs finished"
    );
    assert_eq!(report.released, buffered, "every buffered job released");
    assert_eq!(report.rejected, 0);

    // Released jobs come back (after promotion) with the attempt not
    // counted; everything not completed is claimable exactly once.
    let mut conn = pool.acquire().await.unwrap();
    use awa_deferred::DeferredPlane;
    awa_deferred::PgDeferredPlane::new(schema())
        .promote_due(&mut conn, 100)
        .await
        .unwrap();
    drop(conn);
    let left = ids.len() - CONCURRENCY;
    let again = common::claim_all(&pool, "held", 100, left).await;
    assert_eq!(again.len(), left, "every job not completed is claimable");
    let relaunched: Vec<_> = again.iter().filter(|j| j.token.run_lease.0 == 2).collect();
    assert_eq!(relaunched.len() as u64, buffered, "the released ones");
    assert!(
        again.iter().all(|j| j.attempt == 1),
        "a released attempt does not count"
    );
    assert_eq!(completed(&pool).await, CONCURRENCY as i64);
}

/// Never returns: a job that is still running when its worker dies.
struct Forever;

#[async_trait]
impl Handler for Forever {
    async fn handle(&self, _ctx: JobContext) -> HandlerResult {
        std::future::pending::<()>().await;
        unreachable!()
    }
}

/// A worker killed with running and buffered jobs (its runtime dropped:
/// no release, no heartbeat, connections gone) loses nothing: maintenance
/// rescues every attempt it held, running or buffered, and another worker
/// completes each job exactly once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_worker_with_a_buffer_has_every_job_rescued_and_completed_once() {
    const CONCURRENCY: usize = 2;
    const JOBS: usize = 12;
    let db = awa_maint::migrated_test_db().await.unwrap();
    let pool = db.pool().await.unwrap();
    let q = QueueName::new("doomed").unwrap();
    let ids = enqueue_noops(&pool, &q, "work", JOBS).await;

    // The doomed worker lives in a runtime of its own, so dropping that
    // runtime ends every task of it at once, as a kill would.
    let url = db.url().to_string();
    let (held_tx, held_rx) = std::sync::mpsc::channel::<u64>();
    let (kill_tx, kill_rx) = std::sync::mpsc::channel::<()>();
    let doomed_q = q.clone();
    let doomed = std::thread::spawn(move || {
        let rt = tokio::runtime::Runtime::new().unwrap();
        rt.block_on(async {
            let pool = sqlx::PgPool::connect(&url).await.unwrap();
            let mut worker = Worker::new(
                pool,
                WorkerConfig::new(schema(), vec![(doomed_q, CONCURRENCY)]),
            );
            worker.register("work", Forever);
            let stats = worker.stats();
            tokio::spawn(worker.run(std::future::pending()));
            wait_for(
                "the doomed worker never buffered",
                Duration::from_secs(20),
                || stats.snapshot().claimed > CONCURRENCY as u64,
            )
            .await;
            tokio::time::sleep(Duration::from_millis(300)).await;
            held_tx.send(stats.snapshot().claimed).unwrap();
        });
        kill_rx.recv().unwrap();
        rt.shutdown_background();
    });
    let held = tokio::task::spawn_blocking(move || held_rx.recv().unwrap())
        .await
        .unwrap();
    assert!(held > CONCURRENCY as u64, "running and buffered jobs held");
    kill_tx.send(()).unwrap();
    tokio::task::spawn_blocking(move || doomed.join().unwrap())
        .await
        .unwrap();

    let recorder = Recorder::default();
    let mut worker = Worker::new(
        pool.clone(),
        WorkerConfig::new(schema(), vec![(q.clone(), 4)]),
    );
    worker.register("work", recorder.clone());
    let stats = worker.stats();
    let (stop_tx, mut stop_rx) = tokio::sync::watch::channel(false);
    let run = tokio::spawn(worker.run(async move {
        let _ = stop_rx.wait_for(|s| *s).await;
    }));

    use awa_deferred::DeferredPlane;
    use awa_maint::tasks::{MaintTask, Rescue, TaskOutcome};
    let rescue = Rescue::new(schema(), Duration::from_secs(1), Duration::from_millis(100));
    let promote = awa_deferred::PgDeferredPlane::new(schema());
    let mut rescued = 0;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    while stats.snapshot().completed < JOBS as u64 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "not every job completed: {:?}, rescued {rescued}",
            stats.snapshot()
        );
        if let TaskOutcome::Worked { items } = rescue.run_once(&pool).await.unwrap() {
            rescued += items;
        }
        let mut conn = pool.acquire().await.unwrap();
        // Rescued attempts retry after a backoff; bring them back now.
        sqlx::query("UPDATE awa.deferred_jobs SET run_at = now()")
            .execute(&mut *conn)
            .await
            .unwrap();
        promote.promote_due(&mut conn, 100).await.unwrap();
        drop(conn);
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    stop_tx.send(true).unwrap();
    let report = run.await.unwrap().unwrap();
    assert_eq!(rescued, held, "every held attempt, buffered too, rescued");
    assert_eq!(report.rejected, 0);
    let runs = recorder.0.lock().unwrap().clone();
    assert_eq!(runs.len(), JOBS, "every job ran to completion");
    assert!(runs.values().all(|&n| n == 1), "no job completed twice");
    let per_job: Vec<i64> = sqlx::query_scalar(sqlx::AssertSqlSafe(format!(
        "SELECT count(*) FROM {} WHERE state = 'completed' GROUP BY job_id ORDER BY job_id",
        common::TERMINAL_FACTS
    )))
    .fetch_all(&pool)
    .await
    .unwrap();
    assert_eq!(per_job.len(), ids.len());
    assert!(
        per_job.iter().all(|&n| n == 1),
        "each completed exactly once"
    );
}

/// Low load keeps the wake-up path: on an idle queue whose poll is a
/// minute away, one enqueued job is claimed on its notification (the
/// buffer changes nothing there), in one claim call that takes it.
#[tokio::test]
async fn a_job_on_an_idle_queue_is_claimed_on_its_notification_not_the_poll() {
    let db = awa_maint::migrated_test_db().await.unwrap();
    let pool = db.pool().await.unwrap();
    let q = QueueName::new("idle").unwrap();
    let recorder = Recorder::default();
    let (stats, stop_tx, run) = worker_polling_once_a_minute(&pool, &q, 16, recorder.clone());
    // Idle: the first claim found nothing, and the listener is listening.
    wait_for(
        "the worker never went idle",
        Duration::from_secs(20),
        || stats.snapshot().empty_claims >= 1,
    )
    .await;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    loop {
        let listening: i64 = sqlx::query_scalar(
            "SELECT count(*) FROM pg_stat_activity \
             WHERE datname = current_database() AND query ILIKE 'LISTEN%'",
        )
        .fetch_one(&pool)
        .await
        .unwrap();
        if listening > 0 {
            break;
        }
        assert!(tokio::time::Instant::now() < deadline, "never listening");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let before = stats.snapshot();
    enqueue_noops(&pool, &q, "noop", 1).await;
    // Far less than the poll interval: only the notification can wake it.
    wait_for(
        "the job was not claimed on its notification",
        Duration::from_secs(30),
        || stats.snapshot().completed == 1,
    )
    .await;
    let after = stats.snapshot();
    assert_eq!(
        after.claim_calls - after.empty_claims,
        before.claim_calls - before.empty_claims + 1,
        "one claim took the job"
    );
    stop_tx.send(true).unwrap();
    let report = run.await.unwrap().unwrap();
    assert_eq!(report.completed, 1);
    assert_eq!(recorder.0.lock().unwrap().len(), 1);
}

/// A claim that meets lanes another transaction holds (another replica's
/// claim, most often) must not read as "drained": on a standing backlog
/// no notification comes, so a worker that went idle would wait out its
/// poll interval (a minute here) while the work stood. All lanes of the
/// queue are held while the worker's first claims run; once they are
/// released, the worker takes the backlog on its own, well before the
/// poll.
#[tokio::test]
async fn a_claim_that_meets_a_busy_lane_looks_again_without_waiting_for_the_poll() {
    let db = awa_maint::migrated_test_db().await.unwrap();
    let pool = db.pool().await.unwrap();
    let q = QueueName::new("contended").unwrap();
    enqueue_noops(&pool, &q, "noop", 20).await;

    // Another claimer's hold on every lane of the queue.
    let mut holder = pool.begin().await.unwrap();
    let held: Vec<i16> = sqlx::query_scalar(
        "SELECT priority FROM awa.lane_heads WHERE queue = 'contended' FOR UPDATE",
    )
    .fetch_all(&mut *holder)
    .await
    .unwrap();
    assert!(!held.is_empty());

    let (stats, stop_tx, run) = worker_polling_once_a_minute(&pool, &q, 8, Recorder::default());
    wait_for(
        "the worker never claimed while the lanes were held",
        Duration::from_secs(20),
        || stats.snapshot().empty_claims >= 1,
    )
    .await;
    assert_eq!(stats.snapshot().completed, 0, "the lanes were held");
    holder.commit().await.unwrap();

    // The poll is a minute away and nothing notifies: only looking again
    // finds the backlog.
    wait_for(
        "the backlog waited for the poll: a busy lane was read as drained",
        Duration::from_secs(30),
        || stats.snapshot().completed == 20,
    )
    .await;
    stop_tx.send(true).unwrap();
    assert_eq!(run.await.unwrap().unwrap().completed, 20);
}

/// A worker of `noop` jobs on one queue whose poll is a minute away, so
/// within a test only a notification or its own looking again makes it
/// claim; stop it by sending `true`.
fn worker_polling_once_a_minute(
    pool: &sqlx::PgPool,
    q: &QueueName,
    concurrency: usize,
    recorder: Recorder,
) -> (
    Arc<awa_exec::worker::Stats>,
    tokio::sync::watch::Sender<bool>,
    tokio::task::JoinHandle<Result<awa_exec::worker::StatsSnapshot, awa_exec::ExecError>>,
) {
    let mut config = WorkerConfig::new(schema(), vec![(q.clone(), concurrency)]);
    config.poll_interval = Duration::from_secs(60);
    let mut worker = Worker::new(pool.clone(), config);
    worker.register("noop", recorder);
    let stats = worker.stats();
    let (stop_tx, mut stop_rx) = tokio::sync::watch::channel(false);
    let run = tokio::spawn(worker.run(async move {
        let _ = stop_rx.wait_for(|s| *s).await;
    }));
    (stats, stop_tx, run)
}

/// `Worker::claim_now` (what `worker run --exit-when-idle` asks for before
/// each idle check) makes an idle dispatcher claim once, at once, with no
/// notification and its poll a minute away; asked many times at once, it
/// claims at most twice (the wake-up taken and the one kept), not once
/// per ask.
#[tokio::test]
async fn claim_now_makes_an_idle_worker_claim_once_without_waiting_for_the_poll() {
    let db = awa_maint::migrated_test_db().await.unwrap();
    let pool = db.pool().await.unwrap();
    let q = QueueName::new("prodded").unwrap();
    let mut config = WorkerConfig::new(schema(), vec![(q.clone(), 4)]);
    config.poll_interval = Duration::from_secs(60);
    let mut worker = Worker::new(pool.clone(), config);
    worker.register("noop", Recorder::default());
    let stats = worker.stats();
    let claim_now = worker.claim_now();
    let (stop_tx, mut stop_rx) = tokio::sync::watch::channel(false);
    let run = tokio::spawn(worker.run(async move {
        let _ = stop_rx.wait_for(|s| *s).await;
    }));
    wait_for(
        "the worker never went idle",
        Duration::from_secs(20),
        || stats.snapshot().empty_claims >= 1,
    )
    .await;
    let before = stats.snapshot().empty_claims;
    claim_now.claim_now();
    wait_for(
        "claim_now did not make the idle dispatcher claim",
        Duration::from_secs(20),
        || stats.snapshot().empty_claims > before,
    )
    .await;
    // Many asks at once: one wakes it, one is kept: two claims at most.
    let before = stats.snapshot().empty_claims;
    for _ in 0..50 {
        claim_now.claim_now();
    }
    wait_for(
        "claim_now did not make the idle dispatcher claim again",
        Duration::from_secs(20),
        || stats.snapshot().empty_claims > before,
    )
    .await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let claims = stats.snapshot().empty_claims - before;
    assert!(
        claims <= 2,
        "fifty asks made {claims} claims, more than the two one wake-up and one kept one make"
    );
    stop_tx.send(true).unwrap();
    assert_eq!(run.await.unwrap().unwrap().claimed, 0);
}

/// Panics in every attempt, with a message.
struct Panics;

#[async_trait]
impl Handler for Panics {
    async fn handle(&self, _ctx: JobContext) -> HandlerResult {
        panic!("boom {}", 7);
    }
}

/// A panicking handler loses neither its job nor the worker: the panic is
/// caught where the handler is polled (inside the attempt's own task, no
/// second task per job) and fails the attempt with its message, and the
/// worker goes on running other jobs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_panicking_handler_fails_its_attempt_with_the_message_and_the_worker_goes_on() {
    let db = awa_maint::migrated_test_db().await.unwrap();
    let pool = db.pool().await.unwrap();
    let q = QueueName::new("panics").unwrap();
    let mut bad = NewJob::new(q.clone(), "panics", serde_json::json!({}));
    bad.max_attempts = Some(1);
    let bad = common::enqueue_jobs(&pool, &[bad]).await[0];
    let good = enqueue_noops(&pool, &q, "noop", 20).await;

    let recorder = Recorder::default();
    let mut worker = Worker::new(
        pool.clone(),
        WorkerConfig::new(schema(), vec![(q.clone(), 4)]),
    );
    worker.register("noop", recorder.clone());
    worker.register("panics", Panics);
    let stats = worker.stats();
    let (stop_tx, mut stop_rx) = tokio::sync::watch::channel(false);
    let run = tokio::spawn(worker.run(async move {
        let _ = stop_rx.wait_for(|s| *s).await;
    }));
    wait_for("the jobs did not finish", Duration::from_secs(60), || {
        let s = stats.snapshot();
        s.completed >= good.len() as u64 && s.failed >= 1
    })
    .await;
    stop_tx.send(true).unwrap();
    let report = run.await.unwrap().unwrap();
    assert_eq!(report.completed, good.len() as u64);
    let (state, error): (String, Option<String>) =
        sqlx::query_as("SELECT state, last_error FROM awa.terminal_jobs WHERE id = $1")
            .bind(bad.0)
            .fetch_one(&pool)
            .await
            .unwrap();
    assert_eq!(state, "failed");
    assert_eq!(error.as_deref(), Some("handler panicked: boom 7"));
    assert_eq!(recorder.0.lock().unwrap().len(), good.len());
}
