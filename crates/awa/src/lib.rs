//! Awa: a PostgreSQL-only job queue. This crate is what an application
//! depends on.
//!
//! Owns: the application-facing API over the plane crates: [`Client`]
//! (insert typed or untyped jobs in the caller's transaction, on a
//! connection or on the pool), typed jobs ([`Job`], `#[derive(Job)]`),
//! the worker builder ([`ClientBuilder`]: queues, handlers, retry
//! policies, lifecycle hooks, a maintenance-leader candidate by default),
//! and [`testing`] helpers.
//!
//! Does not own: any SQL or table. Enqueue is `awa-ready`, claiming,
//! finishing and the worker runtime are `awa-exec`, read views are
//! `awa-history`, maintenance is `awa-maint`; those crates stay usable on
//! their own. The database must be migrated first (`awa migrate` or
//! `cargo xtask migrate`); [`Client::connect`] and
//! [`ClientBuilder::start`] check it.
//!
//! ```no_run
//! use awa::{Client, Job, JobContext, HandlerResult, Outcome};
//! use std::time::Duration;
//!
//! #[derive(serde::Serialize, serde::Deserialize, awa::Job)]
//! #[awa(kind = "send_welcome", queue = "email")]
//! struct SendWelcome { user_id: i64 }
//!
//! async fn send_welcome(job: SendWelcome, _ctx: JobContext) -> HandlerResult {
//!     println!("welcome, user {}", job.user_id);
//!     Ok(Outcome::Complete)
//! }
//!
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! let pool = sqlx::PgPool::connect("postgres://localhost/app").await?;
//! let client = Client::builder(pool.clone())
//!     .queue("email", 16)
//!     .register::<SendWelcome>(send_welcome)
//!     .start()
//!     .await?;
//!
//! let mut tx = pool.begin().await?;
//! // ... the application's own writes on `tx` ...
//! client.insert(&mut *tx, &SendWelcome { user_id: 42 }).await?;
//! tx.commit().await?; // the job exists exactly when the writes do
//!
//! awa::shutdown_signal().await;
//! client.shutdown(Duration::from_secs(10)).await?;
//! # Ok(())
//! # }
//! ```
//!
//! The sqlx types in this API (`PgPool`, `PgConnection`, transactions)
//! are sqlx 0.9's: an application passes its own transaction only if it
//! uses the same sqlx major (see `docs/adr/0004-sqlx-major-version.md`).

#![warn(missing_docs)]

mod builder;
mod client;
mod error;
mod handler;
mod job;
pub mod middleware;
#[cfg(feature = "otel")]
pub mod otel;
mod retry;
pub mod testing;

pub use builder::ClientBuilder;
pub use client::{Client, Inserted, connect};
pub use error::Error;
pub use handler::JobHandler;
pub use job::{InsertOpts, Job, new_job};
pub use middleware::Middleware;
pub use retry::RetryPolicy;

/// `#[derive(Job)]`: see [`Job`].
pub use awa_macros::Job;

/// Job timeouts: where a job's own is stored, and the error a timed-out
/// attempt records ([`InsertOpts::timeout`], [`ClientBuilder::timeout`]).
pub use awa_core::timeout;
pub use awa_core::{
    DbTime, JobId, JobSelection, JobState, NewJob, Priority, QueueName, SchemaName, Unique,
};
pub use awa_exec::Progress;
pub use awa_exec::worker::{
    DEFAULT_CANCEL_GRACE, Handler, HandlerResult, JobContext, JobError, JobEvent, Outcome,
    StatsSnapshot, Worked,
};
pub use awa_maint::tasks::MaintSettings;

/// Periodic jobs: [`Schedule`] and its
/// missed-fire policy, declared with [`ClientBuilder::cron`].
pub use awa_control::cron::{Missed, Schedule};

/// A schedule that enqueues `job` (its type's kind, queue and priority)
/// at every tick of `cron` (5 or 6 fields, or `@hourly`-style), in UTC:
/// set `timezone` and `missed` on the result to change that. Declare it
/// with [`ClientBuilder::cron`]; the maintenance leader fires each tick
/// exactly once.
///
/// ```
/// use awa::Missed;
///
/// #[derive(serde::Serialize, serde::Deserialize, awa::Job)]
/// #[awa(queue = "reports")]
/// struct BuildReport { full: bool }
///
/// let mut nightly = awa::schedule("nightly", "0 3 * * *", &BuildReport { full: true })?;
/// nightly.timezone = "Europe/Berlin".into();
/// nightly.missed = Missed::CatchUp { limit: 3 };
/// assert_eq!(nightly.kind, "build_report");
/// assert_eq!(nightly.queue, "reports");
///
/// // Refused when built, not when the leader first tries to fire it:
/// assert!(awa::schedule("bad", "61 * * * *", &BuildReport { full: false }).is_err());
/// # Ok::<(), awa::Error>(())
/// ```
pub fn schedule<J: Job>(name: &str, cron: &str, job: &J) -> Result<Schedule, Error> {
    let args = serde_json::to_value(job).map_err(|source| Error::Serialize {
        kind: J::KIND,
        source,
    })?;
    let mut s = Schedule::new(name, cron, J::QUEUE, J::KIND);
    s.args = args;
    if let Some(p) = J::PRIORITY {
        s.priority = p;
    }
    s.max_attempts = J::MAX_ATTEMPTS;
    s.validate()?;
    Ok(s)
}

/// The plane crates, for what this facade does not wrap.
pub mod planes {
    pub use awa_control as control;
    pub use awa_exec as exec;
    pub use awa_history as history;
    pub use awa_maint as maint;
    pub use awa_ready as ready;
}

/// The sqlx this API is written against (0.9).
pub use sqlx;

/// Resolves on Ctrl-C or, on Unix, SIGTERM: what a worker process waits
/// for before [`Client::shutdown`]. When neither signal can be watched it
/// logs why and never resolves (the default signal actions still end the
/// process).
pub use awa_maint::shutdown_signal;

/// The README's examples, compiled as doctests so it cannot drift from the
/// API (it is what crates.io shows).
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;
