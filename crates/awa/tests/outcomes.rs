//! What each handler result becomes through a started client, and the
//! hooks that report them: snooze (attempt not counted), permanent failure
//! (on_failed, with the error), dead-lettering (on_dead_lettered), a
//! panicking hook (the others and the finishes carry on), and a running
//! handler that learns it was cancelled.

use awa::{Client, HandlerResult, JobContext, JobError, JobEvent, JobState, Outcome, Progress};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::mpsc;

mod common;
use common::wait_for;

#[derive(Debug, Clone, serde::Serialize, serde::Deserialize, awa::Job)]
#[awa(kind = "outcome", queue = "outcomes", max_attempts = 1)]
struct Do {
    what: String,
}

fn job(what: &str) -> Do {
    Do { what: what.into() }
}

#[tokio::test]
async fn each_result_reaches_its_hook_and_a_panicking_hook_stops_nothing() {
    let db = awa::testing::test_db().await.unwrap();
    let pool = db.pool().await.unwrap();
    {
        let mut conn = pool.acquire().await.unwrap();
        awa::planes::control::queues::QueueConfig {
            dlq_enabled: Some(true),
            ..Default::default()
        }
        .apply(&mut conn, &awa::QueueName::new("outcomes_dlq").unwrap())
        .await
        .unwrap();
    }
    let (tx, mut events) = mpsc::unbounded_channel::<(&'static str, JobEvent)>();
    let snoozed_attempts = Arc::new(Mutex::new(Vec::new()));
    let client = Client::builder(pool.clone())
        .queue("outcomes", 4)
        .queue("outcomes_dlq", 4)
        .maintenance(awa::MaintSettings {
            promote_interval: Duration::from_millis(50),
            ..Default::default()
        })
        .register::<Do>({
            let snoozed_attempts = snoozed_attempts.clone();
            move |job: Do, ctx: JobContext| {
                let snoozed_attempts = snoozed_attempts.clone();
                async move {
                    match job.what.as_str() {
                        "snooze" => {
                            snoozed_attempts.lock().unwrap().push(ctx.attempt());
                            if snoozed_attempts.lock().unwrap().len() == 1 {
                                return Ok(Outcome::Snooze(Duration::from_millis(200)));
                            }
                            Ok(Outcome::Complete)
                        }
                        "fail" => Err(JobError::Permanent("no such user".into())),
                        _ => Ok(Outcome::Complete),
                    }
                }
            }
        })
        .on_event(|_| panic!("a hook that always panics"))
        .on_completed({
            let tx = tx.clone();
            move |e| drop(tx.send(("completed", e.clone())))
        })
        .on_failed({
            let tx = tx.clone();
            move |e| drop(tx.send(("failed", e.clone())))
        })
        .on_dead_lettered(move |e| drop(tx.send(("dead_lettered", e.clone()))))
        .start()
        .await
        .unwrap();

    let snooze = client.insert(&pool, &job("snooze")).await.unwrap();
    let fail = client.insert(&pool, &job("fail")).await.unwrap();
    let dead = client
        .insert_with(
            &pool,
            &job("fail"),
            awa::InsertOpts::new().queue("outcomes_dlq"),
        )
        .await
        .unwrap();
    wait_for(&client, snooze.id, JobState::Completed).await;
    wait_for(&client, fail.id, JobState::Failed).await;
    wait_for(&client, dead.id, JobState::DeadLettered).await;
    client.shutdown(Duration::from_secs(5)).await.unwrap();

    let mut got = Vec::new();
    while let Some((hook, e)) = events.recv().await {
        got.push((hook, e.job_id, e.attempt, e.error));
    }
    got.sort_by_key(|g| g.1);
    let no_such_user = Some("no such user".to_string());
    assert_eq!(
        got,
        vec![
            ("completed", snooze.id, 1, None),
            ("failed", fail.id, 1, no_such_user.clone()),
            ("dead_lettered", dead.id, 1, no_such_user),
        ]
    );
    // A snooze does not count as an attempt.
    assert_eq!(*snoozed_attempts.lock().unwrap(), vec![1, 1]);
}

#[tokio::test]
async fn a_running_handler_learns_it_was_cancelled_at_its_heartbeat() {
    let db = awa::testing::test_db().await.unwrap();
    let pool = db.pool().await.unwrap();
    let (started_tx, mut started) = mpsc::unbounded_channel();
    let (saw_tx, mut saw) = mpsc::unbounded_channel();
    let client = Client::builder(pool.clone())
        .queue("outcomes", 1)
        .without_maintenance()
        .register::<Do>(move |_: Do, ctx: JobContext| {
            let (started_tx, saw_tx) = (started_tx.clone(), saw_tx.clone());
            async move {
                let _ = started_tx.send(());
                let until = Instant::now() + Duration::from_secs(30);
                while Instant::now() < until {
                    // A long job heartbeats with its progress.
                    let ours = ctx
                        .heartbeat(Progress {
                            percent: Some(10),
                            ..Default::default()
                        })
                        .await
                        .unwrap();
                    if !ours {
                        // The heartbeat that found it also sets the flag.
                        let _ = saw_tx.send(ctx.is_cancelled());
                        return HandlerResult::Ok(Outcome::Complete);
                    }
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
                let _ = saw_tx.send(false);
                Ok(Outcome::Complete)
            }
        })
        .start()
        .await
        .unwrap();
    let id = client.insert(&pool, &job("long")).await.unwrap().id;
    started.recv().await.unwrap();
    assert_eq!(client.cancel(id).await.unwrap().as_deref(), Some("running"));
    assert!(
        saw.recv().await.unwrap(),
        "the handler never learnt it was cancelled"
    );
    let stats = client.shutdown(Duration::from_secs(5)).await.unwrap();
    assert_eq!((stats.completed, stats.rejected), (0, 1), "{stats:?}");
    assert_eq!(
        client.job(id).await.unwrap().unwrap().state,
        JobState::Cancelled
    );
}
