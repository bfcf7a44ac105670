//! The client's errors: what went wrong and what to do about it.

use std::time::Duration;

#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A job, option or setting is out of bounds (nothing was written).
    #[error(transparent)]
    Invalid(#[from] awa_core::InvalidInput),
    /// Typed args could not be turned into JSON.
    #[error("the args of job kind {kind:?} cannot be serialized as JSON: {source}")]
    Serialize {
        kind: &'static str,
        source: serde_json::Error,
    },
    #[error(transparent)]
    Ready(#[from] awa_ready::ReadyError),
    #[error(transparent)]
    Exec(#[from] awa_exec::ExecError),
    #[error(transparent)]
    History(#[from] awa_history::HistoryError),
    #[error(transparent)]
    Control(#[from] awa_control::ControlError),
    #[error(transparent)]
    Maint(#[from] awa_maint::MaintError),
    #[error("could not connect to PostgreSQL: {0}")]
    Connect(String),
    #[error("database error: {}", awa_core::db_error::Described(.0))]
    Database(#[from] sqlx::Error),
    /// Two handlers for one kind.
    #[error(
        "job kind {0:?} is registered twice; register one handler per kind (dispatch inside it if you need more)"
    )]
    DuplicateKind(String),
    /// `start` without a queue to serve.
    #[error("a worker needs at least one queue: add .queue(name, concurrency) before .start()")]
    NoQueues,
    /// The worker stopped with an error of its own.
    #[error("the worker task failed: {0}")]
    Worker(String),
    /// `shutdown` did not return within the grace period plus the record
    /// grace: the runtime was abandoned (unfinished attempts are rescued).
    #[error(
        "shutdown did not finish within {0:?}; unfinished attempts are rescued by maintenance once stale"
    )]
    ShutdownTimedOut(Duration),
}
