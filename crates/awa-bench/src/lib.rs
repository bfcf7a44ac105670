//! The benchmark and the chaos suite behind `cargo xtask bench`,
//! `cargo xtask chaos` and the hidden `cargo xtask bench-proc` (one side of
//! the bench's `procs` scenario); `xtask` parses the command line and calls
//! in here. Not published.
//!
//! * `bench` — the scenarios, the baseline, the report and its tables
//! * `chaos` — `awa` worker processes under kill -9 and restarts
//! * `fleet`, `latency` — in-process workers and the pickup latency they
//!   record (also `cargo xtask demo`'s)
//! * `python` — the Python client's environment and wheel (the bench's
//!   `python` scenario; `cargo xtask test` and `release-check` too)

pub mod bench;
pub mod chaos;
pub mod fleet;
pub mod latency;
pub mod python;

/// The error every command returns: each reports it as `error: ...`.
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;
