//! Job timeouts: where one job's own timeout is stored, and the error an
//! attempt stopped at its timeout records.
//!
//! A job's own timeout travels in its metadata under [`METADATA_KEY`]
//! (whole milliseconds), so a job without one stores and reads nothing
//! more; a kind's default timeout is the worker's (given with the
//! handler) and never stored. The worker reads the job's first, then the
//! kind's ([`of`]); a value outside [`bounds::JOB_TIMEOUT`] in metadata
//! written by raw SQL is ignored, never obeyed.

// Re-exported by the `awa` client: every public item is documented.
#![warn(missing_docs)]

use crate::{InvalidInput, bounds};
use std::time::Duration;

/// The metadata key of a job's own timeout, in whole milliseconds.
pub const METADATA_KEY: &str = "awa_timeout_ms";

/// The text every timeout error starts with, in the attempt history and
/// in lifecycle events: how readers tell a timeout from other failures.
pub const ERROR_PREFIX: &str = "timeout:";

/// Store `timeout` as the job's own in `metadata` (made an object if it
/// was None). Refused when out of [`bounds::JOB_TIMEOUT`] or when the
/// metadata is not a JSON object.
pub fn set(
    metadata: &mut Option<serde_json::Value>,
    timeout: Duration,
) -> Result<(), InvalidInput> {
    let timeout = bounds::JOB_TIMEOUT.check(timeout)?;
    let ms = u64::try_from(timeout.as_millis())
        .unwrap_or(u64::MAX)
        .max(1);
    let object = metadata.get_or_insert_with(|| serde_json::json!({}));
    match object.as_object_mut() {
        Some(map) => {
            map.insert(METADATA_KEY.into(), ms.into());
            Ok(())
        }
        None => Err(InvalidInput::Name {
            what: "job metadata",
            value: object.to_string(),
            why: "a job with a timeout needs its metadata to be a JSON object \
                  (the timeout is stored in it)"
                .into(),
        }),
    }
}

/// A job's own timeout, read from its metadata: None when it has none, or
/// when the stored value is not a whole number of milliseconds within
/// [`bounds::JOB_TIMEOUT`].
pub fn of(metadata: Option<&serde_json::Value>) -> Option<Duration> {
    let ms = metadata?.as_object()?.get(METADATA_KEY)?.as_u64()?;
    bounds::JOB_TIMEOUT.check(Duration::from_millis(ms)).ok()
}

/// The error recorded for an attempt whose handler ran past `timeout`.
pub fn error(timeout: Duration) -> String {
    format!(
        "{ERROR_PREFIX} the handler did not return within its {} timeout and was stopped",
        bounds::format_duration(timeout)
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn set_then_read_back() {
        let mut m = None;
        set(&mut m, Duration::from_millis(1500)).unwrap();
        assert_eq!(m, Some(json!({"awa_timeout_ms": 1500})));
        assert_eq!(of(m.as_ref()), Some(Duration::from_millis(1500)));

        let mut m = Some(json!({"tenant": 7}));
        set(&mut m, Duration::from_secs(30)).unwrap();
        assert_eq!(m, Some(json!({"tenant": 7, "awa_timeout_ms": 30000})));
    }

    #[test]
    fn refusals_and_ignored_values() {
        assert!(set(&mut None, Duration::ZERO).is_err());
        assert!(set(&mut None, Duration::from_secs(8 * 86_400)).is_err());
        assert!(set(&mut Some(json!([1])), Duration::from_secs(1)).is_err());
        // Written by raw SQL: not a whole number, zero, too long, no object.
        for bad in [
            json!({"awa_timeout_ms": "30"}),
            json!({"awa_timeout_ms": 1.5}),
            json!({"awa_timeout_ms": 0}),
            json!({"awa_timeout_ms": -5}),
            json!({"awa_timeout_ms": 8u64 * 86_400_000}),
            json!([1]),
        ] {
            assert_eq!(of(Some(&bad)), None, "{bad}");
        }
        assert_eq!(of(None), None);
        assert!(error(Duration::from_secs(2)).starts_with(ERROR_PREFIX));
    }
}
