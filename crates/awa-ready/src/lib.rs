//! The ready plane: runnable work, appended to the current slot of the
//! queue ring and claimed in ordered lanes.
//!
//! Owns (per substrate schema): `ready_entries` and its ring slots
//! `ready_entries_<n>`, `ready_tombstones_<n>`, and the `job_id_seq` and
//! `ready_seq` sequences. Rows here are append-only: a claim advances the
//! lane head (control plane), a cancellation adds a tombstone, and only the
//! maintenance leader removes rows, a whole slot at a time.
//!
//! Does not own: lane heads and ring ledgers (awa-control), claim batches
//! (awa-exec), terminal facts (awa-history). It never truncates anything.

mod error;
mod producer;

pub use error::ReadyError;
pub use producer::{Enqueued, PgReadyPlane, ReadyPlane};

/// DDL: defines `awa.install_ready_plane(schema, queue_slots)`, called by
/// the substrate installer.
pub const INSTALL_SQL: &str = include_str!("../sql/install_ready_plane.sql");

/// Runtime functions installed into every substrate (`{schema}` is replaced
/// by the substrate's quoted schema name).
pub const FUNCTIONS: &[(&str, &str)] = &[
    ("ready_append", include_str!("../sql/fn_ready_append.sql")),
    ("ready_take", include_str!("../sql/fn_ready_take.sql")),
    ("ready_seal", include_str!("../sql/fn_ready_seal.sql")),
    (
        "ready_tombstone",
        include_str!("../sql/fn_ready_tombstone.sql"),
    ),
    ("unique_take", include_str!("../sql/fn_unique_take.sql")),
    ("unique_derive", include_str!("../sql/fn_unique_derive.sql")),
    ("unique_held", include_str!("../sql/fn_unique_held.sql")),
    (
        "enqueue_oversized",
        include_str!("../sql/fn_enqueue_oversized.sql"),
    ),
    ("enqueue_local", include_str!("../sql/fn_enqueue.sql")),
    ("enqueue", include_str!("../sql/fn_enqueue_routed.sql")),
    (
        "ready_slot_live",
        include_str!("../sql/fn_ready_slot_live.sql"),
    ),
    (
        "ready_relocate",
        include_str!("../sql/fn_ready_relocate.sql"),
    ),
];
