//! The vocabulary every Awa plane speaks.
//!
//! Owns: job ids, run leases, validated identifiers (schema and queue
//! names), priorities, the shape of a queue-storage substrate, and the small
//! error type shared by those validations.
//!
//! Does not own: any SQL, any table, any connection. A plane crate that
//! needs to talk to Postgres does so itself; this crate only gives it words
//! that are already known to be valid.

pub mod bounds;
pub mod conninfo;
pub mod db_error;
mod ids;
mod job;
mod names;
pub mod redact;
pub mod routing;
mod selection;
pub mod sql;
mod substrate;
pub mod time;
pub mod timeout;
pub mod trace;
mod unique;

pub use ids::{Attempt, JobId, Priority, RunLease};
pub use job::{
    AttemptToken, ClaimedJob, JobState, NewJob, check_storable_json, check_storable_text,
};
pub use names::{QueueName, SchemaName, quote_ident};
pub use routing::{Phase, Routing};
pub use selection::{JobSelection, SelectionFor, check_containment};
pub use substrate::{SlotCounts, SubstrateShape};
pub use time::DbTime;
pub use unique::Unique;

/// Invalid input caught before it reaches the database.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum InvalidInput {
    #[error("invalid {what} {value:?}: {why}")]
    Name {
        what: &'static str,
        value: String,
        why: String,
    },
    #[error(
        "{what} is {bytes} bytes, over the limit of {limit} bytes: store large payloads \
         elsewhere (a table, object storage) and pass a reference"
    )]
    TooLarge {
        what: &'static str,
        bytes: usize,
        limit: usize,
    },
    #[error("{what} must be between {min} and {max} (got {value}): {hint}")]
    OutOfRange {
        what: &'static str,
        value: i64,
        min: i64,
        max: i64,
        hint: &'static str,
    },
    #[error("{what} must be at least {min} and at most {max} (got {value}): {hint}")]
    DurationOutOfRange {
        what: &'static str,
        value: String,
        min: String,
        max: String,
        hint: &'static str,
    },
    #[error(
        "{what} {value} is outside the times Awa accepts: send a time from \
         1970-01-01T00:00:00Z up to 9999-12-31T23:59:59.999999Z"
    )]
    TimeOutOfRange { what: &'static str, value: String },
    #[error("{what} cannot be {value:?}: {why}")]
    Choice {
        what: &'static str,
        value: String,
        why: &'static str,
    },
}
