/// Errors of the control plane.
#[derive(Debug, thiserror::Error)]
pub enum ControlError {
    #[error(transparent)]
    Invalid(#[from] awa_core::InvalidInput),
    #[error("database error in the control plane: {0}")]
    Database(#[from] sqlx::Error),
}
