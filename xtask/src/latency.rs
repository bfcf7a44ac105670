//! Pickup latency, shared by `demo` and `bench`: a no-op handler that
//! records how long each job waited between becoming runnable (`ready_at`,
//! stamped by PostgreSQL) and its handler starting, and the percentiles of
//! what it recorded.
//!
//! Every sample is kept (4 bytes each), so percentiles are exact; a million
//! jobs cost 4 MB. Both clocks are the same machine's wall clock when the
//! server is local; against a remote server the figures include clock skew.

use async_trait::async_trait;
use awa_exec::worker::{Handler, HandlerResult, JobContext, Outcome};
use chrono::{DateTime, Utc};
use std::sync::{Arc, Mutex};

/// Latency samples in microseconds.
#[derive(Debug, Default)]
pub struct LatencyRecorder {
    samples: Mutex<Vec<u32>>,
}

impl LatencyRecorder {
    pub fn new() -> Arc<Self> {
        Arc::new(Self::default())
    }

    /// Records `now - ready_at` (negative skew counts as zero).
    pub fn record_since(&self, ready_at: DateTime<Utc>) {
        let micros = (Utc::now() - ready_at).num_microseconds().unwrap_or(0);
        let micros = micros.clamp(0, i64::from(u32::MAX)) as u32;
        self.samples.lock().expect("latency lock").push(micros);
    }

    /// Percentiles of everything recorded so far; the samples are kept.
    pub fn percentiles(&self) -> Percentiles {
        self.percentiles_since(0)
    }

    /// How many samples so far (pass to [`Self::percentiles_since`]).
    pub fn len(&self) -> usize {
        self.samples.lock().expect("latency lock").len()
    }

    /// Percentiles of the samples recorded after the first `first`.
    pub fn percentiles_since(&self, first: usize) -> Percentiles {
        let samples = self.samples.lock().expect("latency lock");
        let mut tail = samples.get(first..).unwrap_or_default().to_vec();
        Percentiles::of(&mut tail)
    }
}

/// Latency summary, in milliseconds.
#[derive(Debug, Clone, Copy, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Percentiles {
    pub count: u64,
    pub mean: f64,
    pub p50: f64,
    pub p95: f64,
    pub p99: f64,
    pub max: f64,
}

impl Percentiles {
    /// Nearest-rank percentiles of `micros` (sorted in place).
    pub fn of(micros: &mut [u32]) -> Self {
        if micros.is_empty() {
            return Self::default();
        }
        micros.sort_unstable();
        let n = micros.len();
        let rank = |p: f64| {
            let r = ((p / 100.0) * n as f64).ceil() as usize;
            f64::from(micros[r.clamp(1, n) - 1]) / 1000.0
        };
        let sum: u64 = micros.iter().map(|&m| u64::from(m)).sum();
        Self {
            count: n as u64,
            mean: sum as f64 / n as f64 / 1000.0,
            p50: rank(50.0),
            p95: rank(95.0),
            p99: rank(99.0),
            max: f64::from(micros[n - 1]) / 1000.0,
        }
    }
}

/// Completes every job at once, recording its pickup latency first.
#[derive(Debug, Clone)]
pub struct NoopHandler {
    pub latency: Arc<LatencyRecorder>,
}

#[async_trait]
impl Handler for NoopHandler {
    async fn handle(&self, ctx: JobContext) -> HandlerResult {
        self.latency.record_since(ctx.job.ready_at);
        Ok(Outcome::Complete)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_rank_percentiles() {
        let mut v: Vec<u32> = (1..=100).map(|i| i * 1000).collect();
        let p = Percentiles::of(&mut v);
        assert_eq!(p.count, 100);
        assert_eq!(p.p50, 50.0);
        assert_eq!(p.p95, 95.0);
        assert_eq!(p.p99, 99.0);
        assert_eq!(p.max, 100.0);
        assert_eq!(Percentiles::of(&mut []), Percentiles::default());
    }
}
