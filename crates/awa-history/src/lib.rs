//! Terminal history: what happened to every finished job.
//!
//! Owns (per substrate schema): `done_entries_<n>` (in the queue ring),
//! `count_deltas`, `count_rollups` and the public read view
//! `terminal_jobs`, which hydrates compact terminal facts with the job body
//! still held by the ready ring.
//!
//! Does not own: job bodies, or the decision to reclaim a slot; history is
//! retained for as long as its queue-ring slot lives.

mod error;

pub use error::Error as HistoryError;

/// DDL: defines `awa.install_history_plane(schema, queue_slots)`.
pub const INSTALL_SQL: &str = include_str!("../sql/install_history_plane.sql");
