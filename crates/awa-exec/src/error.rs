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
