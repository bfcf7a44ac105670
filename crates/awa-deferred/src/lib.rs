//! The deferred plane: work that is not runnable yet (scheduled, waiting
//! out a retry backoff, or snoozed) until maintenance promotes it into the
//! ready ring.
//!
//! Owns (per substrate schema): `deferred_jobs`.
//!
//! Does not own: the ready ring it promotes into (it appends through the
//! ready plane's SQL), nor anything in the rings; it never truncates.

mod error;
mod plane;

pub use error::Error as DeferredError;
pub use plane::{DeferredPlane, PgDeferredPlane};

/// DDL: defines `awa.install_deferred_plane(schema)`.
pub const INSTALL_SQL: &str = include_str!("../sql/install_deferred_plane.sql");

/// Runtime functions installed into every substrate.
pub const FUNCTIONS: &[(&str, &str)] = &[
    (
        "deferred_schedule",
        include_str!("../sql/fn_deferred_schedule.sql"),
    ),
    (
        "deferred_promote",
        include_str!("../sql/fn_deferred_promote.sql"),
    ),
];
