//! Pickup latency, shared by `demo` and `bench`: a no-op handler that
//! records how long each job waited between becoming runnable (`ready_at`,
//! stamped by PostgreSQL) and its handler starting, and the percentiles of
//! what it recorded. With [`EndToEnd`], also how long until its result was
//! committed (`ready_at` to the commit of the finish call, as the worker's
//! lifecycle hook reports it).
//!
//! Every sample is kept (4 bytes each), so percentiles are exact; a million
//! jobs cost 4 MB. Both clocks are the same machine's wall clock when the
//! server is local; against a remote server the figures include clock skew.

use async_trait::async_trait;
use awa_exec::worker::{Handler, HandlerResult, JobContext, Outcome};
use chrono::{DateTime, Utc};
use std::collections::HashMap;
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
    pub fn recorded(&self) -> usize {
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

/// End-to-end latency: `ready_at` to the commit of the job's result. The
/// handler [`started`](EndToEnd::started) the job; the worker's lifecycle
/// hook, which runs only once the finish call committed, reports it
/// [`finished`](EndToEnd::finished).
#[derive(Debug, Default)]
pub struct EndToEnd {
    pending: Mutex<HashMap<i64, DateTime<Utc>>>,
    pub latency: LatencyRecorder,
}

impl EndToEnd {
    pub fn new() -> Arc<Self> {
        Arc::new(Self::default())
    }

    pub fn started(&self, job_id: i64, ready_at: DateTime<Utc>) {
        self.pending
            .lock()
            .expect("end-to-end lock")
            .insert(job_id, ready_at);
    }

    pub fn finished(&self, job_id: i64) {
        let ready_at = self
            .pending
            .lock()
            .expect("end-to-end lock")
            .remove(&job_id);
        if let Some(ready_at) = ready_at {
            self.latency.record_since(ready_at);
        }
    }
}

/// Completes every job at once, recording its pickup latency first (and
/// its start, for the end-to-end figure, when asked).
#[derive(Debug, Clone)]
pub struct NoopHandler {
    pub latency: Arc<LatencyRecorder>,
    pub end_to_end: Option<Arc<EndToEnd>>,
    /// How long each job waits before it completes (an I/O-bound
    /// handler); zero for a no-op.
    pub job_time: std::time::Duration,
}

#[async_trait]
impl Handler for NoopHandler {
    async fn handle(&self, ctx: JobContext) -> HandlerResult {
        self.latency.record_since(ctx.job.ready_at);
        if let Some(e2e) = &self.end_to_end {
            e2e.started(ctx.job.token.job_id.0, ctx.job.ready_at);
        }
        if !self.job_time.is_zero() {
            tokio::time::sleep(self.job_time).await;
        }
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
