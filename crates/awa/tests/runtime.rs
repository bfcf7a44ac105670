//! A started client against real PostgreSQL: the maintenance leader runs
//! by default, checkpoints reach the next attempt, lifecycle hooks fire
//! once per committed result and never for one that rolled back or was
//! rejected, and shutdown waits for or releases in-flight work.

use awa::{Client, HandlerResult, InsertOpts, JobContext, JobError, JobEvent, JobState, Outcome};
use awa::{MaintSettings, RetryPolicy};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::mpsc;

mod common;
use common::wait_for;

#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize, awa::Job)]
#[awa(kind = "step", queue = "steps")]
struct Step {
    n: u32,
}

/// Maintenance fast enough for tests (promotion every 50 ms).
fn quick_maintenance() -> MaintSettings {
    MaintSettings {
        promote_interval: Duration::from_millis(50),
        ..MaintSettings::default()
    }
}

#[tokio::test]
async fn the_maintenance_leader_runs_by_default_so_scheduled_jobs_and_retries_run() {
    let db = awa::testing::test_db().await.unwrap();
    let pool = db.pool().await.unwrap();
    let attempts = Arc::new(Mutex::new(Vec::new()));
    let client = Client::builder(pool.clone())
        .queue("steps", 4)
        .maintenance(quick_maintenance())
        .retry_policy::<Step>(RetryPolicy::fixed(Duration::from_millis(200)))
        .register::<Step>({
            let attempts = attempts.clone();
            move |step: Step, ctx: JobContext| {
                let attempts = attempts.clone();
                async move {
                    attempts.lock().unwrap().push((step.n, ctx.attempt()));
                    if step.n == 2 && ctx.attempt() == 1 {
                        return Err(JobError::Retry("first attempt fails".into()));
                    }
                    Ok(Outcome::Complete)
                }
            }
        })
        .start()
        .await
        .unwrap();
    // Nothing else runs: no `awa maint`, no other worker.
    let scheduled = client
        .insert_with(
            &pool,
            &Step { n: 1 },
            InsertOpts::new().run_in(Duration::from_millis(500)),
        )
        .await
        .unwrap();
    assert!(scheduled.scheduled);
    let retried = client.insert(&pool, &Step { n: 2 }).await.unwrap();
    wait_for(&client, scheduled.id, JobState::Completed).await;
    wait_for(&client, retried.id, JobState::Completed).await;
    client.shutdown(Duration::from_secs(5)).await.unwrap();
    let mut seen = attempts.lock().unwrap().clone();
    seen.sort();
    assert_eq!(seen, vec![(1, 1), (2, 1), (2, 2)]);
}

#[tokio::test]
async fn a_checkpoint_written_on_attempt_one_is_read_on_attempt_two() {
    let db = awa::testing::test_db().await.unwrap();
    let pool = db.pool().await.unwrap();
    let read = Arc::new(Mutex::new(Vec::new()));
    let client = Client::builder(pool.clone())
        .queue("steps", 2)
        .maintenance(quick_maintenance())
        .retry_policy::<Step>(RetryPolicy::fixed(Duration::from_millis(100)))
        .register::<Step>({
            let read = read.clone();
            move |_: Step, ctx: JobContext| {
                let read = read.clone();
                async move {
                    let checkpoint = ctx
                        .checkpoint()
                        .await
                        .map_err(|e| JobError::Retry(e.to_string()))?;
                    read.lock().unwrap().push((ctx.attempt(), checkpoint));
                    if ctx.attempt() == 1 {
                        let saved = ctx
                            .save_checkpoint(serde_json::json!({"done_through": 41}))
                            .await
                            .map_err(|e| JobError::Retry(e.to_string()))?;
                        assert!(saved, "the attempt is ours");
                        return Err(JobError::Retry("interrupted after row 41".into()));
                    }
                    Ok(Outcome::Complete)
                }
            }
        })
        .start()
        .await
        .unwrap();
    let job = client.insert(&pool, &Step { n: 1 }).await.unwrap();
    wait_for(&client, job.id, JobState::Completed).await;
    client.shutdown(Duration::from_secs(5)).await.unwrap();
    assert_eq!(
        *read.lock().unwrap(),
        vec![
            (1, None),
            (2, Some(serde_json::json!({"done_through": 41})))
        ]
    );
}

/// Hooks that forward every event to a channel.
fn forwarding() -> (
    impl Fn(&JobEvent) + Send + Sync + 'static,
    mpsc::UnboundedReceiver<JobEvent>,
) {
    let (tx, rx) = mpsc::unbounded_channel();
    (move |e: &JobEvent| drop(tx.send(e.clone())), rx)
}

#[tokio::test]
async fn a_completion_hook_fires_once_per_completion_after_it_commits() {
    let db = awa::testing::test_db().await.unwrap();
    let pool = db.pool().await.unwrap();
    let (hook, mut events) = forwarding();
    let client = Client::builder(pool.clone())
        .queue("steps", 8)
        .without_maintenance()
        .register::<Step>(|_: Step, _: JobContext| async { Ok(Outcome::Complete) })
        .on_completed(hook)
        .start()
        .await
        .unwrap();
    let jobs: Vec<Step> = (0..200).map(|n| Step { n }).collect();
    let inserted = client.insert_many(&pool, &jobs).await.unwrap();
    let mut seen = std::collections::HashSet::new();
    while seen.len() < inserted.len() {
        let e = tokio::time::timeout(Duration::from_secs(30), events.recv())
            .await
            .expect("an event within 30 s")
            .unwrap();
        assert_eq!(
            (e.kind.as_str(), e.queue.as_str(), e.state),
            ("step", "steps", JobState::Completed)
        );
        assert!(seen.insert(e.job_id), "job {} reported twice", e.job_id);
        // Reported after commit: another session already sees it finished.
        let state = client.job(e.job_id).await.unwrap().unwrap().state;
        assert_eq!(
            state,
            JobState::Completed,
            "job {} reported before commit",
            e.job_id
        );
    }
    client.shutdown(Duration::from_secs(5)).await.unwrap();
    assert!(
        events.recv().await.is_none(),
        "no event after the last completion"
    );
}

#[tokio::test]
async fn no_hook_fires_for_a_finish_that_rolled_back_and_the_retried_write_fires_once() {
    let db = awa::testing::test_db().await.unwrap();
    let pool = db.pool().await.unwrap();
    let (hook, mut events) = forwarding();
    let client = Client::builder(pool.clone())
        .queue("steps", 1)
        .without_maintenance()
        .register::<Step>(|_: Step, _: JobContext| async { Ok(Outcome::Complete) })
        .on_event(hook)
        .start()
        .await
        .unwrap();
    // Block every finish: it waits on this lock inside its transaction.
    let mut blocker = pool.begin().await.unwrap();
    sqlx::query("LOCK TABLE awa.claim_closures IN ACCESS EXCLUSIVE MODE")
        .execute(&mut *blocker)
        .await
        .unwrap();
    let job = client.insert(&pool, &Step { n: 1 }).await.unwrap();
    // Find the finish waiting on the lock and kill its session: its
    // transaction rolls back, and the worker retries the write.
    let until = Instant::now() + Duration::from_secs(30);
    let killed = loop {
        let pids: Vec<i32> = sqlx::query_scalar(
            "SELECT pid FROM pg_stat_activity
              WHERE wait_event_type = 'Lock' AND query ILIKE '%finish%' AND pid <> pg_backend_pid()",
        )
        .fetch_all(&pool)
        .await
        .unwrap();
        if let Some(pid) = pids.first() {
            let done: bool = sqlx::query_scalar("SELECT pg_terminate_backend($1)")
                .bind(pid)
                .fetch_one(&pool)
                .await
                .unwrap();
            break done;
        }
        assert!(Instant::now() < until, "no finish ever waited on the lock");
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert!(killed);
    // The rolled-back write reported nothing.
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(
        events.try_recv().is_err(),
        "an event for a write that rolled back"
    );
    blocker.rollback().await.unwrap();
    let e = tokio::time::timeout(Duration::from_secs(30), events.recv())
        .await
        .expect("the retried write commits")
        .unwrap();
    assert_eq!((e.job_id, e.state), (job.id, JobState::Completed));
    client.shutdown(Duration::from_secs(5)).await.unwrap();
    assert!(events.recv().await.is_none(), "reported exactly once");
}

#[tokio::test]
async fn no_hook_fires_for_a_rejected_result_of_a_cancelled_attempt() {
    let db = awa::testing::test_db().await.unwrap();
    let pool = db.pool().await.unwrap();
    let (hook, mut events) = forwarding();
    let (started_tx, mut started) = mpsc::unbounded_channel();
    let release = Arc::new(tokio::sync::Notify::new());
    let client = Client::builder(pool.clone())
        .queue("steps", 1)
        .without_maintenance()
        .register::<Step>({
            let release = release.clone();
            move |_: Step, _: JobContext| {
                let (release, started_tx) = (release.clone(), started_tx.clone());
                async move {
                    let _ = started_tx.send(());
                    release.notified().await;
                    HandlerResult::Ok(Outcome::Complete)
                }
            }
        })
        .on_event(hook)
        .start()
        .await
        .unwrap();
    let job = client.insert(&pool, &Step { n: 1 }).await.unwrap();
    started.recv().await.unwrap();
    assert_eq!(
        client.cancel(job.id).await.unwrap().as_deref(),
        Some("running")
    );
    release.notify_one();
    let stats = client.shutdown(Duration::from_secs(5)).await.unwrap();
    assert_eq!(stats.rejected, 1, "{stats:?}");
    assert!(
        events.recv().await.is_none(),
        "a rejected result was reported"
    );
    assert_eq!(
        client.job(job.id).await.unwrap().unwrap().state,
        JobState::Cancelled
    );
}

#[tokio::test]
async fn shutdown_waits_for_in_flight_work_and_releases_what_outlives_the_grace() {
    let db = awa::testing::test_db().await.unwrap();
    let pool = db.pool().await.unwrap();
    let (started_tx, mut started) = mpsc::unbounded_channel();
    let client = Client::builder(pool.clone())
        .queue("steps", 2)
        .without_maintenance()
        .register::<Step>(move |step: Step, _: JobContext| {
            let started_tx = started_tx.clone();
            async move {
                let _ = started_tx.send(step.n);
                // Job 1 is short, job 2 outlives any grace given here.
                let secs = if step.n == 1 { 1 } else { 600 };
                tokio::time::sleep(Duration::from_secs(secs)).await;
                HandlerResult::Ok(Outcome::Complete)
            }
        })
        .start()
        .await
        .unwrap();
    let short = client.insert(&pool, &Step { n: 1 }).await.unwrap();
    let long = client.insert(&pool, &Step { n: 2 }).await.unwrap();
    started.recv().await.unwrap();
    started.recv().await.unwrap();
    let began = Instant::now();
    let stats = client.shutdown(Duration::from_secs(3)).await.unwrap();
    let took = began.elapsed();
    assert!(
        took >= Duration::from_millis(900),
        "returned before the short job finished: {took:?}"
    );
    assert_eq!((stats.completed, stats.released), (1, 1), "{stats:?}");
    assert_eq!(
        client.job(short.id).await.unwrap().unwrap().state,
        JobState::Completed
    );
    let long = client.job(long.id).await.unwrap().unwrap();
    assert_eq!(
        long.state,
        JobState::Available,
        "released to run again: {long:?}"
    );
    // A second shutdown (any clone) has nothing left to stop.
    client.shutdown(Duration::from_secs(1)).await.unwrap();
}

#[tokio::test]
async fn schedules_declared_in_code_are_upserted_at_start_and_fired_by_the_leader() {
    let db = awa::testing::test_db().await.unwrap();
    let pool = db.pool().await.unwrap();
    // Someone else's schedule, and a stale one of ours.
    {
        let mut conn = pool.acquire().await.unwrap();
        let other = awa::Schedule::new("stale", "@daily", "steps", "step");
        awa::planes::control::cron::upsert(&mut conn, &other)
            .await
            .unwrap();
    }
    let runs = Arc::new(Mutex::new(Vec::new()));
    let client = Client::builder(pool.clone())
        .queue("steps", 2)
        .maintenance(quick_maintenance())
        .cron(awa::schedule("every-second", "* * * * * *", &Step { n: 7 }).unwrap())
        .prune_schedules()
        .register::<Step>({
            let runs = runs.clone();
            move |step: Step, ctx: JobContext| {
                let runs = runs.clone();
                async move {
                    let tick = ctx
                        .metadata()
                        .and_then(|m| m["awa_cron"]["tick"].as_str().map(str::to_owned));
                    runs.lock().unwrap().push((step.n, tick));
                    Ok(Outcome::Complete)
                }
            }
        })
        .start()
        .await
        .unwrap();
    let until = Instant::now() + Duration::from_secs(30);
    while runs.lock().unwrap().len() < 2 {
        assert!(Instant::now() < until, "the schedule never fired twice");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    client.shutdown(Duration::from_secs(5)).await.unwrap();
    let runs = runs.lock().unwrap().clone();
    assert!(
        runs.iter().all(|(n, tick)| *n == 7 && tick.is_some()),
        "{runs:?}"
    );
    let mut conn = pool.acquire().await.unwrap();
    let names: Vec<String> = awa::planes::control::cron::list(&mut conn, false)
        .await
        .unwrap()
        .into_iter()
        .map(|s| s.schedule.name)
        .collect();
    assert_eq!(
        names,
        vec!["every-second"],
        "pruned what the code does not declare"
    );
    // A bad schedule is refused by start, before anything runs.
    let bad = Client::builder(pool.clone())
        .queue("steps", 1)
        .cron(awa::Schedule::new("bad", "every day", "steps", "step"))
        .start()
        .await;
    assert!(matches!(bad, Err(awa::Error::Invalid(_))), "{bad:?}");
}
