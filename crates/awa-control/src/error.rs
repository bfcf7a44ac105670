/// Errors of the control plane.
#[derive(Debug, thiserror::Error)]
pub enum ControlError {
    #[error(transparent)]
    Invalid(#[from] awa_core::InvalidInput),
    #[error("database error in the control plane: {}", awa_core::db_error::Described(.0))]
    Database(#[from] sqlx::Error),
    #[error(
        "the control tables hold something this binary cannot read: {0} (was the database changed by hand, or migrated by a newer Awa?)"
    )]
    Corrupt(String),
    #[error("storage {step} refused: {message}{}", .hint.as_deref().map(|h| format!(" ({h})")).unwrap_or_default())]
    Refused {
        step: &'static str,
        message: String,
        hint: Option<String>,
    },
    #[error(
        "storage {step} needs the migrator role (the owner of schema awa and of the substrates, the role that ran `awa migrate`); the connected role may not: {detail}"
    )]
    NeedsMigrator { step: &'static str, detail: String },
}
