use awa_core::InvalidInput;

/// Errors of migration, installation and maintenance.
#[derive(Debug, thiserror::Error)]
pub enum MaintError {
    #[error(transparent)]
    Invalid(#[from] InvalidInput),

    #[error(
        "the database is at schema version {found}, newer than the {known} this binary knows; \
         upgrade this binary (or use one at least as new as the one that migrated the database)"
    )]
    SchemaTooNew { found: i32, known: i32 },

    #[error(
        "the database has not been migrated; run `awa migrate` (or `cargo xtask migrate`) first"
    )]
    NotMigrated,

    #[error(
        "the database is at schema version {found}, older than the {known} this binary needs; \
         run `awa migrate` with this binary (see the README's section on upgrades)"
    )]
    SchemaTooOld { found: i32, known: i32 },

    #[error(
        "no migration steps from version {from} to {to}: versions run from 1 to {known}, \
         forward only (--from N --to M with 0 <= N < M <= {known}; 0 is an empty database)"
    )]
    StepRange { from: i32, to: i32, known: i32 },

    #[error(
        "the default substrate `awa` cannot be reset: its schema also holds the migration and \
         transition metadata. Restore from a backup and rerun migrations for a full rebuild, or \
         prepare a custom schema with --schema NAME"
    )]
    DefaultSchemaReset,

    #[error(
        "schema `{0}` is in use by the storage routing (active, transition target, or named by a \
         runtime); finish or abort the transition before resetting it"
    )]
    SchemaInUse(String),

    #[error(
        "schema `{0}` is not an Awa substrate, so neither --reset nor drop-substrate will drop it; choose another schema name"
    )]
    NotASubstrate(String),

    #[error(
        "substrate `{0}` still holds unfinished jobs or dead letters; let it drain (or move them: \
         a transition moves deferred and dead-lettered jobs) before dropping it"
    )]
    SubstrateHoldsWork(String),

    #[error("{message}{}", hint.as_ref().map(|h| format!(" (hint: {h})")).unwrap_or_default())]
    Rejected {
        message: String,
        hint: Option<String>,
        sqlstate: String,
    },

    #[error("maintenance task failed: {0}")]
    Task(String),

    #[error("maintenance leadership lost: {0}")]
    LeadershipLost(String),

    /// The database URL given to [`crate::migrate::migrate`] or the
    /// leader cannot be used (wrong scheme, unreadable); never shows its
    /// password.
    #[error(transparent)]
    Url(#[from] awa_core::conninfo::UrlError),

    /// No listed host gave a usable session (see [`crate::connect`]).
    #[error("could not connect: {0}")]
    Connect(#[from] crate::connect::ConnectError),

    #[error("could not write the migration files: {0}")]
    Io(#[from] std::io::Error),

    #[error("database error: {}", awa_core::db_error::Described(.0))]
    Database(sqlx::Error),
}

impl From<sqlx::Error> for MaintError {
    /// Errors the SQL helpers raise on purpose (bad names, bad sizes,
    /// refused resizes) carry a message and hint meant for the user; pass
    /// them through instead of burying them in a generic database error.
    fn from(err: sqlx::Error) -> Self {
        if let sqlx::Error::Database(db) = &err
            && let Some(code) = db.code()
            && matches!(&*code, "22023" | "42602" | "42P06" | "42704" | "3F000")
        {
            let hint = db
                .try_downcast_ref::<sqlx::postgres::PgDatabaseError>()
                .and_then(|pg| pg.hint().map(str::to_string));
            return MaintError::Rejected {
                message: db.message().to_string(),
                hint,
                sqlstate: code.to_string(),
            };
        }
        MaintError::Database(err)
    }
}

impl MaintError {
    /// SQLSTATE of an error the database raised on purpose, if any.
    pub fn sqlstate(&self) -> Option<&str> {
        match self {
            MaintError::Rejected { sqlstate, .. } => Some(sqlstate),
            _ => None,
        }
    }
}

/// Plane errors keep their meaning when a maintenance task or the migrator
/// passes them on: bad input stays bad input, database errors go through
/// the same SQLSTATE mapping as our own.
macro_rules! from_plane_error {
    ($($plane:ty => $invalid:path, $database:path);* $(;)?) => {$(
        impl From<$plane> for MaintError {
            fn from(err: $plane) -> Self {
                #[allow(unreachable_patterns)]
                match err {
                    $invalid(e) => MaintError::Invalid(e),
                    $database(e) => MaintError::from(e),
                    other => MaintError::Task(other.to_string()),
                }
            }
        }
    )*};
}

from_plane_error! {
    awa_control::ControlError => awa_control::ControlError::Invalid, awa_control::ControlError::Database;
    awa_deferred::DeferredError => awa_deferred::DeferredError::Invalid, awa_deferred::DeferredError::Database;
    awa_exec::ExecError => awa_exec::ExecError::Invalid, awa_exec::ExecError::Database;
    awa_history::HistoryError => awa_history::HistoryError::Invalid, awa_history::HistoryError::Database;
    awa_dlq::DlqError => awa_dlq::DlqError::Invalid, awa_dlq::DlqError::Database;
    awa_ready::ReadyError => awa_ready::ReadyError::Invalid, awa_ready::ReadyError::Database;
}
