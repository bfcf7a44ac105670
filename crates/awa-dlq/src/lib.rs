//! The dead-letter plane: failed work held for an operator.
//!
//! Owns (per substrate schema): `dlq_entries`, with full job bodies, so a
//! dead-lettered job outlives the ring slot it came from.
//!
//! Does not own: the decision to dead-letter (the execution plane makes it
//! for queues that opted in), or the ready ring a retried job goes back to.

mod error;
mod plane;

pub use error::Error as DlqError;
pub use plane::{DlqEntry, DlqPlane, KeyHeld, PgDlqPlane, Retried, Selection};

/// DDL: defines `awa.install_dlq_plane(schema)`.
pub const INSTALL_SQL: &str = include_str!("../sql/install_dlq_plane.sql");

/// Runtime functions installed into every substrate.
pub const FUNCTIONS: &[(&str, &str)] = &[("dlq_retry", include_str!("../sql/fn_dlq_retry.sql"))];
