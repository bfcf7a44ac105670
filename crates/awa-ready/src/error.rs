/// Errors of the ready plane.
#[derive(Debug, thiserror::Error)]
pub enum ReadyError {
    #[error(transparent)]
    Invalid(#[from] awa_core::InvalidInput),
    /// SQLSTATE 40001 inside REPEATABLE READ or SERIALIZABLE: a unique key
    /// was taken by a transaction that committed after this transaction's
    /// snapshot, so the snapshot cannot tell who owns it. Nothing was
    /// enqueued; the source keeps the database error (and its SQLSTATE).
    #[error(
        "enqueue refused with SQLSTATE 40001 (serialization failure): {}; a unique key was \
         taken by a transaction this one's snapshot cannot see: roll back and retry the whole \
         transaction (or enqueue under READ COMMITTED)",
        awa_core::db_error::Described(.0)
    )]
    Serialization(#[source] sqlx::Error),
    /// SQLSTATE 54000 from enqueue: a job's args plus metadata exceed the
    /// substrate's `max_job_bytes`. Nothing of the call was written.
    #[error(
        "enqueue refused: {}; store large payloads elsewhere and pass a reference in args \
         (the limit is max_job_bytes in the substrate's substrate_info)",
        awa_core::db_error::Described(.0)
    )]
    TooLarge(#[source] sqlx::Error),
    #[error("database error in the ready plane: {}", awa_core::db_error::Described(.0))]
    Database(#[from] sqlx::Error),
}

impl ReadyError {
    /// Sort a database error: serialization failures get their own variant.
    pub(crate) fn from_database(err: sqlx::Error) -> Self {
        match err.as_database_error().and_then(|db| db.code()) {
            Some(code) if code == "40001" => ReadyError::Serialization(err),
            Some(code) if code == "54000" => ReadyError::TooLarge(err),
            _ => ReadyError::Database(err),
        }
    }
}
