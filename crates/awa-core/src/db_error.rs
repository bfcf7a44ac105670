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
            write!(f, "{}", self.0)?;
            if let Some(hint) = tls_hint(self.0) {
                write!(f, " ({hint})")?;
            }
            return Ok(());
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

/// What to do about a server certificate rustls refused where libpq would
/// not have: one that is itself a CA (`CA:TRUE`), as every self-signed
/// certificate made the way PostgreSQL's documentation shows (`openssl req
/// -new -x509 ...`) is. rustls (webpki) never accepts a CA certificate as
/// the server's own, and sqlx offers no hook to verify differently, so the
/// way out is a certificate of the shape rustls accepts.
pub fn tls_hint(err: &sqlx::Error) -> Option<&'static str> {
    let sqlx::Error::Io(io) = err else {
        return None;
    };
    let inner = io.get_ref()?.to_string();
    inner.contains("CaUsedAsEndEntity").then_some(
        "the server's certificate is a CA certificate (CA:TRUE), as a self-signed one made \
         with `openssl req -x509` is: libpq accepts it as its own sslrootcert, rustls does \
         not. Give the server a certificate signed by a CA (`openssl req -new` for the \
         server, signed with `openssl x509 -req -CA ca.crt -CAkey ca.key`, \
         `basicConstraints=CA:FALSE`) and name that CA in sslrootcert, or connect with \
         sslmode=require and no sslrootcert (encrypted, not verified)",
    )
}

fn pg(err: &sqlx::Error) -> Option<&sqlx::postgres::PgDatabaseError> {
    match err {
        sqlx::Error::Database(db) => db.try_downcast_ref::<sqlx::postgres::PgDatabaseError>(),
        _ => None,
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
