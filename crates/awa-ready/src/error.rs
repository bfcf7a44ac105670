/// Errors of the ready plane.
#[derive(Debug, thiserror::Error)]
pub enum ReadyError {
    #[error(transparent)]
    Invalid(#[from] awa_core::InvalidInput),
    #[error("database error in the ready plane: {}", awa_core::db_error::Described(.0))]
    Database(#[from] sqlx::Error),
}
