//! The cancel rule in a running worker: a handler learns at once that its
//! attempt was cancelled by an operator or rescued by maintenance
//! (`JobContext::cancelled`, from the `awa_cancel` notification, not a
//! heartbeat: heartbeats here are an hour apart); one that does not return
//! within the cancel grace is dropped, its slot freed for the next job,
//! and the log says so once.

use awa::{Client, JobContext, NewJob, Outcome, QueueName};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::mpsc;

/// What the handlers report.
#[derive(Debug, PartialEq)]
enum Seen {
    Started(String),
    /// The polite handler saw the cancel.
    Told(String),
    /// The stubborn handler's future was dropped.
    Dropped(String),
}

struct DropGuard(String, mpsc::UnboundedSender<Seen>);

impl Drop for DropGuard {
    fn drop(&mut self) {
        let _ = self.1.send(Seen::Dropped(self.0.clone()));
    }
}

struct Handlers(mpsc::UnboundedSender<Seen>);

#[async_trait::async_trait]
impl awa::Handler for Handlers {
    async fn handle(&self, ctx: JobContext) -> awa::HandlerResult {
        let name = ctx.job.args["name"].as_str().unwrap().to_string();
        let _ = self.0.send(Seen::Started(name.clone()));
        match ctx.job.kind.as_str() {
            "polite" => {
                ctx.cancelled().await;
                assert!(ctx.is_cancelled());
                let _ = self.0.send(Seen::Told(name));
                Ok(Outcome::Complete)
            }
            "stubborn" => {
                let _guard = DropGuard(name, self.0.clone());
                // Ignores the cancel: only dropping its future stops it.
                tokio::time::sleep(Duration::from_secs(3600)).await;
                Ok(Outcome::Complete)
            }
            _ => Ok(Outcome::Complete),
        }
    }
}

async fn next(rx: &mut mpsc::UnboundedReceiver<Seen>) -> Seen {
    tokio::time::timeout(Duration::from_secs(60), rx.recv())
        .await
        .expect("hang guard: the handlers report within a minute")
        .expect("the handlers' channel is open")
}

fn job(kind: &str, name: &str) -> NewJob {
    NewJob::new(
        QueueName::new("cancel").unwrap(),
        kind,
        serde_json::json!({ "name": name }),
    )
}

/// Enqueue `jobs`; their ids, in order.
async fn insert(client: &Client, pool: &sqlx::PgPool, jobs: &[NewJob]) -> Vec<awa::JobId> {
    let inserted = client.insert_raw(pool, jobs).await.unwrap();
    inserted.iter().map(|i| i.id).collect()
}

/// Logs of this test, to count what the worker said.
#[derive(Clone, Default)]
struct Logs(Arc<Mutex<Vec<u8>>>);

impl std::io::Write for Logs {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for Logs {
    type Writer = Logs;
    fn make_writer(&'a self) -> Self::Writer {
        self.clone()
    }
}

#[tokio::test]
async fn a_cancelled_handler_learns_at_once_and_one_that_ignores_it_is_dropped_after_the_grace() {
    let logs = Logs::default();
    let _log = tracing::subscriber::set_default(
        tracing_subscriber::fmt()
            .with_writer(logs.clone())
            .with_ansi(false)
            .with_max_level(tracing::Level::INFO)
            .finish(),
    );
    let db = awa::testing::test_db().await.unwrap();
    let pool = db.pool().await.unwrap();
    let client = Client::new(pool.clone());
    let ids = insert(
        &client,
        &pool,
        &[job("polite", "p"), job("stubborn", "s"), job("after", "a")],
    )
    .await;
    let (tx, mut rx) = mpsc::unbounded_channel();
    let worker = Client::builder(pool.clone())
        .queue("cancel", 2)
        .register_untyped("polite", Handlers(tx.clone()))
        .register_untyped("stubborn", Handlers(tx.clone()))
        .register_untyped("after", Handlers(tx.clone()))
        // Heartbeats cannot be what tells the handlers.
        .heartbeat_interval(Duration::from_secs(3600))
        .cancel_grace(Duration::from_millis(500))
        .without_maintenance()
        .start()
        .await
        .unwrap();
    let mut started = vec![];
    for _ in 0..2 {
        started.push(next(&mut rx).await);
    }
    assert_eq!(
        started,
        vec![Seen::Started("p".into()), Seen::Started("s".into())],
        "two slots: the third job waits"
    );

    // The polite handler is told at once and returns.
    let at = Instant::now();
    assert_eq!(
        client.cancel(ids[0]).await.unwrap().as_deref(),
        Some("running")
    );
    assert_eq!(next(&mut rx).await, Seen::Told("p".into()));
    let told_after = at.elapsed();
    // Its slot went to the third job.
    assert_eq!(next(&mut rx).await, Seen::Started("a".into()));

    // The stubborn one is dropped after the grace.
    client.cancel(ids[1]).await.unwrap();
    assert_eq!(next(&mut rx).await, Seen::Dropped("s".into()));
    eprintln!("a cancel reached its handler after {told_after:?}");

    let stats = worker.shutdown(Duration::from_secs(5)).await.unwrap();
    assert_eq!(stats.dropped, 1, "{stats:?}");
    assert_eq!(stats.completed, 1, "the third job: {stats:?}");
    assert_eq!(
        stats.rejected, 1,
        "the polite handler's late result: {stats:?}"
    );
    for (id, state) in [
        (ids[0], "cancelled"),
        (ids[1], "cancelled"),
        (ids[2], "completed"),
    ] {
        let job = client.job(id).await.unwrap().unwrap();
        assert_eq!(job.state.as_str(), state);
    }
    let text = String::from_utf8(logs.0.lock().unwrap().clone()).unwrap();
    assert_eq!(
        text.matches("did not return within the cancel grace")
            .count(),
        1,
        "said once: {text}"
    );
    assert_eq!(
        text.matches("its handler is told to stop").count(),
        2,
        "each cancel said once: {text}"
    );
}

/// A rescue reaches a worker that still runs the attempt (a slow one, one
/// past its deadline) in the same way.
#[tokio::test]
async fn a_rescued_attempt_is_told_at_once() {
    use awa::planes::exec::ExecPlane;
    let db = awa::testing::test_db().await.unwrap();
    let pool = db.pool().await.unwrap();
    let client = Client::new(pool.clone());
    let id = insert(&client, &pool, &[job("polite", "r")]).await[0];
    let (tx, mut rx) = mpsc::unbounded_channel();
    let worker = Client::builder(pool.clone())
        .queue("cancel", 1)
        .register_untyped("polite", Handlers(tx))
        .heartbeat_interval(Duration::from_secs(3600))
        .without_maintenance()
        .start()
        .await
        .unwrap();
    assert_eq!(next(&mut rx).await, Seen::Started("r".into()));
    // No heartbeat within a second: rescue takes it.
    let plane = awa::planes::exec::PgExecPlane::new(awa::SchemaName::default_schema());
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        tokio::time::sleep(Duration::from_millis(1100)).await;
        let mut conn = pool.acquire().await.unwrap();
        if plane
            .rescue_stale(&mut conn, Duration::from_secs(1), 10)
            .await
            .unwrap()
            == 1
        {
            break;
        }
        assert!(Instant::now() < deadline, "hang guard");
    }
    assert_eq!(next(&mut rx).await, Seen::Told("r".into()));
    let stats = worker.shutdown(Duration::from_secs(5)).await.unwrap();
    assert_eq!(stats.rejected, 1, "its late result: {stats:?}");
    let job = client.job(id).await.unwrap().unwrap();
    assert_eq!(job.state.as_str(), "retryable");
}

/// Running is what has started: at concurrency 2 with a third job claimed
/// into the worker's buffer, the read views say 2 running and 1 buffered
/// (they said 3 running), per job and in the queue's counts; once a slot
/// frees, the buffered job is running.
#[tokio::test]
async fn buffered_jobs_are_not_counted_as_running() {
    use awa::planes::history::{HistoryPlane, PgHistoryPlane};
    let db = awa::testing::test_db().await.unwrap();
    let pool = db.pool().await.unwrap();
    let client = Client::new(pool.clone());
    let ids = insert(
        &client,
        &pool,
        &[job("polite", "1"), job("polite", "2"), job("polite", "3")],
    )
    .await;
    let (tx, mut rx) = mpsc::unbounded_channel();
    let worker = Client::builder(pool.clone())
        .queue("cancel", 2)
        .register_untyped("polite", Handlers(tx))
        .without_maintenance()
        .start()
        .await
        .unwrap();
    for _ in 0..2 {
        next(&mut rx).await;
    }
    let history = PgHistoryPlane::new(awa::SchemaName::default_schema());
    let queue = QueueName::new("cancel").unwrap();
    // The worker says what it buffers within about a second.
    let counts = |want: (i64, i64)| {
        let pool = pool.clone();
        let history = history.clone();
        let queue = queue.clone();
        async move {
            let deadline = Instant::now() + Duration::from_secs(60);
            loop {
                let mut conn = pool.acquire().await.unwrap();
                let stats = history.queue_stats(&mut conn, Some(&queue)).await.unwrap();
                let s = &stats["cancel"];
                let got = (
                    s.get("running").copied().unwrap_or(0),
                    s.get("buffered").copied().unwrap_or(0),
                );
                if got == want {
                    return;
                }
                assert!(Instant::now() < deadline, "hang guard: {got:?} != {want:?}");
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    };
    counts((2, 1)).await;
    let state = |id| {
        let client = Client::new(pool.clone());
        async move { client.job(id).await.unwrap().unwrap().state.as_str() }
    };
    assert_eq!(state(ids[0]).await, "running");
    assert_eq!(state(ids[1]).await, "running");
    assert_eq!(state(ids[2]).await, "buffered");
    // Free a slot: the buffered job starts and is running.
    client.cancel(ids[0]).await.unwrap();
    assert_eq!(next(&mut rx).await, Seen::Told("1".into()));
    assert_eq!(next(&mut rx).await, Seen::Started("3".into()));
    counts((2, 0)).await;
    assert_eq!(state(ids[2]).await, "running");
    worker.shutdown(Duration::from_secs(5)).await.unwrap();
    // A stopped worker leaves no buffer row behind.
    let rows: i64 = sqlx::query_scalar("SELECT count(*) FROM awa.worker_buffers")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(rows, 0);
}
