//! Everything the CLI can fail with, each saying what to do.

#[derive(Debug, thiserror::Error)]
pub enum CliError {
    #[error("no database given; pass --database-url URL or set DATABASE_URL")]
    NoDatabaseUrl,
    #[error(
        "could not connect to PostgreSQL at {url}: {reason}. Check --database-url / DATABASE_URL and that the server is running and reachable"
    )]
    Unreachable { url: String, reason: String },
    #[error(transparent)]
    Invalid(#[from] awa_core::InvalidInput),
    #[error(transparent)]
    Maint(#[from] awa_maint::MaintError),
    #[error("{0}")]
    Control(#[from] awa_control::ControlError),
    #[error("could not write output: {0}")]
    Io(#[from] std::io::Error),
}
