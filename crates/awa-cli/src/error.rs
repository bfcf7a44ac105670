//! Everything the CLI can fail with, each saying what to do, and the exit
//! code each failure ends the process with.

/// Exit codes (listed in `awa --help`). Scripts may rely on them.
pub mod exit {
    /// Done.
    pub const OK: u8 = 0;
    /// Any failure without a code of its own below.
    pub const FAILURE: u8 = 1;
    /// The command line could not be parsed (clap's own code), or a value
    /// in it was refused after parsing (out of range, not JSON, not a
    /// duration, a missing or contradictory flag), before anything was
    /// written.
    pub const USAGE: u8 = 2;
    /// `job enqueue --unique-key` / `job retry ID`: the key is held by an
    /// unfinished job, so nothing was enqueued or retried.
    pub const UNIQUE_KEY_HELD: u8 = 3;
}

#[derive(Debug, thiserror::Error)]
pub enum CliError {
    #[error("no database given; pass --database-url URL or set DATABASE_URL")]
    NoDatabaseUrl,
    /// Not a usable PostgreSQL URL; the text never shows its password.
    #[error("{0} (check --database-url / DATABASE_URL)")]
    BadUrl(#[from] awa_core::conninfo::UrlError),
    #[error(
        "could not connect to PostgreSQL at {url}: {reason}. Check --database-url / DATABASE_URL and that the server is running and reachable"
    )]
    Unreachable { url: String, reason: String },
    /// The command line is wrong: a value the user typed that no plane type
    /// could check for us (JSON, timestamps, durations, handler specs), a
    /// missing or contradictory flag. Exit code 2, like clap's own.
    #[error("{0}")]
    Usage(String),
    /// The command line was fine but what it asked for cannot be done now
    /// (a name already taken, an address in use, a file that cannot be
    /// read). Exit code 1.
    #[error("{0}")]
    Refused(String),
    #[error("{0}")]
    NotFound(String),
    #[error(
        "nothing enqueued: unique key {key:?} is already held by unfinished job {held_by}; \
         enqueue again once it has finished, or cancel it first"
    )]
    UniqueKeyHeld { key: String, held_by: i64 },
    #[error(
        "nothing enqueued: it duplicates job {held_by} (unique by {what}; that job is \
         unfinished, or finished in a state the spec keeps, within the period); enqueue again \
         after that, or cancel it"
    )]
    UniqueHeld { what: String, held_by: i64 },
    #[error(
        "job {id} stays failed: its unique key {key:?} is held by unfinished job {held_by}; \
         retry it once that job has finished, or cancel that job first"
    )]
    RetryKeyHeld { id: i64, key: String, held_by: i64 },
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
    #[error("database error: {}", awa_core::db_error::Described(.0))]
    Database(#[from] sqlx::Error),
    /// A task of ours that panicked; a bug, not a user error.
    #[error("internal error: {0}")]
    Internal(String),
    #[error("could not write output: {0}")]
    Io(#[from] std::io::Error),
}

/// What `--json` adds to a database error's message.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct DatabaseFields {
    pub sqlstate: Option<String>,
    pub detail: Option<String>,
    pub hint: Option<String>,
}

impl CliError {
    /// The process exit code for this failure (see [`exit`]).
    pub fn exit_code(&self) -> u8 {
        match self {
            CliError::UniqueKeyHeld { .. }
            | CliError::UniqueHeld { .. }
            | CliError::RetryKeyHeld { .. } => exit::UNIQUE_KEY_HELD,
            CliError::Usage(_) | CliError::Invalid(_) | CliError::NoDatabaseUrl => exit::USAGE,
            // An unreadable URL is a bad value; a root certificate file that
            // cannot be read is like any other file that cannot be.
            CliError::BadUrl(awa_core::conninfo::UrlError::RootCert { .. }) => exit::FAILURE,
            CliError::BadUrl(_) => exit::USAGE,
            // A plane refusing its input before writing anything: in this
            // binary that input came from the command line (a flag's value,
            // --args), so it is a bad command line like one clap refuses.
            CliError::Control(awa_control::ControlError::Invalid(_))
            | CliError::Ready(awa_ready::ReadyError::Invalid(_))
            | CliError::Exec(awa_exec::ExecError::Invalid(_))
            | CliError::History(awa_history::HistoryError::Invalid(_))
            | CliError::Dlq(awa_dlq::DlqError::Invalid(_))
            | CliError::Maint(awa_maint::MaintError::Invalid(_)) => exit::USAGE,
            // A version range no step covers is a bad command line.
            CliError::Maint(awa_maint::MaintError::StepRange { .. }) => exit::USAGE,
            _ => exit::FAILURE,
        }
    }

    /// The database error underneath, whichever plane passed it on.
    fn database_error(&self) -> Option<&sqlx::Error> {
        match self {
            CliError::Database(e)
            | CliError::Control(awa_control::ControlError::Database(e))
            | CliError::Ready(awa_ready::ReadyError::Database(e))
            | CliError::Exec(awa_exec::ExecError::Database(e))
            | CliError::History(awa_history::HistoryError::Database(e))
            | CliError::Dlq(awa_dlq::DlqError::Database(e))
            | CliError::Maint(awa_maint::MaintError::Database(e)) => Some(e),
            _ => None,
        }
    }

    /// SQLSTATE, detail and hint of a database error (empty otherwise).
    pub fn database_fields(&self) -> DatabaseFields {
        use awa_core::db_error;
        if let CliError::Maint(awa_maint::MaintError::Rejected { hint, sqlstate, .. }) = self {
            return DatabaseFields {
                sqlstate: Some(sqlstate.clone()),
                detail: None,
                hint: hint.clone(),
            };
        }
        self.database_error()
            .map(|e| DatabaseFields {
                sqlstate: db_error::sqlstate(e),
                detail: db_error::detail(e).map(str::to_string),
                hint: db_error::hint(e).map(str::to_string),
            })
            .unwrap_or_default()
    }
}
