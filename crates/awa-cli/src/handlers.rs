//! Built-in job handlers for demos and tests (`awa worker run --handler`).

mod chaos;

pub use chaos::Chaos;

use crate::error::CliError;
use async_trait::async_trait;
use awa_exec::worker::{Handler, HandlerResult, JobContext, JobError, Outcome};
use std::time::Duration;

/// Longest `sleep:MS` accepted: an hour, far past any shutdown grace.
const MAX_SLEEP_MS: u64 = 3_600_000;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Builtin {
    /// Completes at once.
    Noop,
    /// Sleeps, then completes.
    Sleep(Duration),
    /// Always fails with a retryable error.
    Fail,
    /// Fails while the attempt number is at most N, then completes.
    FailFirst(i32),
    /// For chaos tests: appends each execution to a file, sleeps `args.ms`,
    /// completes; kinds `poison-*` return poison results (see [`Chaos`]).
    Chaos(Chaos),
}

impl std::str::FromStr for Builtin {
    type Err = CliError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let bad = |why: &str| {
            CliError::Usage(format!(
                "invalid --handler {s:?}: {why}; expected noop, sleep:MS, fail, fail-first:N or chaos:FILE"
            ))
        };
        match s.split_once(':') {
            None if s == "noop" => Ok(Builtin::Noop),
            None if s == "fail" => Ok(Builtin::Fail),
            Some(("sleep", ms)) => match ms.parse::<u64>() {
                Ok(ms) if ms <= MAX_SLEEP_MS => Ok(Builtin::Sleep(Duration::from_millis(ms))),
                _ => Err(bad(
                    "MS must be a whole number of milliseconds up to 3600000",
                )),
            },
            Some(("fail-first", n)) => match n.parse::<i32>() {
                Ok(n) if (0..=awa_core::NewJob::MAX_ATTEMPTS).contains(&n) => {
                    Ok(Builtin::FailFirst(n))
                }
                _ => Err(bad("N must be a whole number from 0 to 1000")),
            },
            Some(("chaos", path)) if !path.is_empty() => {
                Ok(Builtin::Chaos(Chaos { log: path.into() }))
            }
            _ => Err(bad("unknown handler")),
        }
    }
}

#[async_trait]
impl Handler for Builtin {
    async fn handle(&self, ctx: JobContext) -> HandlerResult {
        match self {
            Builtin::Noop => Ok(Outcome::Complete),
            Builtin::Sleep(d) => {
                tokio::time::sleep(*d).await;
                Ok(Outcome::Complete)
            }
            Builtin::Fail => Err(JobError::Retry("fail handler always fails".into())),
            Builtin::FailFirst(n) if ctx.job.attempt <= *n => Err(JobError::Retry(format!(
                "fail-first:{n} handler fails attempt {}",
                ctx.job.attempt
            ))),
            Builtin::FailFirst(_) => Ok(Outcome::Complete),
            Builtin::Chaos(chaos) => chaos.handle(&ctx, MAX_SLEEP_MS).await,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Builtin;
    use std::time::Duration;

    #[test]
    fn parses_specs() {
        assert_eq!("noop".parse::<Builtin>().unwrap(), Builtin::Noop);
        assert_eq!("fail".parse::<Builtin>().unwrap(), Builtin::Fail);
        assert_eq!(
            "sleep:250".parse::<Builtin>().unwrap(),
            Builtin::Sleep(Duration::from_millis(250))
        );
        assert_eq!(
            "fail-first:2".parse::<Builtin>().unwrap(),
            Builtin::FailFirst(2)
        );
        assert_eq!(
            "chaos:/tmp/a:b".parse::<Builtin>().unwrap(),
            Builtin::Chaos(super::Chaos {
                log: "/tmp/a:b".into()
            })
        );
        for bad in [
            "",
            "chaos:",
            "nop",
            "sleep",
            "sleep:-1",
            "sleep:x",
            "fail-first:-1",
            "fail:1",
        ] {
            assert!(bad.parse::<Builtin>().is_err(), "{bad:?} should be refused");
        }
    }
}
