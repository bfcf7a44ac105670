//! Everything the CLI can fail with, each saying what to do.

#[derive(Debug, thiserror::Error)]
pub enum CliError {
    #[error("no database given; pass --database-url URL or set DATABASE_URL")]
    NoDatabaseUrl,
    #[error(
        "could not connect to PostgreSQL at {url}: {reason}. Check --database-url / DATABASE_URL and that the server is running and reachable"
    )]
    Unreachable { url: String, reason: String },
    /// A value the user typed that no plane type could check for us (JSON,
    /// timestamps, durations, handler specs).
    #[error("{0}")]
    Usage(String),
    #[error("{0}")]
    NotFound(String),
    #[error(transparent)]
    Invalid(#[from] awa_core::InvalidInput),
    #[error(transparent)]
    Maint(#[from] awa_maint::MaintError),
    #[error("{0}")]
    Control(#[from] awa_control::ControlError),
    #[error(transparent)]
    Ready(#[from] awa_ready::ReadyError),
    #[error(transparent)]
    Exec(#[from] awa_exec::ExecError),
    #[error(transparent)]
    History(#[from] awa_history::HistoryError),
    #[error(transparent)]
    Dlq(#[from] awa_dlq::DlqError),
    /// Transaction control and pool checkouts; statements themselves fail
    /// through the plane errors above.
    #[error("database error: {0}")]
    Database(#[from] sqlx::Error),
    /// A task of ours that panicked; a bug, not a user error.
    #[error("internal error: {0}")]
    Internal(String),
    #[error("could not write output: {0}")]
    Io(#[from] std::io::Error),
}
