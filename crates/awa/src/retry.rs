//! Retry policies: how long a failed attempt waits before the next one.
//!
//! The delay is decided here, in the worker, and written with the result
//! (`Finish::Retry { delay }`); the database still enforces max attempts
//! and bounds the delay. A handler that returns `JobError::RetryAfter`
//! chooses its own delay and the policy is not consulted.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

/// How long to wait before retrying, by attempt. Set one per job type
/// ([`crate::ClientBuilder::retry_policy`]), per untyped kind or per queue;
/// the delay is decided in the worker and the database still bounds it
/// (30 days) and counts attempts against `max_attempts`.
///
/// ```
/// # #[tokio::main]
/// # async fn main() -> Result<(), sqlx::Error> {
/// use awa::RetryPolicy;
/// use std::time::Duration;
///
/// let policy = RetryPolicy::Exponential {
///     base: Duration::from_secs(1),
///     factor: 2.0,
///     max: Duration::from_secs(60),
///     jitter: 0.0,
/// };
/// let waits: Vec<u64> = (1..=8).map(|attempt| policy.delay(attempt).unwrap().as_secs()).collect();
/// assert_eq!(waits, [1, 2, 4, 8, 16, 32, 60, 60]);
///
/// assert_eq!(RetryPolicy::fixed(Duration::from_secs(5)).delay(3), Some(Duration::from_secs(5)));
/// assert_eq!(RetryPolicy::Default.delay(3), None); // the substrate's backoff
///
/// // A policy is given to the builder, per job type, kind or queue:
/// # #[derive(serde::Serialize, serde::Deserialize, awa::Job)]
/// # struct SendWelcome { user_id: i64 }
/// # let pool = sqlx::PgPool::connect_lazy("postgres://localhost/app")?;
/// let builder = awa::Client::builder(pool)
///     .queue("default", 8)
///     .retry_policy::<SendWelcome>(RetryPolicy::exponential(
///         Duration::from_secs(10),
///         Duration::from_secs(3600),
///     ))
///     .queue_retry_policy("default", RetryPolicy::fixed(Duration::from_secs(30)));
/// # drop(builder);
/// # Ok(())
/// # }
/// ```
#[derive(Clone, Default)]
pub enum RetryPolicy {
    /// The substrate's default backoff (exponential with jitter, in SQL).
    #[default]
    Default,
    /// `base * factor^(attempt-1)`, at most `max`, then up to `jitter`
    /// (a fraction, 0.0-1.0) of it added at random so retries of a burst
    /// of failures spread out.
    Exponential {
        /// The wait after the first attempt.
        base: Duration,
        /// The growth per attempt (below 1.0 counts as 1.0).
        factor: f64,
        /// The longest wait.
        max: Duration,
        /// The largest fraction of the wait added at random (0.0-1.0).
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

    /// `delay` after every failed attempt.
    pub fn fixed(delay: Duration) -> Self {
        RetryPolicy::Fixed(delay)
    }

    /// `f(attempt)` after `attempt` failed (1 for the first run).
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
