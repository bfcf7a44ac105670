//! `cargo xtask demo --serve`: while the dashboard is served, a small
//! system shaped like a real one keeps running on the demo database, so
//! every page has something to show: several queues with different work,
//! failures, retries, dead letters, scheduled jobs, a paused queue with a
//! backlog, and cron schedules fired by the maintenance leader.
//!
//! | queue      | kind              | what happens                                      |
//! |------------|-------------------|---------------------------------------------------|
//! | `email`    | `send_welcome`    | completes in a few ms                             |
//! | `email`    | `send_reminder`   | scheduled minutes ahead                           |
//! | `email`    | `send_digest`     | fired every minute by cron                        |
//! | `images`   | `resize_image`    | 0.1 to 0.4 s; one in 20 fails for good            |
//! | `webhooks` | `deliver_webhook` | first attempt fails (503), one in 3 also its second (timeout); retried |
//! | `payments` | `charge_card`     | one in 8 declined: dead-lettered (the DLQ is on)  |
//! | `reports`  | `build_report`    | a second or two; asked for every 30 s, and nightly by cron |
//! | `exports`  | `export_csv`      | the queue is paused: its backlog waits            |

use crate::BoxError;
use async_trait::async_trait;
use awa_control::cron::{self, Schedule};
use awa_control::queues::QueueConfig;
use awa_core::{NewJob, QueueName, SchemaName};
use awa_exec::worker::{
    Handler, HandlerResult, JobContext, JobError, Outcome, Worker, WorkerConfig,
};
use awa_maint::leader::{self, LeaderConfig};
use awa_maint::tasks::{self, MaintSettings};
use awa_ready::{PgReadyPlane, ReadyPlane};
use sqlx::PgPool;
use std::time::Duration;
use tokio::sync::watch;
use tokio::task::JoinHandle;

/// The producer enqueues five jobs per tick: about 20 jobs/s.
const TICK: Duration = Duration::from_millis(250);

/// The running system; [`Live::stop`] shuts it down gracefully.
#[derive(Debug)]
pub struct Live {
    stop: watch::Sender<bool>,
    producer: JoinHandle<Result<(), BoxError>>,
    worker: JoinHandle<Result<awa_exec::worker::StatsSnapshot, awa_exec::ExecError>>,
    leader: JoinHandle<Result<(), awa_maint::MaintError>>,
}

fn q(name: &str) -> QueueName {
    QueueName::new(name).expect("a valid queue name")
}

fn schema() -> SchemaName {
    SchemaName::default_schema()
}

/// Settings, schedules and a first load of waiting work, then workers, a
/// maintenance leader and a producer.
pub async fn start(pool: &PgPool) -> Result<Live, BoxError> {
    let mut conn = pool.acquire().await?;
    QueueConfig {
        dlq_enabled: Some(true),
        ..QueueConfig::default()
    }
    .apply(&mut conn, &q("payments"))
    .await?;
    QueueConfig {
        paused: Some(true),
        ..QueueConfig::default()
    }
    .apply(&mut conn, &q("exports"))
    .await?;
    let mut nightly = Schedule::new("nightly-report", "0 3 * * *", "reports", "build_report");
    nightly.timezone = "Europe/Berlin".into();
    cron::upsert(&mut conn, &nightly).await?;
    cron::upsert(
        &mut conn,
        &Schedule::new("digest", "* * * * *", "email", "send_digest"),
    )
    .await?;
    let ready = PgReadyPlane::new(schema());
    // Scheduled reminders over the next hour, and the paused backlog.
    let now = chrono::Utc::now();
    let reminders: Vec<NewJob> = (1..=24)
        .map(|i| {
            let mut job = NewJob::new(
                q("email"),
                "send_reminder",
                serde_json::json!({ "user_id": 1000 + i }),
            );
            job.run_at = Some(now + chrono::Duration::minutes(i * 2 + 1));
            job
        })
        .collect();
    ready.enqueue(&mut conn, &reminders).await?;
    let exports: Vec<NewJob> = (0..40)
        .map(|i| {
            NewJob::new(
                q("exports"),
                "export_csv",
                serde_json::json!({ "tenant": i }),
            )
        })
        .collect();
    ready.enqueue(&mut conn, &exports).await?;
    drop(conn);

    let (stop, stop_rx) = watch::channel(false);
    let mut worker = Worker::new(
        pool.clone(),
        WorkerConfig::new(
            schema(),
            vec![
                (q("email"), 8),
                (q("images"), 4),
                (q("webhooks"), 4),
                (q("payments"), 2),
                (q("reports"), 1),
                (q("exports"), 2),
            ],
        ),
    );
    worker.register_default(Demo);
    let mut rx = stop_rx.clone();
    let worker = tokio::spawn(worker.run(async move {
        let _ = rx.wait_for(|s| *s).await;
    }));
    let config = LeaderConfig::new();
    let leader_tasks = tasks::standard(
        &schema(),
        &MaintSettings::default(),
        &config.instance_id.to_string(),
    );
    let leader = tokio::spawn(leader::run(
        config,
        pool.clone(),
        leader_tasks,
        stop_rx.clone(),
        None,
    ));
    let producer = tokio::spawn(produce(pool.clone(), stop_rx));
    Ok(Live {
        stop,
        producer,
        worker,
        leader,
    })
}

impl Live {
    pub async fn stop(self) -> Result<(), BoxError> {
        let _ = self.stop.send(true);
        self.producer.await??;
        self.worker.await??;
        self.leader.await??;
        Ok(())
    }
}

/// A steady mix of new work until told to stop. Each kind's args carry
/// its own counter `n`, which decides the job's fate (see [`Demo`]).
async fn produce(pool: PgPool, mut stop: watch::Receiver<bool>) -> Result<(), BoxError> {
    let ready = PgReadyPlane::new(schema());
    let mut tick = tokio::time::interval(TICK);
    for n in 0u64.. {
        tokio::select! {
            _ = tick.tick() => {}
            _ = stop.wait_for(|s| *s) => break,
        }
        let mut jobs = Vec::new();
        for user in [2 * n, 2 * n + 1] {
            jobs.push(NewJob::new(
                q("email"),
                "send_welcome",
                serde_json::json!({ "n": user, "user_id": user, "email": format!("user{user}@example.com") }),
            ));
        }
        jobs.push(NewJob::new(
            q("images"),
            "resize_image",
            serde_json::json!({ "n": n, "path": format!("uploads/{n}.png"), "width": 640 }),
        ));
        let mut webhook = NewJob::new(
            q("webhooks"),
            "deliver_webhook",
            serde_json::json!({ "n": n, "url": format!("https://hooks.example.com/orders/{n}") }),
        );
        webhook.max_attempts = Some(5);
        jobs.push(webhook);
        jobs.push(NewJob::new(
            q("payments"),
            "charge_card",
            serde_json::json!({ "n": n, "order": n, "amount_cents": 1999 + n % 500 }),
        ));
        // Someone asks for a report every 30 s or so.
        if n % 120 == 0 {
            jobs.push(NewJob::new(
                q("reports"),
                "build_report",
                serde_json::json!({ "n": n, "requested_by": "ops@example.com" }),
            ));
        }
        let mut conn = pool.acquire().await?;
        ready.enqueue(&mut conn, &jobs).await?;
    }
    Ok(())
}

/// Every kind's behaviour, from its args' counter `n` (so the mix is the
/// same on every run) and the attempt number.
#[derive(Debug, Clone, Copy)]
struct Demo;

#[async_trait]
impl Handler for Demo {
    async fn handle(&self, ctx: JobContext) -> HandlerResult {
        let job = &ctx.job;
        let n = job.args.get("n").and_then(|v| v.as_u64()).unwrap_or(0);
        let pause = |ms: u64| tokio::time::sleep(Duration::from_millis(ms));
        match job.kind.as_str() {
            "resize_image" => {
                pause(100 + n % 300).await;
                if n % 20 == 3 {
                    return Err(JobError::Permanent(
                        "unsupported image format: image/heic (convert it before upload)".into(),
                    ));
                }
            }
            "deliver_webhook" => {
                pause(20 + n % 50).await;
                match job.attempt {
                    1 => {
                        return Err(JobError::RetryAfter(
                            Duration::from_secs(3),
                            "POST https://hooks.example.com answered 503 Service Unavailable"
                                .into(),
                        ));
                    }
                    2 if n.is_multiple_of(3) => {
                        return Err(JobError::RetryAfter(
                            Duration::from_secs(5),
                            "timed out after 10 s waiting for hooks.example.com".into(),
                        ));
                    }
                    _ => {}
                }
            }
            "charge_card" => {
                pause(30 + n % 70).await;
                if n % 8 == 5 {
                    return Err(JobError::Permanent(
                        "card declined: insufficient funds (issuer code 51)".into(),
                    ));
                }
            }
            "build_report" => pause(1000 + n % 1000).await,
            _ => pause(2 + n % 10).await,
        }
        Ok(Outcome::Complete)
    }
}
