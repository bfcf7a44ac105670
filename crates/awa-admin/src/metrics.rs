//! The Prometheus side of Awa's OpenTelemetry metrics.
//!
//! [`Metrics::install`] builds a meter provider whose reader is a
//! Prometheus registry, points the worker's instruments at it
//! (`awa_exec::metrics::init`) and registers the gauges `awa serve` reads
//! from the database. [`Metrics::render`] is the scrape: the text format.
//!
//! Database gauges (queue depth, oldest available age, ring rows per slot,
//! last rotate/prune outcomes, pinned-snapshot age, leader status) are
//! observed at scrape time from a snapshot refreshed through the plane
//! crates at most every [`DB_CACHE`], so a scraper cannot load the
//! database. A worker's `--metrics-addr` endpoint has no database gauges.

use crate::AppState;
use crate::error::ApiError;
use awa_history::{HistoryPlane, PgHistoryPlane};
use axum::extract::State;
use axum::http::header;
use axum::response::IntoResponse;
use opentelemetry::KeyValue;
use opentelemetry::metrics::MeterProvider;
use opentelemetry_sdk::metrics::SdkMeterProvider;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How long a scrape reuses the database gauges of the previous one.
pub const DB_CACHE: Duration = Duration::from_secs(2);

#[derive(Debug, thiserror::Error)]
#[error("could not set up the Prometheus exporter: {0}")]
pub struct MetricsError(String);

/// What the database gauges show, as of `taken`.
#[derive(Debug, Default)]
struct DbSnapshot {
    taken: Option<Instant>,
    /// (queue, state, jobs) for live states.
    depth: Vec<(String, String, i64)>,
    /// (queue, seconds).
    oldest: Vec<(String, f64)>,
    /// (schema, ring, slot, rows).
    slot_rows: Vec<(String, String, i32, i64)>,
    /// (schema, ring, task, outcome, unix seconds).
    outcomes: Vec<(String, String, String, String, f64)>,
    pinned_age: f64,
    leader: Option<bool>,
}

#[derive(Debug)]
struct Inner {
    registry: prometheus::Registry,
    provider: SdkMeterProvider,
    db: Arc<Mutex<DbSnapshot>>,
    refresh: tokio::sync::Mutex<()>,
}

/// The process's metrics: cheap to clone.
#[derive(Debug, Clone)]
pub struct Metrics {
    inner: Arc<Inner>,
}

/// Live states whose counts are the queue depth gauge.
const LIVE: [&str; 6] = [
    "available",
    "scheduled",
    "retryable",
    "snoozed",
    "buffered",
    "running",
];

impl Metrics {
    /// Build the exporter and start recording the worker's instruments
    /// through it. Call once per process (later calls get a registry the
    /// worker instruments do not record into).
    pub fn install() -> Result<Self, MetricsError> {
        let registry = prometheus::Registry::new();
        let exporter = opentelemetry_prometheus::exporter()
            .with_registry(registry.clone())
            .without_target_info()
            .scope_info_enabled(false)
            .build()
            .map_err(|e| MetricsError(e.to_string()))?;
        let provider = SdkMeterProvider::builder().with_reader(exporter).build();
        let meter = provider.meter("awa");
        awa_exec::metrics::init(&meter);
        let db = Arc::new(Mutex::new(DbSnapshot::default()));
        register_db_gauges(&meter, &db);
        Ok(Self {
            inner: Arc::new(Inner {
                registry,
                provider,
                db,
                refresh: tokio::sync::Mutex::new(()),
            }),
        })
    }

    /// Everything recorded, in the Prometheus text format.
    pub fn render(&self) -> String {
        use prometheus::Encoder;
        let families = self.inner.registry.gather();
        let mut out = Vec::new();
        if let Err(err) = prometheus::TextEncoder::new().encode(&families, &mut out) {
            tracing::warn!(error = %err, "could not encode metrics");
        }
        String::from_utf8(out).unwrap_or_default()
    }

    /// Flush and stop the provider (end of process).
    pub fn shutdown(&self) {
        let _ = self.inner.provider.shutdown();
    }

    /// Re-read the database gauges unless the last read is fresh.
    async fn refresh(&self, state: &AppState) -> Result<(), ApiError> {
        let _one = self.inner.refresh.lock().await;
        let fresh = self
            .inner
            .db
            .lock()
            .expect("metrics lock")
            .taken
            .is_some_and(|t| t.elapsed() < DB_CACHE);
        if fresh {
            return Ok(());
        }
        let mut conn = state.pool.acquire().await?;
        let history = PgHistoryPlane::new(state.config.schema.clone());
        let stats = history.queue_stats(&mut conn, None).await?;
        let oldest = history.queue_ages(&mut conn).await?;
        let status = awa_control::status::storage_status(&mut conn).await?;
        drop(conn);
        let mut snap = DbSnapshot {
            taken: Some(Instant::now()),
            oldest,
            pinned_age: status
                .maintenance
                .pinned_snapshot
                .as_ref()
                .map_or(0.0, |p| p.age_secs),
            leader: Some(
                status
                    .maintenance
                    .leader
                    .as_ref()
                    .is_some_and(|l| l.holding),
            ),
            ..DbSnapshot::default()
        };
        for (queue, states) in stats {
            for state in LIVE {
                let n = states.get(state).copied().unwrap_or(0);
                snap.depth.push((queue.clone(), state.to_string(), n));
            }
        }
        for s in &status.substrates {
            for r in &s.slot_rows {
                snap.slot_rows
                    .push((s.schema.to_string(), r.ring.clone(), r.slot, r.live_rows));
            }
            for o in &s.last_outcomes {
                snap.outcomes.push((
                    s.schema.to_string(),
                    o.ring.clone(),
                    o.task.clone(),
                    o.outcome.clone(),
                    o.at.time()
                        .map_or(f64::NAN, |t| t.timestamp_millis() as f64 / 1000.0),
                ));
            }
        }
        *self.inner.db.lock().expect("metrics lock") = snap;
        Ok(())
    }
}

fn register_db_gauges(meter: &opentelemetry::metrics::Meter, db: &Arc<Mutex<DbSnapshot>>) {
    let snap = db.clone();
    meter
        .i64_observable_gauge("awa_queue_depth")
        .with_description("Unfinished jobs per queue and state (awa serve, from the database)")
        .with_callback(move |o| {
            for (queue, state, n) in &snap.lock().expect("metrics lock").depth {
                o.observe(
                    *n,
                    &[
                        KeyValue::new("queue", queue.clone()),
                        KeyValue::new("state", state.clone()),
                    ],
                );
            }
        })
        .build();
    let snap = db.clone();
    meter
        .f64_observable_gauge("awa_queue_oldest_available")
        .with_unit("s")
        .with_description("How long the oldest available job of the queue has waited")
        .with_callback(move |o| {
            for (queue, secs) in &snap.lock().expect("metrics lock").oldest {
                o.observe(*secs, &[KeyValue::new("queue", queue.clone())]);
            }
        })
        .build();
    let snap = db.clone();
    meter
        .i64_observable_gauge("awa_ring_slot_rows")
        .with_description("Estimated live rows per ring slot (statistics collector)")
        .with_callback(move |o| {
            for (schema, ring, slot, rows) in &snap.lock().expect("metrics lock").slot_rows {
                o.observe(
                    *rows,
                    &[
                        KeyValue::new("schema", schema.clone()),
                        KeyValue::new("ring", ring.clone()),
                        KeyValue::new("slot", i64::from(*slot)),
                    ],
                );
            }
        })
        .build();
    let snap = db.clone();
    meter
        .f64_observable_gauge("awa_ring_last_outcome_timestamp")
        .with_unit("s")
        .with_description(
            "When each ring's last rotate/prune outcome was recorded (unix time), by outcome",
        )
        .with_callback(move |o| {
            for (schema, ring, task, outcome, at) in &snap.lock().expect("metrics lock").outcomes {
                o.observe(
                    *at,
                    &[
                        KeyValue::new("schema", schema.clone()),
                        KeyValue::new("ring", ring.clone()),
                        KeyValue::new("task", task.clone()),
                        KeyValue::new("outcome", outcome.clone()),
                    ],
                );
            }
        })
        .build();
    let snap = db.clone();
    meter
        .f64_observable_gauge("awa_pinned_snapshot_age")
        .with_unit("s")
        .with_description("Age of the oldest snapshot holding reclamation back (0: none)")
        .with_callback(move |o| {
            let s = snap.lock().expect("metrics lock");
            if s.taken.is_some() {
                o.observe(s.pinned_age, &[]);
            }
        })
        .build();
    let snap = db.clone();
    meter
        .i64_observable_gauge("awa_leader_up")
        .with_description("1 when a maintenance leader holds the lock, else 0")
        .with_callback(move |o| {
            if let Some(up) = snap.lock().expect("metrics lock").leader {
                o.observe(i64::from(up), &[]);
            }
        })
        .build();
}

/// `GET /metrics`: the Prometheus text format.
#[utoipa::path(get, path = "/metrics", tag = "metrics",
    responses((status = 200, description = "Prometheus text format", content_type = "text/plain"),
              (status = 401, body = crate::ErrorBody), (status = 404, body = crate::ErrorBody)))]
pub async fn scrape(State(state): State<AppState>) -> Result<impl IntoResponse, ApiError> {
    let Some(metrics) = state.metrics.clone() else {
        return Err(ApiError::not_found(
            "metrics are not enabled on this server",
        ));
    };
    metrics.refresh(&state).await?;
    Ok((
        [(header::CONTENT_TYPE, "text/plain; version=0.0.4")],
        metrics.render(),
    ))
}

/// A router with only `/metrics` (no database gauges), for
/// `awa worker run --metrics-addr`, answering only to `hosts` (the origin
/// rule of `awa serve`).
pub fn worker_router(metrics: Metrics, hosts: crate::AllowedHosts) -> axum::Router {
    axum::Router::new()
        .route(
            "/metrics",
            axum::routing::get(move || {
                let metrics = metrics.clone();
                async move {
                    (
                        [(header::CONTENT_TYPE, "text/plain; version=0.0.4")],
                        metrics.render(),
                    )
                }
            }),
        )
        .layer(axum::middleware::from_fn_with_state(
            Arc::new(hosts),
            crate::origin::guard,
        ))
}

/// Serve [`worker_router`] on `listener` until the process ends.
pub async fn serve_worker(
    listener: tokio::net::TcpListener,
    metrics: Metrics,
    hosts: crate::AllowedHosts,
) {
    if let Err(err) = axum::serve(listener, worker_router(metrics, hosts)).await {
        tracing::warn!(error = %err, "the metrics endpoint stopped");
    }
}
