//! What can stop a chaos run before it reaches a verdict. A run that
//! reaches one reports lost or doubled jobs in its [`super::report`], not
//! here.

#[derive(Debug, thiserror::Error)]
pub enum ChaosError {
    #[error("building the awa binary failed: {0}")]
    Build(String),
    #[error("I/O error while {context}: {source}")]
    Io {
        context: String,
        #[source]
        source: std::io::Error,
    },
    #[error("database error while {context}: {source}")]
    Database {
        context: String,
        #[source]
        source: sqlx::Error,
    },
    #[error(transparent)]
    Harness(#[from] awa_harness::HarnessError),
    #[error("migrating the chaos database failed: {0}")]
    Migrate(String),
    #[error("connecting to the chaos database failed: {0}")]
    Connect(String),
    #[error("{0}")]
    Task(String),
    #[error("`awa {args}` failed: {why}")]
    Awa { args: String, why: String },
}

impl ChaosError {
    pub fn io(context: impl Into<String>, source: std::io::Error) -> Self {
        Self::Io {
            context: context.into(),
            source,
        }
    }

    pub fn db(context: impl Into<String>, source: sqlx::Error) -> Self {
        Self::Database {
            context: context.into(),
            source,
        }
    }
}
