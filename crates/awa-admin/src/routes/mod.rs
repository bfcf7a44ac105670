//! The routes: `/api/...` (JSON), `/metrics`, `/openapi.json`, the page.

pub(crate) mod activity;
pub(crate) mod cron;
pub(crate) mod dlq;
pub(crate) mod jobs;
pub mod model;
pub(crate) mod queues;
pub(crate) mod system;

use crate::AppState;
use crate::error::ApiError;
use axum::Router;
use axum::extract::DefaultBodyLimit;
use axum::http::StatusCode;
use axum::routing::{get, post};

pub fn router(state: AppState) -> Router {
    let api = Router::new()
        .route("/info", get(system::info))
        .route("/queues", get(queues::list))
        .route("/activity", get(activity::activity))
        .route("/queues/{queue}/pause", post(queues::pause))
        .route("/queues/{queue}/resume", post(queues::resume))
        .route("/jobs", get(jobs::list))
        .route("/jobs/{id}", get(jobs::detail))
        .route("/jobs/{id}/cancel", post(jobs::cancel))
        .route("/jobs/{id}/retry", post(jobs::retry))
        .route("/jobs/retry", post(jobs::retry_matching))
        .route("/jobs/cancel", post(jobs::cancel_matching))
        .route("/dlq", get(dlq::list))
        .route("/dlq/retry", post(dlq::retry))
        .route("/dlq/purge", post(dlq::purge))
        .route("/storage", get(system::storage))
        .route("/runtimes", get(system::runtimes))
        .route("/cron", get(system::cron))
        .route("/cron/{name}/pause", post(cron::pause))
        .route("/cron/{name}/resume", post(cron::resume))
        .route("/cron/{name}/run", post(cron::run_now))
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed);
    Router::new()
        .nest("/api", api)
        .route("/metrics", get(crate::metrics::scrape))
        .route("/openapi.json", get(crate::openapi::document))
        .route("/healthz", get(|| async { "ok" }))
        .merge(crate::assets::routes())
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
        .layer(DefaultBodyLimit::max(crate::MAX_BODY_BYTES))
        .layer(axum::middleware::from_fn_with_state(
            state.clone(),
            crate::auth::guard,
        ))
        // Outermost: a request for another host is refused before the
        // token is even looked at.
        .layer(axum::middleware::from_fn_with_state(
            std::sync::Arc::new(state.config.allowed_hosts.clone()),
            crate::origin::guard,
        ))
        .with_state(state)
}

async fn not_found() -> ApiError {
    ApiError::not_found("no such endpoint; /openapi.json lists them")
}

async fn method_not_allowed() -> ApiError {
    ApiError::new(
        StatusCode::METHOD_NOT_ALLOWED,
        "method_not_allowed",
        "this endpoint does not take that method; /openapi.json lists them",
    )
}

/// Log an action with its actor, at info level (the token itself never).
pub(crate) fn log_action(actor: &crate::auth::Actor, action: &str, target: &str) {
    tracing::info!(actor = %actor.0, action, target, "admin action");
}
