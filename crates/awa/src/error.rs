//! The client's errors: what went wrong and what to do about it.

use std::time::Duration;

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
