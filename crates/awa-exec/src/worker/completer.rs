//! Batches finished attempts into one guarded `finish` call per batch.
//!
//! Handlers hand their result to a channel; this task drains whatever has
//! accumulated and writes it in one round trip. Under load batches grow by
//! themselves; when idle a single result is written at once.

use super::Stats;
use crate::{ExecPlane, Finish, PgExecPlane};
use awa_core::AttemptToken;
use std::sync::Arc;
use tokio::sync::mpsc;

/// The planner cannot see a batch's size (it guesses 10 rows for the
/// arrays), so `finish` joins attempts to their closures with a nested
/// loop; past ~128 attempts that costs more per job than it saves in
/// round trips (measured in docs/benchmarks.md).
const MAX_BATCH: usize = 128;

pub(crate) async fn run(
    pool: sqlx::PgPool,
    plane: Arc<PgExecPlane>,
    mut rx: mpsc::UnboundedReceiver<(AttemptToken, Finish)>,
    stats: Arc<Stats>,
) {
    let mut batch = Vec::with_capacity(MAX_BATCH);
    while let Some(first) = rx.recv().await {
        batch.push(first);
        while batch.len() < MAX_BATCH {
            match rx.try_recv() {
                Ok(item) => batch.push(item),
                Err(_) => break,
            }
        }
        write_batch(&pool, &plane, &mut batch, &stats).await;
    }
}

async fn write_batch(
    pool: &sqlx::PgPool,
    plane: &PgExecPlane,
    batch: &mut Vec<(AttemptToken, Finish)>,
    stats: &Stats,
) {
    // A failed write is retried: losing a completion would mean running the
    // job again, which at-least-once allows but we avoid when we can.
    let mut delay = std::time::Duration::from_millis(50);
    loop {
        let result = async {
            let mut conn = pool.acquire().await?;
            plane.finish(&mut conn, batch).await
        }
        .await;
        match result {
            Ok(finished) => {
                for f in finished {
                    if f.accepted {
                        stats.record(f.next_state);
                    } else {
                        stats
                            .rejected
                            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        tracing::warn!(job_id = %f.job_id, run_lease = %f.run_lease,
                            "finish rejected: the attempt is no longer current (rescued, cancelled or already finished)");
                    }
                }
                batch.clear();
                return;
            }
            Err(err) => {
                tracing::error!(error = %err, jobs = batch.len(), "could not record finished attempts; retrying");
                tokio::time::sleep(delay).await;
                delay = (delay * 2).min(std::time::Duration::from_secs(5));
            }
        }
    }
}
