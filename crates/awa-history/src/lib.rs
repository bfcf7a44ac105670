//! Terminal history: what happened to every finished job.
//!
//! Owns (per substrate schema): `done_batches_<n>` (one row per finish
//! call, queue slot and queue for the completions of that call) and
//! `done_entries_<n>` (one row per completion whose body had to be
//! copied), both in the queue ring; `failure_entries` (one row per failed
//! or cancelled job, outside the rings, kept for the substrate's failure
//! retention and retryable meanwhile: ADR 11); `count_deltas`,
//! `count_rollups` and the public read view `terminal_jobs`, which
//! hydrates every shape with the job body and returns one row per terminal
//! job, with its attempt records.
//!
//! Does not own: job bodies, or the decision to reclaim a slot; completed
//! history is retained for as long as its queue-ring slot lives.

mod activity;
mod attempts;
mod error;
mod operator;
mod plane;
mod retry;

pub use activity::ActivityMinute;
pub use attempts::{AttemptRecord, AttemptRuntime, Holder};
pub use error::Error as HistoryError;
pub use operator::{JobFilter, ThroughputPoint};
pub use plane::{
    HistoryPlane, JobView, PendingState, PgHistoryPlane, PrunedHorizon, QueueStats, job_in,
};
pub use retry::{KeptFailure, Retried, retry_in, retry_matching};

/// DDL: defines `awa.install_history_plane(schema, queue_slots)`.
pub const INSTALL_SQL: &str = include_str!("../sql/install_history_plane.sql");

/// Runtime objects installed into every substrate: the cross-plane `jobs`
/// read view (terminal_jobs is created by the DDL above).
pub const FUNCTIONS: &[(&str, &str)] = &[
    ("jobs", include_str!("../sql/view_jobs.sql")),
    ("jobs_page", include_str!("../sql/fn_jobs_page.sql")),
    ("routed_jobs", include_str!("../sql/fn_routed_jobs.sql")),
    ("terminal_job", include_str!("../sql/fn_terminal_job.sql")),
    ("job_body", include_str!("../sql/fn_job_body.sql")),
    ("failure_retry", include_str!("../sql/fn_failure_retry.sql")),
    (
        "history_retire_slot",
        include_str!("../sql/fn_history_retire_slot.sql"),
    ),
];
