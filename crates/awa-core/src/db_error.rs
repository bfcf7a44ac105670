//! How a database error reads for a person: the one place every crate's
//! error type turns a `sqlx::Error` into text.
//!
//! sqlx's own `Display` of a PostgreSQL error is the message followed by
//! "at line NNNN", a line of PostgreSQL's C source: noise to an operator,
//! while the detail and hint that say what to do are dropped. Here a
//! database error reads "message (detail: ...) (hint: ...)"; its SQLSTATE is
//! available for machine-readable output. Other sqlx errors (I/O, pool,
//! decoding) keep sqlx's text.

use std::fmt;

/// `sqlx::Error` for display: see the module documentation. Use as
/// `#[error("database error: {}", awa_core::db_error::Described(.0))]`.
#[derive(Debug)]
pub struct Described<'a>(pub &'a sqlx::Error);

impl fmt::Display for Described<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let sqlx::Error::Database(db) = self.0 else {
            return write!(f, "{}", self.0);
        };
        f.write_str(db.message())?;
        if let Some(detail) = detail(self.0) {
            write!(f, " (detail: {detail})")?;
        }
        if let Some(hint) = hint(self.0) {
            write!(f, " (hint: {hint})")?;
        }
        Ok(())
    }
}

fn pg(err: &sqlx::Error) -> Option<&sqlx::postgres::PgDatabaseError> {
    match err {
        sqlx::Error::Database(db) => db.try_downcast_ref::<sqlx::postgres::PgDatabaseError>(),
        _ => None,
    }
}

/// True when the same statement may succeed if sent again unchanged: the
/// connection or the pool checkout failed, or the server gave up for
/// reasons of its own (SQLSTATE classes 08 connection, 40 serialization
/// failure / deadlock, 53 insufficient resources, 57 operator
/// intervention incl. statement timeout and shutdown, 58 system error, and
/// 55P03 lock timeout). Everything else (data errors 22, constraint
/// violations 23, 42 syntax or privileges, a raised exception, an
/// unencodable value) fails again the same way.
pub fn is_transient(err: &sqlx::Error) -> bool {
    use sqlx::Error as E;
    match err {
        E::Io(_) | E::Tls(_) | E::Protocol(_) | E::PoolTimedOut | E::WorkerCrashed => true,
        E::Database(db) => match db.code() {
            Some(code) => {
                code == "55P03" || matches!(code.get(..2), Some("08" | "40" | "53" | "57" | "58"))
            }
            None => false,
        },
        // PoolClosed: the pool will not come back; retrying would spin.
        _ => false,
    }
}

/// The SQLSTATE of a database error.
pub fn sqlstate(err: &sqlx::Error) -> Option<String> {
    match err {
        sqlx::Error::Database(db) => db.code().map(|c| c.into_owned()),
        _ => None,
    }
}

/// PostgreSQL's DETAIL of a database error.
pub fn detail(err: &sqlx::Error) -> Option<&str> {
    pg(err).and_then(|e| e.detail())
}

/// PostgreSQL's HINT of a database error.
pub fn hint(err: &sqlx::Error) -> Option<&str> {
    pg(err).and_then(|e| e.hint())
}
