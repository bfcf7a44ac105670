use std::fmt::Write as _;

/// Everything that can go wrong while getting a server or a test database.
///
/// `Debug` prints the same text as `Display` (plus the causes), so that a
/// test's `.unwrap()` shows the advice rather than a struct dump.
#[derive(thiserror::Error)]
#[non_exhaustive]
pub enum HarnessError {
    /// No way of getting a PostgreSQL server worked. `attempts` says, one
    /// line per discovery step, why that step was not usable.
    #[error("{}", no_server_message(attempts))]
    NoServer { attempts: Vec<String> },

    /// Local server binaries were found but the cluster would not start.
    #[error("could not start a temporary PostgreSQL cluster: {0}")]
    ClusterStart(String),

    /// The Docker fallback was tried and failed.
    #[error("could not start a PostgreSQL container: {0}")]
    Docker(String),

    /// [`crate::PgServer::restart_immediate`] on a server we do not run.
    #[error(
        "cannot restart a {0:?} PostgreSQL server: only a temporary local cluster started by \
         the harness can be restarted"
    )]
    NotRestartable(crate::ServerKind),

    /// A standby, a kill or a promotion asked of a server we do not run.
    #[error(
        "cannot {action} a {kind:?} PostgreSQL server: only a temporary local cluster started by \
         the harness can be"
    )]
    NotLocal {
        kind: crate::ServerKind,
        action: &'static str,
    },

    /// The server is older than this crate supports.
    #[error("PostgreSQL {found} at {url} is too old: PostgreSQL 14 or newer is required")]
    UnsupportedVersion { found: String, url: String },

    #[error("I/O error while {context}: {source}")]
    Io {
        context: String,
        #[source]
        source: std::io::Error,
    },

    #[error(
        "database error while {context}: {}",
        awa_core::db_error::Described(source)
    )]
    Database {
        context: String,
        #[source]
        source: sqlx::Error,
    },

    /// The caller's `init` closure failed while preparing a template; the
    /// half-built template database has been dropped.
    #[error("initialising template database {template} failed: {source}")]
    TemplateInit {
        template: String,
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
}

impl std::fmt::Debug for HarnessError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{self}")?;
        let mut source = std::error::Error::source(self);
        while let Some(cause) = source {
            write!(f, "\n  caused by: {cause}")?;
            source = cause.source();
        }
        Ok(())
    }
}

impl HarnessError {
    pub(crate) fn io(context: impl Into<String>, source: std::io::Error) -> Self {
        Self::Io {
            context: context.into(),
            source,
        }
    }

    pub(crate) fn db(context: impl Into<String>, source: sqlx::Error) -> Self {
        Self::Database {
            context: context.into(),
            source,
        }
    }

    /// SQLSTATE of a database error, if this is one.
    pub(crate) fn sqlstate(&self) -> Option<String> {
        match self {
            Self::Database { source, .. } => sqlstate(source),
            _ => None,
        }
    }
}

pub(crate) fn sqlstate(err: &sqlx::Error) -> Option<String> {
    err.as_database_error()
        .and_then(|e| e.code())
        .map(|c| c.into_owned())
}

// Kept as a function rather than an inline format string so the exact advice
// can be tested without having to make discovery fail on this machine.
fn no_server_message(attempts: &[String]) -> String {
    let mut msg = String::from(
        "no PostgreSQL server is available for tests. Fix it in one of three ways:\n\
         \x20 1. set DATABASE_URL to a PostgreSQL 14+ server on which you may create databases, \
         e.g. DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres\n\
         \x20 2. install the PostgreSQL server binaries (initdb and postgres), e.g. \
         `apt-get install postgresql` or `brew install postgresql@17`; they are looked for on PATH, \
         in `pg_config --bindir`, and in /usr/lib/postgresql/<version>/bin, /usr/pgsql-<version>/bin, \
         /opt/homebrew/opt/postgresql@<version>/bin and /usr/local/pgsql/bin\n\
         \x20 3. enable the `docker` cargo feature of awa-harness and have a Docker engine running",
    );
    if !attempts.is_empty() {
        msg.push_str("\nWhat was tried:");
        for attempt in attempts {
            let _ = write!(msg, "\n  - {attempt}");
        }
    }
    msg
}
