//! Turning what the user typed into checked values, before any connection
//! is opened: bad input must never reach the database.

use crate::error::CliError;
use awa_core::InvalidInput;
use chrono::{DateTime, Utc};
use std::time::Duration;

/// `value` if it lies in `min..=max`.
pub fn in_range(
    what: &'static str,
    value: i64,
    min: i64,
    max: i64,
    hint: &'static str,
) -> Result<i64, CliError> {
    if (min..=max).contains(&value) {
        Ok(value)
    } else {
        Err(InvalidInput::OutOfRange {
            what,
            value,
            min,
            max,
            hint,
        }
        .into())
    }
}

pub fn job_id(value: i64) -> Result<awa_core::JobId, CliError> {
    in_range(
        "job id",
        value,
        1,
        i64::MAX,
        "job ids are positive integers",
    )
    .map(awa_core::JobId)
}

pub fn json(flag: &str, text: &str) -> Result<serde_json::Value, CliError> {
    serde_json::from_str(text).map_err(|err| {
        CliError::Usage(format!(
            "{flag} is not valid JSON ({err}); pass a JSON value, e.g. {flag} '{{\"id\": 1}}'"
        ))
    })
}

/// The most `--args -` / `--args-file` reads: the largest job any
/// substrate can be configured to accept (the database enforces the
/// substrate's own limit).
pub const MAX_ARGS_READ: u64 = 256 << 20;

/// Job arguments from `--args JSON`, `--args -` (stdin) or `--args-file
/// PATH`; `{}` when none is given.
pub fn job_args(
    inline: Option<&str>,
    file: Option<&std::path::Path>,
) -> Result<serde_json::Value, CliError> {
    use std::io::Read;
    let read = |what: &str, source: &mut dyn Read| -> Result<String, CliError> {
        let mut text = String::new();
        source
            .take(MAX_ARGS_READ + 1)
            .read_to_string(&mut text)
            .map_err(|err| CliError::Refused(format!("could not read {what}: {err}")))?;
        if text.len() as u64 > MAX_ARGS_READ {
            return Err(CliError::Usage(format!(
                "{what} holds more than {MAX_ARGS_READ} bytes, more than any job may carry; \
                 store large payloads elsewhere and pass a reference in args"
            )));
        }
        Ok(text)
    };
    match (inline, file) {
        (Some("-"), _) => {
            let text = read("the job args from stdin (--args -)", &mut std::io::stdin())?;
            json("--args -", &text)
        }
        (Some(text), _) => json("--args", text),
        (None, Some(path)) => {
            let what = format!("--args-file {}", path.display());
            let mut f = std::fs::File::open(path)
                .map_err(|err| CliError::Refused(format!("could not open {what}: {err}")))?;
            let text = read(&what, &mut f)?;
            json("--args-file", &text)
        }
        (None, None) => Ok(serde_json::json!({})),
    }
}

/// A time given as RFC 3339 (`2026-12-01T10:00:00Z`) or as a duration
/// from `now` (`+10m`, `2h`, `90s`, `1h 30m`; humantime syntax, the `+`
/// optional).
pub fn time_or_offset(
    flag: &str,
    text: &str,
    now: DateTime<Utc>,
) -> Result<DateTime<Utc>, CliError> {
    let trimmed = text.trim();
    let refuse = |why: String| {
        CliError::Usage(format!(
            "{flag} {text:?} {why}; expected an RFC 3339 time (e.g. 2026-12-01T10:00:00Z) \
             or a duration from now (e.g. +10m, 2h, 90s)"
        ))
    };
    if let Ok(t) = DateTime::parse_from_rfc3339(trimmed) {
        return Ok(t.with_timezone(&Utc));
    }
    let offset = trimmed.strip_prefix('+').unwrap_or(trimmed).trim_start();
    let looks_like_a_time = trimmed.len() >= 10 && trimmed.as_bytes()[4] == b'-';
    match humantime::parse_duration(offset) {
        Ok(d) => chrono::Duration::from_std(d)
            .ok()
            .and_then(|d| now.checked_add_signed(d))
            .ok_or_else(|| refuse("is too far in the future".into())),
        Err(err) if looks_like_a_time => Err(refuse(format!(
            "is not an RFC 3339 time ({})",
            DateTime::parse_from_rfc3339(trimmed)
                .err()
                .map_or_else(|| err.to_string(), |e| e.to_string())
        ))),
        Err(err) => Err(refuse(format!("is neither a time nor a duration ({err})"))),
    }
}

/// A duration flag checked against its bound in `awa_core::bounds`.
pub fn bounded_duration(
    bound: awa_core::bounds::DurationBound,
    text: &str,
) -> Result<Duration, CliError> {
    Ok(bound.check(duration(bound.what, text)?)?)
}

pub fn duration(flag: &str, text: &str) -> Result<Duration, CliError> {
    humantime::parse_duration(text).map_err(|err| {
        CliError::Usage(format!(
            "{flag} {text:?} is not a duration ({err}); expected e.g. 30s, 5m, 2h or 14days"
        ))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_refuses() {
        assert!(json("--args", "{not json").is_err());
        assert_eq!(json("--args", "{}").unwrap(), serde_json::json!({}));
        let now = Utc::now();
        let at = |t: &str| time_or_offset("--run-at", t, now);
        assert_eq!(at("+10m").unwrap(), now + chrono::Duration::minutes(10));
        assert_eq!(at("2h").unwrap(), now + chrono::Duration::hours(2));
        assert_eq!(at("90s").unwrap(), now + chrono::Duration::seconds(90));
        assert_eq!(at("+ 1h 30m").unwrap(), now + chrono::Duration::minutes(90));
        assert_eq!(
            at("2026-12-01T10:00:00Z").unwrap().to_rfc3339(),
            "2026-12-01T10:00:00+00:00"
        );
        for bad in [
            "tomorrow",
            "+",
            "10 parsecs",
            "2026-13-01T10:00:00Z",
            "+100000000years",
        ] {
            let err = at(bad).unwrap_err().to_string();
            assert!(err.contains(&format!("{bad:?}")), "{err}");
        }
        assert_eq!(duration("--x", "5m").unwrap(), Duration::from_secs(300));
        assert!(duration("--x", "soon").is_err());
        assert!(in_range("n", 0, 1, 10, "").is_err());
        assert!(job_id(-3).is_err());
    }
}
