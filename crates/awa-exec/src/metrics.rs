//! The worker's OpenTelemetry instruments, all in one place: job outcomes
//! per queue and kind, handler duration, claim and finish round trips, and
//! stale writes the guarded finish rejected.
//!
//! Nothing is recorded until [`init`] is called with a meter (from
//! whatever exporter the process runs: `awa worker run --metrics-addr`,
//! `awa serve`, or an application's own provider); before that every
//! record call is one atomic load. The names are the ones Prometheus shows
//! (a counter gains `_total`, a histogram in seconds `_seconds`) and the
//! ones `docs/grafana-awa.json` charts.
//!
//! A leaf of the crate: the worker and the plane call in with plain values
//! (queue, kind, outcome), and nothing here names their types, so the
//! instruments stand below everything that records through them.

use awa_core::JobState;
use opentelemetry::KeyValue;
use opentelemetry::metrics::{Counter, Histogram, Meter};
use std::sync::OnceLock;
use std::time::Duration;

#[derive(Debug)]
struct Instruments {
    enqueued: Counter<u64>,
    claimed: Counter<u64>,
    completed: Counter<u64>,
    retried: Counter<u64>,
    failed: Counter<u64>,
    dead_lettered: Counter<u64>,
    cancelled: Counter<u64>,
    snoozed: Counter<u64>,
    rejected: Counter<u64>,
    handler: Histogram<f64>,
    claim: Histogram<f64>,
    finish: Histogram<f64>,
}

static INSTRUMENTS: OnceLock<Instruments> = OnceLock::new();

/// Latency buckets in seconds: 0.5 ms to 60 s.
const BUCKETS: &[f64] = &[
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
    60.0,
];

/// Start recording through `meter`. Later calls change nothing.
pub fn init(meter: &Meter) {
    let counter = |name: &'static str, help: &'static str| {
        meter.u64_counter(name).with_description(help).build()
    };
    let seconds = |name: &'static str, help: &'static str| {
        meter
            .f64_histogram(name)
            .with_unit("s")
            .with_description(help)
            .with_boundaries(BUCKETS.to_vec())
            .build()
    };
    let _ = INSTRUMENTS.set(Instruments {
        enqueued: counter("awa_jobs_enqueued", "Jobs inserted through the awa client"),
        claimed: counter("awa_jobs_claimed", "Jobs claimed by this process"),
        completed: counter("awa_jobs_completed", "Jobs completed (accepted finishes)"),
        retried: counter("awa_jobs_retried", "Attempts that failed and were scheduled to retry"),
        failed: counter("awa_jobs_failed", "Jobs failed for good"),
        dead_lettered: counter("awa_jobs_dead_lettered", "Jobs moved to the dead-letter queue"),
        cancelled: counter("awa_jobs_cancelled", "Jobs cancelled by their handler"),
        snoozed: counter("awa_jobs_snoozed", "Attempts snoozed by their handler"),
        rejected: counter(
            "awa_stale_writes_rejected",
            "Finishes rejected because the attempt was no longer current (rescued, cancelled or already finished)",
        ),
        handler: seconds("awa_handler_duration", "Time a handler ran"),
        claim: seconds("awa_claim_duration", "Round trip of one claim call"),
        finish: seconds("awa_finish_duration", "Round trip of one finish call"),
    });
}

/// Whether [`init`] was called (the worker then keeps each job's queue and
/// kind with its result, for the labels).
pub fn enabled() -> bool {
    INSTRUMENTS.get().is_some()
}

fn labels(queue: &str, kind: &str) -> [KeyValue; 2] {
    [
        KeyValue::new("queue", queue.to_string()),
        KeyValue::new("kind", kind.to_string()),
    ]
}

/// One job inserted by a producer in this process (the `awa` client).
pub fn enqueued(queue: &str, kind: &str) {
    if let Some(m) = INSTRUMENTS.get() {
        m.enqueued.add(1, &labels(queue, kind));
    }
}

pub(crate) fn claimed(queue: &str, kind: &str, n: u64) {
    if let Some(m) = INSTRUMENTS.get() {
        m.claimed.add(n, &labels(queue, kind));
    }
}

pub(crate) fn claim_round_trip(queue: &str, took: Duration) {
    if let Some(m) = INSTRUMENTS.get() {
        m.claim.record(
            took.as_secs_f64(),
            &[KeyValue::new("queue", queue.to_string())],
        );
    }
}

pub(crate) fn finish_round_trip(took: Duration) {
    if let Some(m) = INSTRUMENTS.get() {
        m.finish.record(took.as_secs_f64(), &[]);
    }
}

pub(crate) fn handler_ran(queue: &str, kind: &str, took: Duration) {
    if let Some(m) = INSTRUMENTS.get() {
        m.handler.record(took.as_secs_f64(), &labels(queue, kind));
    }
}

/// One row `finish` returned: whether it was `accepted` and where the job
/// went, for the job in `queue` of `kind` (`"unknown"` when the worker did
/// not keep them).
pub(crate) fn finished(accepted: bool, next_state: Option<JobState>, queue: &str, kind: &str) {
    let Some(m) = INSTRUMENTS.get() else { return };
    let labels = labels(queue, kind);
    if !accepted {
        m.rejected.add(1, &labels);
        return;
    }
    let counter = match next_state {
        Some(JobState::Completed) => &m.completed,
        Some(JobState::Retryable) => &m.retried,
        Some(JobState::Failed) => &m.failed,
        Some(JobState::DeadLettered) => &m.dead_lettered,
        Some(JobState::Cancelled) => &m.cancelled,
        Some(JobState::Snoozed) => &m.snoozed,
        // A release hands the job back untouched: not an outcome.
        _ => return,
    };
    counter.add(1, &labels);
}
