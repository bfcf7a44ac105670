//! Batches finished attempts into one guarded `finish` call per batch.
//!
//! Handlers hand their result to a channel; this task sorts them into
//! [`STREAMS`] streams by claim batch and each stream writes whatever has
//! accumulated in one round trip, one call at a time. Under load batches
//! grow by themselves; when idle a single result is written at once.
//!
//! A failed write is never retried forever with the same input:
//! - a transient error (connection, pool, serialization, timeout; see
//!   [`ExecError::is_transient`]) is retried with backoff, since losing a
//!   completion means running the job again;
//! - a permanent error (the data itself: SQLSTATE 22, 23, 42, ...) splits
//!   the batch, and each result is written on its own, so one unstorable
//!   result cannot hold back the others;
//! - a result that still fails on its own is recorded in a fallback form
//!   (a retry with the default backoff and an error text saying the result
//!   could not be stored), or, if even that fails, dropped with an error
//!   log: the attempt stays open and maintenance rescues it once it is
//!   stale (at-least-once).
//!
//! Graceful shutdown bounds this task from outside: past the grace
//! deadline the worker aborts it, and whatever was not recorded is rescued.

use super::{About, Done, JobEvent, Stats};
use crate::{ExecError, ExecPlane, Finish, Finished, PgExecPlane};
use awa_core::AttemptToken;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;
use tokio::sync::mpsc;

/// Largest finish call: one claim batch. A call pays a fixed cost (the
/// function's entry, its executor start-up, the round trip: about 0.9 ms
/// of server time) plus a few microseconds per attempt on the lean path,
/// whose statement sorts nothing and grows linearly with the call; at 256
/// a 200,000-job drain made twice as many calls as claims, and the fixed
/// costs were a third of its finish time (docs/benchmarks.md, "A finish
/// that sorts nothing").
const MAX_BATCH: usize = 512;

/// Backoff between retries of a transient failure.
const RETRY_FIRST: Duration = Duration::from_millis(50);
const RETRY_MAX: Duration = Duration::from_secs(5);

/// Longest database message quoted in a fallback error text.
const MAX_QUOTED_ERROR: usize = 512;

type Item = (AttemptToken, Finish);

/// Where accepted results are reported once committed (lifecycle hooks).
type Events = Option<mpsc::UnboundedSender<JobEvent>>;

/// Finish calls in flight at once. Results are split into this many
/// streams by their claim batch, each with at most one call in flight, so
/// two calls never close items of the same batch at once (that would be
/// correct, but the loser of the link race waits for the winner's commit
/// and decides again on the general path), while one stream's commit
/// overlaps the other's statement: one serial stream kept the server half
/// idle during a drain (a claim and a finish each waiting on the other's
/// round trip and WAL flush).
const STREAMS: usize = 2;

/// One stream's results waiting for their call.
#[derive(Default)]
struct Stream {
    items: Vec<Item>,
    about: Vec<Option<Arc<About>>>,
    /// The task writing its call, while one runs.
    writing: Option<tokio::task::Id>,
}

pub(crate) async fn run(
    pool: sqlx::PgPool,
    plane: Arc<PgExecPlane>,
    mut rx: mpsc::UnboundedReceiver<Done>,
    stats: Arc<Stats>,
    events: Events,
) {
    let mut streams: Vec<Stream> = (0..STREAMS).map(|_| Stream::default()).collect();
    // Each call is a task of its own; dropped with this task (shutdown
    // past its grace aborts it), they are aborted too.
    let mut writes = tokio::task::JoinSet::new();
    let mut open = true;
    loop {
        // Every idle stream with results writes them: what accumulated
        // while its previous call ran, up to MAX_BATCH.
        for stream in streams.iter_mut() {
            if stream.writing.is_some() || stream.items.is_empty() {
                continue;
            }
            let n = stream.items.len().min(MAX_BATCH);
            let mut batch: Vec<Item> = stream.items.drain(..n).collect();
            let mut about: Vec<Option<Arc<About>>> = stream.about.drain(..n).collect();
            let (pool, plane, stats, events) =
                (pool.clone(), plane.clone(), stats.clone(), events.clone());
            let task = writes.spawn(async move {
                write_batch(&pool, &plane, &mut batch, &mut about, &stats, &events).await;
            });
            stream.writing = Some(task.id());
        }
        if !open && writes.is_empty() {
            return;
        }
        tokio::select! {
            item = rx.recv(), if open => {
                let Some(first) = item else {
                    open = false;
                    continue;
                };
                let mut next = Some(first);
                let mut taken = 0;
                while let Some((token, finish, job)) = next.take() {
                    let stream = &mut streams[stream_of(&token)];
                    stream.items.push((token, finish));
                    stream.about.push(job);
                    taken += 1;
                    if taken < STREAMS * MAX_BATCH {
                        next = rx.try_recv().ok();
                    }
                }
            }
            Some(ended) = writes.join_next_with_id(), if !writes.is_empty() => {
                // A call that panicked ends its stream's write too: its
                // attempts stay open and are rescued once stale.
                let id = match ended {
                    Ok((id, ())) => id,
                    Err(err) => {
                        tracing::error!(error = %err, "a finish call's task failed; its attempts are rescued once stale");
                        err.id()
                    }
                };
                for stream in streams.iter_mut().filter(|s| s.writing == Some(id)) {
                    stream.writing = None;
                }
            }
        }
    }
}

/// The stream of a result: by its claim batch, so one batch's items are
/// always written by the same stream.
fn stream_of(token: &AttemptToken) -> usize {
    usize::try_from(token.batch_id.rem_euclid(STREAMS as i64)).unwrap_or(0)
}

async fn write_batch(
    pool: &sqlx::PgPool,
    plane: &PgExecPlane,
    batch: &mut Vec<Item>,
    about: &mut Vec<Option<Arc<About>>>,
    stats: &Stats,
    events: &Events,
) {
    match write_retrying(pool, plane, batch).await {
        Ok(finished) => record(stats, events, batch, about, &finished),
        Err(err) if batch.len() == 1 => {
            let item = batch.pop().expect("one item");
            let job = about.pop().expect("one item");
            write_fallback(pool, plane, item, job, err, stats, events).await;
        }
        Err(err) => {
            tracing::warn!(error = %err, jobs = batch.len(),
                "a result in this batch cannot be stored; writing the results one by one");
            for (item, job) in batch.drain(..).zip(about.drain(..)) {
                match write_retrying(pool, plane, std::slice::from_ref(&item)).await {
                    Ok(finished) => record(
                        stats,
                        events,
                        std::slice::from_ref(&item),
                        std::slice::from_ref(&job),
                        &finished,
                    ),
                    Err(err) => write_fallback(pool, plane, item, job, err, stats, events).await,
                }
            }
        }
    }
    batch.clear();
    about.clear();
}

/// Write `items` in one call, retrying transient failures with backoff;
/// a permanent failure is returned.
async fn write_retrying(
    pool: &sqlx::PgPool,
    plane: &PgExecPlane,
    items: &[Item],
) -> Result<Vec<Finished>, ExecError> {
    let mut delay = RETRY_FIRST;
    loop {
        let result = async {
            let mut conn = pool.acquire().await?;
            plane.finish(&mut conn, items).await
        }
        .await;
        match result {
            Ok(finished) => return Ok(finished),
            Err(err) if err.is_transient() => {
                tracing::error!(error = %err, jobs = items.len(),
                    "could not record finished attempts (transient); retrying");
                tokio::time::sleep(delay).await;
                delay = (delay * 2).min(RETRY_MAX);
            }
            Err(err) => return Err(err),
        }
    }
}

/// One result the database refused on its own: record a retry with the
/// default backoff instead, saying why, or drop it (maintenance rescues the
/// attempt) if even that cannot be stored.
async fn write_fallback(
    pool: &sqlx::PgPool,
    plane: &PgExecPlane,
    (token, finish): Item,
    job: Option<Arc<About>>,
    err: ExecError,
    stats: &Stats,
    events: &Events,
) {
    stats.unstorable.fetch_add(1, Ordering::Relaxed);
    if finish == Finish::Release {
        // Counting an attempt for a release would be wrong; the attempt is
        // rescued (and retried) once stale instead.
        tracing::error!(job_id = %token.job_id, run_lease = %token.run_lease, error = %err,
            "could not release the attempt; maintenance will rescue it once it is stale");
        return;
    }
    tracing::error!(job_id = %token.job_id, run_lease = %token.run_lease, error = %err,
        "the handler's result cannot be stored; recording a retry with the default backoff instead");
    let fallback = Finish::Retry {
        delay: None,
        error: fallback_text(&finish, &err),
    };
    let item = [(token, fallback)];
    match write_retrying(pool, plane, &item).await {
        Ok(finished) => record(stats, events, &item, &[job], &finished),
        Err(err) => tracing::error!(job_id = %token.job_id, run_lease = %token.run_lease,
            error = %err,
            "not even the fallback result could be stored; dropping it: maintenance will rescue the attempt once it is stale (at-least-once)"),
    }
}

/// The error text of a fallback retry: plain ASCII, so it is storable
/// whatever the database encoding. For a database refusal only PostgreSQL's
/// message and SQLSTATE are quoted, never its DETAIL: a constraint
/// violation's detail repeats the refused row (the job's args and the very
/// text that was refused), which would make the fallback fail the same way
/// and copy job data into an error message.
fn fallback_text(finish: &Finish, err: &ExecError) -> String {
    let reason = match err {
        ExecError::Database(sqlx::Error::Database(db)) => match db.code() {
            Some(code) => format!("{} (SQLSTATE {code})", db.message()),
            None => db.message().to_string(),
        },
        other => other.to_string(),
    };
    let quoted: String = reason
        .chars()
        .map(|c| {
            if c.is_ascii() && !c.is_ascii_control() {
                c
            } else {
                '?'
            }
        })
        .take(MAX_QUOTED_ERROR)
        .collect();
    format!(
        "the handler's result ({}) could not be stored and was replaced by a retry with the default backoff: {quoted}",
        finish.outcome()
    )
}

/// Count what was written and report accepted results to the hooks. Runs
/// only once `finish` returned, so after its transaction committed: a call
/// that failed (and rolled back) reports nothing, and is retried or split.
fn record(
    stats: &Stats,
    events: &Events,
    items: &[Item],
    about: &[Option<Arc<About>>],
    finished: &[Finished],
) {
    // `finish` answers in input order, one row per item.
    for (i, f) in finished.iter().enumerate() {
        let (queue, kind) = about
            .get(i)
            .and_then(|a| a.as_deref())
            .map_or(("unknown", "unknown"), |a| {
                (a.queue.as_str(), a.kind.as_str())
            });
        crate::metrics::finished(f.accepted, f.next_state, queue, kind);
        if f.accepted {
            stats.record(f.next_state);
            if let (Some(tx), Some(state), Some(Some(job)), Some((_, finish))) =
                (events, f.next_state, about.get(i), items.get(i))
            {
                let _ = tx.send(JobEvent {
                    job_id: f.job_id,
                    run_lease: f.run_lease,
                    queue: job.queue.clone(),
                    kind: job.kind.clone(),
                    attempt: job.attempt,
                    state,
                    error: finish.error_text().map(str::to_owned),
                });
            }
        } else {
            stats.rejected.fetch_add(1, Ordering::Relaxed);
            tracing::warn!(job_id = %f.job_id, run_lease = %f.run_lease,
                "finish rejected: the attempt is no longer current (rescued, cancelled or already finished)");
        }
    }
}
