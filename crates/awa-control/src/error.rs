/// Errors of the control plane.
#[derive(Debug, thiserror::Error)]
pub enum ControlError {
    #[error(transparent)]
    Invalid(#[from] awa_core::InvalidInput),
    #[error("database error in the control plane: {}", awa_core::db_error::Described(.0))]
    Database(#[from] sqlx::Error),
}
