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
    /// True when the same statement may succeed if sent again unchanged
    /// (`awa_core::db_error::is_transient`: a connection or pool failure,
    /// or SQLSTATE classes 08/40/53/57/58 and 55P03). Everything else
    /// fails again the same way.
    pub fn is_transient(&self) -> bool {
        match self {
            Error::Database(err) => awa_core::db_error::is_transient(err),
            Error::Invalid(_) | Error::NoHandler(_) => false,
        }
    }
}
