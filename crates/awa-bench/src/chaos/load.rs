//! The producer: jobs at a steady rate, each with a unique id `n` in its
//! args, through the public enqueue API on a pooled connection. A failed
//! enqueue (the database restarting under it) is retried with the same
//! ids, and those ids are remembered: the failure may have hidden a commit,
//! so a second job for them is the producer's doing, not the queue's.

use awa_core::{NewJob, QueueName};
use awa_ready::{PgReadyPlane, ReadyPlane};
use sqlx::PgPool;
use std::collections::BTreeSet;
use std::time::{Duration, Instant};

/// How often a batch goes out.
const TICK: Duration = Duration::from_millis(100);
/// Pause before retrying a failed enqueue.
const RETRY_PAUSE: Duration = Duration::from_millis(250);
/// A batch still failing this long after the load window is given up.
const GIVE_UP_AFTER: Duration = Duration::from_secs(60);

pub const LOAD_KIND: &str = "chaos-load";

#[derive(Debug, Default)]
pub struct Produced {
    /// `(n, job_id)` per acknowledged enqueue.
    pub acked: Vec<(i64, i64)>,
    /// Ids whose enqueue failed at least once.
    pub ambiguous: BTreeSet<i64>,
    /// Failed enqueue calls (each retried).
    pub errors: u64,
    /// Ids never acknowledged because retrying was given up.
    pub abandoned: Vec<i64>,
}

/// A job's handler time, 0 to 199 ms (about 100 on average), so that at
/// any moment a dozen or so jobs are running and a kill lands on some.
fn sleep_ms(n: i64) -> i64 {
    (n * 37) % 200
}

pub async fn produce(pool: PgPool, queue: QueueName, rate: u32, window: Duration) -> Produced {
    let plane = PgReadyPlane::new(awa_core::SchemaName::default_schema());
    let per_tick = (f64::from(rate) * TICK.as_secs_f64()).ceil().max(1.0) as i64;
    let started = Instant::now();
    let give_up = started + window + GIVE_UP_AFTER;
    let mut out = Produced::default();
    let mut next_n = 0i64;
    let mut tick = tokio::time::interval(TICK);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    while started.elapsed() < window {
        tick.tick().await;
        let ns: Vec<i64> = (next_n..next_n + per_tick).collect();
        next_n += per_tick;
        let batch: Vec<NewJob> = ns
            .iter()
            .map(|&n| {
                NewJob::new(
                    queue.clone(),
                    LOAD_KIND,
                    serde_json::json!({ "n": n, "ms": sleep_ms(n) }),
                )
            })
            .collect();
        loop {
            let result = async {
                let mut conn = pool.acquire().await?;
                plane
                    .enqueue(&mut conn, &batch)
                    .await
                    .map_err(|e| Box::new(e) as Box<dyn std::error::Error + Send + Sync>)
            }
            .await;
            match result {
                Ok(enqueued) => {
                    out.acked
                        .extend(ns.iter().zip(&enqueued).map(|(&n, e)| (n, e.job_id.0)));
                    break;
                }
                Err(err) => {
                    out.errors += 1;
                    out.ambiguous.extend(&ns);
                    if Instant::now() >= give_up {
                        tracing::warn!(error = %err, "enqueue still failing; giving up this batch");
                        out.abandoned.extend(&ns);
                        break;
                    }
                    tracing::debug!(error = %err, "enqueue failed; retrying the same ids");
                    tokio::time::sleep(RETRY_PAUSE).await;
                }
            }
        }
    }
    out
}

/// One job on `queue`, outside the load (the orphan, the poison jobs).
pub async fn enqueue_one(
    pool: &PgPool,
    queue: &QueueName,
    kind: &str,
    max_attempts: Option<i32>,
) -> Result<i64, Box<dyn std::error::Error + Send + Sync>> {
    let plane = PgReadyPlane::new(awa_core::SchemaName::default_schema());
    let mut job = NewJob::new(queue.clone(), kind, serde_json::json!({}));
    job.max_attempts = max_attempts;
    let mut conn = pool.acquire().await?;
    let enqueued = plane.enqueue(&mut conn, &[job]).await?;
    Ok(enqueued[0].job_id.0)
}
