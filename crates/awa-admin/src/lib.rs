//! The operator surface of Awa: the admin HTTP API (`awa serve`), the
//! dashboard page it serves, its OpenAPI document and the Prometheus
//! scrape endpoint.
//!
//! Owns: HTTP routing (axum), request validation, the origin rule
//! (`origin.rs`: which `Host` values are answered, and that a server beyond
//! loopback requires the token for reads), the token rule
//! (`auth.rs`, the only place it is enforced), the mapping of every error
//! to `{"error": {"code", "message"}}` (`error.rs`), the OpenAPI document
//! (`openapi.rs`, generated from the types it serves), the dashboard assets
//! compiled in (`assets.rs`), and the metrics exporter (`metrics.rs`:
//! OpenTelemetry through a Prometheus registry, plus gauges read from the
//! database at scrape time).
//!
//! Does not own: any SQL. Every read and action goes through the plane
//! crates (`awa-history`, `awa-dlq`, `awa-exec`, `awa-control`), so the
//! API can do nothing the CLI could not; `awa-maint/tests/maint/tidy.rs` checks
//! it issues no SQL of its own. Nor does it pick a substrate: it serves
//! the [`SchemaName`] it is given.

mod assets;
pub mod auth;
mod error;
pub mod metrics;
pub mod openapi;
pub mod origin;
mod routes;

pub use auth::{Token, TokenError};
pub use error::{ApiError, ErrorBody, ErrorDetail};
pub use origin::{AllowedHosts, BadHost, ExposedListen};
pub use routes::model;

use awa_core::SchemaName;
use std::sync::Arc;
use std::time::Duration;

/// Largest request body accepted (actions carry a few small fields).
pub const MAX_BODY_BYTES: usize = 16 * 1024;

/// Largest page of jobs or DLQ entries one request may ask for.
pub const MAX_PAGE: i64 = 500;

/// Where and how `awa serve` serves.
#[derive(Debug, Clone)]
pub struct AdminConfig {
    /// The substrate every read and action applies to.
    pub schema: SchemaName,
    /// Actions need it; without one the server is read-only.
    pub token: Option<Token>,
    /// Reads need the token too (only with a token).
    pub token_for_reads: bool,
    /// A snapshot older than this is reported as holding reclamation back.
    pub pinned_alert: Duration,
    /// The `Host` values answered (loopback only by default; see
    /// [`origin`]).
    pub allowed_hosts: AllowedHosts,
}

impl AdminConfig {
    pub fn new(schema: SchemaName) -> Self {
        Self {
            schema,
            token: None,
            token_for_reads: false,
            pinned_alert: awa_control::status::DEFAULT_PINNED_ALERT,
            allowed_hosts: AllowedHosts::loopback(),
        }
    }

    pub fn read_only(&self) -> bool {
        self.token.is_none()
    }
}

/// What every handler shares.
#[derive(Debug, Clone)]
pub struct AppState {
    pub(crate) pool: sqlx::PgPool,
    pub(crate) config: Arc<AdminConfig>,
    pub(crate) metrics: Option<metrics::Metrics>,
}

impl AppState {
    /// `metrics`: served at `/metrics` (with the database gauges) when set.
    ///
    /// The pool's sessions should run with `jit = off`, as every pool Awa
    /// opens does (`awa_core::conninfo`; or a pool built with
    /// `PgConnectOptions::options([("jit", "off")])`): with JIT on,
    /// PostgreSQL JIT-compiles the job list's read of the `jobs` view over
    /// never-analyzed ring partitions, seconds of server CPU per page.
    pub fn new(pool: sqlx::PgPool, config: AdminConfig, metrics: Option<metrics::Metrics>) -> Self {
        Self {
            pool,
            config: Arc::new(config),
            metrics,
        }
    }
}

/// The whole surface: API, page, document, metrics.
pub fn router(state: AppState) -> axum::Router {
    routes::router(state)
}

/// Listen on `addr` (port 0: any free port; `local_addr` says which).
pub async fn bind(addr: std::net::SocketAddr) -> std::io::Result<tokio::net::TcpListener> {
    tokio::net::TcpListener::bind(addr).await
}

/// Serve until `shutdown` resolves.
pub async fn serve(
    listener: tokio::net::TcpListener,
    state: AppState,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    axum::serve(listener, router(state))
        .with_graceful_shutdown(shutdown)
        .await
}
