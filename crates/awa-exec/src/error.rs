/// Errors of the execution plane.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Invalid(#[from] awa_core::InvalidInput),
    #[error("database error in the execution plane: {}", awa_core::db_error::Described(.0))]
    Database(#[from] sqlx::Error),
    #[error(
        "no handler is registered for job kind {0:?}; register one or route the kind to another queue"
    )]
    NoHandler(String),
}

impl Error {
    /// True when the same statement may succeed if sent again unchanged:
    /// the connection or the pool checkout failed, or the server gave up
    /// for reasons of its own (SQLSTATE classes 08 connection, 40
    /// serialization failure / deadlock, 53 insufficient resources, 57
    /// operator intervention incl. statement timeout and shutdown, 58
    /// system error, and 55P03 lock timeout). Everything else (data
    /// errors 22, constraint violations 23, 42 syntax or privileges, a
    /// raised exception, an unencodable value) fails again the same way.
    pub fn is_transient(&self) -> bool {
        match self {
            Error::Database(err) => is_transient(err),
            Error::Invalid(_) | Error::NoHandler(_) => false,
        }
    }
}

fn is_transient(err: &sqlx::Error) -> bool {
    use sqlx::Error as E;
    match err {
        E::Io(_) | E::Tls(_) | E::Protocol(_) | E::PoolTimedOut | E::WorkerCrashed => true,
        E::Database(db) => match db.code() {
            Some(code) => {
                code == "55P03" || matches!(code.get(..2), Some("08" | "40" | "53" | "57" | "58"))
            }
            None => false,
        },
        // PoolClosed: the pool will not come back; retrying would spin.
        _ => false,
    }
}
