//! Retry policies: how long a failed attempt waits before the next one.
//!
//! The delay is decided here, in the worker, and written with the result
//! (`Finish::Retry { delay }`); the database still enforces max attempts
//! and bounds the delay. A handler that returns `JobError::RetryAfter`
//! chooses its own delay and the policy is not consulted.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

/// How long to wait before retrying, by attempt.
#[derive(Clone, Default)]
pub enum RetryPolicy {
    /// The substrate's default backoff (exponential with jitter, in SQL).
    #[default]
    Default,
    /// `base * factor^(attempt-1)`, at most `max`, then up to `jitter`
    /// (a fraction, 0.0-1.0) of it added at random so retries of a burst
    /// of failures spread out.
    Exponential {
        base: Duration,
        factor: f64,
        max: Duration,
        jitter: f64,
    },
    /// The same delay every time.
    Fixed(Duration),
    /// Any function of the attempt that just failed (1 for the first run).
    Custom(Arc<dyn Fn(i32) -> Duration + Send + Sync>),
}

impl fmt::Debug for RetryPolicy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RetryPolicy::Default => f.write_str("Default"),
            RetryPolicy::Exponential {
                base,
                factor,
                max,
                jitter,
            } => f
                .debug_struct("Exponential")
                .field("base", base)
                .field("factor", factor)
                .field("max", max)
                .field("jitter", jitter)
                .finish(),
            RetryPolicy::Fixed(d) => f.debug_tuple("Fixed").field(d).finish(),
            RetryPolicy::Custom(_) => f.write_str("Custom(..)"),
        }
    }
}

impl RetryPolicy {
    /// Doubling from `base` up to `max`, with 25 % jitter.
    pub fn exponential(base: Duration, max: Duration) -> Self {
        RetryPolicy::Exponential {
            base,
            factor: 2.0,
            max,
            jitter: 0.25,
        }
    }

    pub fn fixed(delay: Duration) -> Self {
        RetryPolicy::Fixed(delay)
    }

    pub fn custom(f: impl Fn(i32) -> Duration + Send + Sync + 'static) -> Self {
        RetryPolicy::Custom(Arc::new(f))
    }

    /// The delay after `attempt` failed; None: the substrate's default.
    pub fn delay(&self, attempt: i32) -> Option<Duration> {
        match self {
            RetryPolicy::Default => None,
            RetryPolicy::Fixed(d) => Some(*d),
            RetryPolicy::Custom(f) => Some(f(attempt)),
            RetryPolicy::Exponential {
                base,
                factor,
                max,
                jitter,
            } => {
                let exp = f64::from(attempt.max(1) - 1).min(1024.0);
                let raw = base.as_secs_f64() * factor.max(1.0).powf(exp);
                let capped = raw.min(max.as_secs_f64());
                let spread = capped * jitter.clamp(0.0, 1.0) * rand::random::<f64>();
                Some(Duration::from_secs_f64(
                    (capped + spread).min(max.as_secs_f64().max(capped)),
                ))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exponential_grows_to_its_cap_with_bounded_jitter() {
        let p = RetryPolicy::Exponential {
            base: Duration::from_secs(1),
            factor: 2.0,
            max: Duration::from_secs(60),
            jitter: 0.0,
        };
        let secs: Vec<u64> = (1..=8).map(|a| p.delay(a).unwrap().as_secs()).collect();
        assert_eq!(secs, [1, 2, 4, 8, 16, 32, 60, 60]);
        let jittered = RetryPolicy::exponential(Duration::from_secs(10), Duration::from_secs(3600));
        for _ in 0..100 {
            let d = jittered.delay(1).unwrap().as_secs_f64();
            assert!((10.0..=12.5).contains(&d), "{d}");
        }
        // Huge attempts do not overflow.
        assert_eq!(p.delay(i32::MAX).unwrap(), Duration::from_secs(60));
    }

    #[test]
    fn fixed_custom_and_default() {
        assert_eq!(
            RetryPolicy::fixed(Duration::from_secs(5)).delay(9),
            Some(Duration::from_secs(5))
        );
        let c = RetryPolicy::custom(|a| Duration::from_secs(a as u64 * 3));
        assert_eq!(c.delay(2), Some(Duration::from_secs(6)));
        assert_eq!(RetryPolicy::Default.delay(3), None);
    }
}
