//! The control plane: small tables that coordinate, never on the per-job
//! write path.
//!
//! Owns, once per database in schema `awa`: `schema_version`, `queue_meta`,
//! `runtimes`, `maintenance_leader`, `cron_jobs`, job identity
//! (`job_id_seq`, `job_uniques`: database-wide, shared by every substrate),
//! and routing: `storage_transition_state`, `storage_draining`,
//! `runtime_storage_backends`, the transition functions and
//! [`routing`] (which substrates a runtime writes to and reads from). Per
//! substrate schema: `substrate_info`, `ring_ledger`, `ring_outcomes`,
//! `lane_heads`.
//!
//! Does not own: any job data. It never truncates ring slots; it only
//! records where the rings stand.

pub mod cron;
mod error;
pub mod limits;
mod plane;
pub mod queues;
pub mod rings;
pub mod routing;
pub mod runtimes;
pub mod status;
pub mod substrate;
pub mod transition;
pub mod uniques;

pub use error::ControlError;
pub use plane::{ControlPlane, PgControlPlane};

/// DDL for the control objects in schema `awa` (migration 1).
pub const CONTROL_SCHEMA_SQL: &str = include_str!("../sql/control_schema.sql");

/// The staged storage transition as SQL functions (`awa.storage_prepare`,
/// `awa.storage_enter_mixed`, `awa.storage_finalize`, `awa.storage_abort`),
/// for the CLI and for external migration tools (migration 1).
pub const TRANSITION_SQL: &str = include_str!("../sql/fn_storage_transition.sql");

/// DDL: defines `awa.install_control_plane(schema, queue, lease, claim)`.
pub const INSTALL_SQL: &str = include_str!("../sql/install_control_plane.sql");

/// Runtime functions installed into every substrate: ring rotation and
/// reclamation.
pub const FUNCTIONS: &[(&str, &str)] = &[
    ("ring_helpers", include_str!("../sql/fn_ring_helpers.sql")),
    ("ring_rotate", include_str!("../sql/fn_ring_rotate.sql")),
    ("ring_prune", include_str!("../sql/fn_ring_prune.sql")),
    (
        "storage_transfer_in",
        include_str!("../sql/fn_storage_transfer.sql"),
    ),
];
