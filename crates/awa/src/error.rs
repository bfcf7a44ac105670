//! The client's errors: what went wrong and what to do about it.

use std::time::Duration;

/// Everything the client can fail with. Each message says what was wrong
/// and, where there is something to do, what to do; the variants that wrap
/// a plane crate's error carry its own message unchanged. New variants may
/// be added in a minor release (the enum is non-exhaustive).
///
/// Debug prints the message (see the `Debug` impl below), so a `main` that
/// returns this error (`Result<(), Box<dyn Error>>` included) shows what to
/// do, not the variant's name.
#[derive(thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A job, option or setting is out of bounds (nothing was written).
    #[error(transparent)]
    Invalid(#[from] awa_core::InvalidInput),
    /// Typed args could not be turned into JSON.
    #[error("the args of job kind {kind:?} cannot be serialized as JSON: {source}")]
    Serialize {
        /// The job type's kind.
        kind: &'static str,
        /// What serde_json said.
        source: serde_json::Error,
    },
    /// Enqueue refused or failed (the ready plane): a job too large, a
    /// unique key taken after a REPEATABLE READ snapshot (retry the
    /// transaction), a database error.
    #[error(transparent)]
    Ready(#[from] awa_ready::ReadyError),
    /// Claiming, finishing, cancelling or the worker runtime failed (the
    /// execution plane).
    #[error(transparent)]
    Exec(#[from] awa_exec::ExecError),
    /// Reading a job or the queue counts failed (terminal history).
    #[error(transparent)]
    History(#[from] awa_history::HistoryError),
    /// The control plane refused or failed: a schedule, the routing, the
    /// runtime registry.
    #[error(transparent)]
    Control(#[from] awa_control::ControlError),
    /// The schema check or maintenance failed: among others, a database
    /// that is not migrated (run `awa migrate`) or was migrated by a newer
    /// release than this client.
    #[error(transparent)]
    Maint(#[from] awa_maint::MaintError),
    /// [`crate::Client::connect`] could not reach the server; the message
    /// names it with any password hidden.
    #[error("could not connect to PostgreSQL: {0}")]
    Connect(String),
    /// Any other database error, with PostgreSQL's message, detail and
    /// hint.
    #[error("database error: {}", awa_core::db_error::Described(.0))]
    Database(#[from] sqlx::Error),
    /// A middleware refused the insert (see [`crate::middleware`]):
    /// nothing was written. The message is the middleware's.
    #[error("enqueue refused: {0}")]
    Refused(String),
    /// A middleware broke its contract (the message says how).
    #[error("{0}")]
    Middleware(String),
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

/// What a `main` returning `Err` prints (`Error: {:?}`): the message people
/// read, then any cause it does not already say, as `anyhow` does; never a
/// bare variant name like `Maint(NotMigrated)`. Match on the variants to
/// tell errors apart in code.
impl std::fmt::Debug for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let message = self.to_string();
        f.write_str(&message)?;
        let mut source = std::error::Error::source(self);
        let mut first = true;
        while let Some(cause) = source {
            let text = cause.to_string();
            if !message.contains(&text) {
                if first {
                    f.write_str("\n\nCaused by:")?;
                    first = false;
                }
                write!(f, "\n    {text}")?;
            }
            source = cause.source();
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_is_the_message_a_person_reads() {
        let err = Error::Maint(awa_maint::MaintError::NotMigrated);
        let shown = format!("{err:?}");
        assert!(shown.contains("run `awa migrate`"), "{shown}");
        assert!(!shown.contains("NotMigrated"), "{shown}");
        let boxed: Box<dyn std::error::Error> = Box::new(Error::NoQueues);
        assert_eq!(format!("{boxed:?}"), Error::NoQueues.to_string());
    }
}
