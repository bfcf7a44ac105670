//! The execution plane: proof of which attempt owns a job, and the worker
//! runtime that holds those attempts.
//!
//! Owns (per substrate schema): the claim ring (`claim_batches_<n>`: one
//! row per claim call listing its jobs; `claim_closures_<n>`: one link per
//! finish call and batch listing the items it closed), the lease ring
//! (`leases_<n>`), `attempt_state` and `parked_attempts`. Every write to a
//! live attempt is guarded by its token `(job_id, run_lease, claim_slot,
//! batch_id, item)`: the links of a batch are numbered and the next
//! number's primary key lets exactly one finisher of an item win, so a
//! stale or rescued attempt is rejected, never applied.
//!
//! The claim composes the ready plane's take (`ready_lock`, then
//! `ready_take_locked`, or for one lane its own statement that reads the
//! lane and writes the batch at once) and the finish path
//! writes into the deferred, history and DLQ planes, each through one SQL
//! statement so a batch costs one round trip.
//!
//! Does not own: job bodies (ready and deferred planes), terminal facts
//! (awa-history), ring cursors (awa-control). It never truncates.

mod bulk;
mod error;
pub mod metrics;
mod plane;
pub mod worker;

pub use bulk::{BulkCancelled, CancelledJob, cancel_matching};
pub use error::Error as ExecError;
pub use plane::{
    AttemptProgress, ExecPlane, Finish, Finished, Frontier, PgExecPlane, Progress, Published,
    cancel_in,
};

/// DDL: defines `awa.install_exec_plane(schema, lease_slots, claim_slots)`.
pub const INSTALL_SQL: &str = include_str!("../sql/install_exec_plane.sql");

/// Runtime functions installed into every substrate.
pub const FUNCTIONS: &[(&str, &str)] = &[
    ("claim", include_str!("../sql/fn_claim.sql")),
    ("limit_take", include_str!("../sql/fn_limit_take.sql")),
    ("limit_record", include_str!("../sql/fn_limit_record.sql")),
    ("attempt_push", include_str!("../sql/fn_attempt_push.sql")),
    (
        "claim_batch_whole",
        include_str!("../sql/fn_claim_batch_whole.sql"),
    ),
    ("finish", include_str!("../sql/fn_finish.sql")),
    ("heartbeat", include_str!("../sql/fn_heartbeat.sql")),
    ("cancel_job", include_str!("../sql/fn_cancel_job.sql")),
    (
        "exec_slot_live",
        include_str!("../sql/fn_exec_slot_live.sql"),
    ),
    ("rescue_stale", include_str!("../sql/fn_rescue_stale.sql")),
    ("exec_park", include_str!("../sql/fn_exec_park.sql")),
    (
        "claim_floor_advance",
        include_str!("../sql/fn_claim_floor_advance.sql"),
    ),
];
