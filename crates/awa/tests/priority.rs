//! Priority 1 runs first, 4 last (ADR 12), whichever way a job was made:
//! typed jobs (the derive's default and `InsertOpts`), untyped `NewJob`s,
//! through `work_one` and through a running worker. Within a priority,
//! jobs run in the order they were enqueued.

use awa::{Client, InsertOpts, Job, JobContext, NewJob, Outcome, Priority, QueueName};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// A kind whose type says "run me last".
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize, awa::Job)]
#[awa(kind = "prio_typed", queue = "prio_typed", priority = 4)]
struct Step {
    n: u32,
}

/// The priorities enqueued, in enqueue order: the old code ran them
/// 4,4,4,2,2,2,1,1,1.
const MIXED: [i16; 9] = [4, 2, 1, 4, 2, 1, 4, 2, 1];

/// The run order the rule gives: by priority, then enqueue order.
fn expected() -> Vec<(i16, u32)> {
    let mut e: Vec<(i16, u32)> = MIXED.iter().zip(0..).map(|(p, n)| (*p, n)).collect();
    e.sort_by_key(|(p, n)| (*p, *n));
    e
}

#[test]
fn the_default_priority_is_three_of_one_first_to_four_last() {
    assert_eq!(Priority::default().get(), 3);
    assert_eq!(Step::PRIORITY, Some(4));
}

#[tokio::test]
async fn typed_jobs_run_priority_one_first_through_work_one() {
    let db = awa::testing::test_db().await.unwrap();
    let pool = db.pool().await.unwrap();
    let client = Client::new(pool.clone());
    for (n, p) in MIXED.iter().enumerate() {
        let step = Step { n: n as u32 };
        // 4 is the type's own default; the others are set per insert.
        if *p == 4 {
            client.insert(&pool, &step).await.unwrap();
        } else {
            let opts = InsertOpts::new().priority(*p);
            client.insert_with(&pool, &step, opts).await.unwrap();
        }
    }
    let ran = Arc::new(Mutex::new(Vec::new()));
    let builder = Client::builder(pool.clone()).register::<Step>({
        let ran = ran.clone();
        move |step: Step, ctx: JobContext| {
            let ran = ran.clone();
            async move {
                ran.lock().unwrap().push((ctx.job.priority, step.n));
                Ok(Outcome::Complete)
            }
        }
    });
    while builder.work_one("prio_typed").await.unwrap().is_some() {}
    assert_eq!(*ran.lock().unwrap(), expected());
}

struct Record(Arc<Mutex<Vec<(i16, u32)>>>);

#[async_trait::async_trait]
impl awa::Handler for Record {
    async fn handle(&self, ctx: JobContext) -> awa::HandlerResult {
        let n = ctx.job.args["n"].as_u64().unwrap() as u32;
        self.0.lock().unwrap().push((ctx.job.priority, n));
        Ok(Outcome::Complete)
    }
}

#[tokio::test]
async fn untyped_jobs_run_priority_one_first_in_a_running_worker() {
    let db = awa::testing::test_db().await.unwrap();
    let pool = db.pool().await.unwrap();
    let client = Client::new(pool.clone());
    let queue = QueueName::new("prio_raw").unwrap();
    let jobs: Vec<NewJob> = MIXED
        .iter()
        .enumerate()
        .map(|(n, p)| {
            let mut j = NewJob::new(queue.clone(), "raw", serde_json::json!({ "n": n }));
            j.priority = Priority::new(i64::from(*p)).unwrap();
            j
        })
        .collect();
    client.insert_raw(&pool, &jobs).await.unwrap();
    let ran = Arc::new(Mutex::new(Vec::new()));
    // One at a time, so the run order is the claim order.
    let worker = Client::builder(pool.clone())
        .queue("prio_raw", 1)
        .register_untyped("raw", Record(ran.clone()))
        .without_maintenance()
        .start()
        .await
        .unwrap();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    while ran.lock().unwrap().len() < MIXED.len() {
        assert!(tokio::time::Instant::now() < deadline, "hang guard");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    worker.shutdown(Duration::from_secs(5)).await.unwrap();
    assert_eq!(*ran.lock().unwrap(), expected());
}
