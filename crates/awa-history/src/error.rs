/// Errors of this plane.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Invalid(#[from] awa_core::InvalidInput),
    #[error("database error in the history plane: {}", awa_core::db_error::Described(.0))]
    Database(#[from] sqlx::Error),
}
