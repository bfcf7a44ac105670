//! `/api/info`, `/api/storage`, `/api/runtimes`, `/api/cron`.

use super::model::{CronEntry, CronList, RuntimeList, ServerInfo, StorageView};
use crate::AppState;
use crate::error::ApiError;
use axum::Json;
use axum::extract::State;

#[utoipa::path(get, path = "/api/info", tag = "system",
    responses((status = 200, body = ServerInfo), (status = 401, body = crate::ErrorBody)))]
pub async fn info(State(state): State<AppState>) -> Json<ServerInfo> {
    Json(ServerInfo {
        version: env!("CARGO_PKG_VERSION").to_string(),
        schema: state.config.schema.to_string(),
        read_only: state.config.read_only(),
        token_for_reads: state.config.token_for_reads,
        pinned_alert_secs: state.config.pinned_alert.as_secs_f64(),
    })
}

#[utoipa::path(get, path = "/api/storage", tag = "system",
    responses((status = 200, body = StorageView), (status = 401, body = crate::ErrorBody),
              (status = 503, body = crate::ErrorBody)))]
pub async fn storage(State(state): State<AppState>) -> Result<Json<StorageView>, ApiError> {
    let mut conn = state.pool.acquire().await?;
    let status = awa_control::status::storage_status(&mut conn).await?;
    let pinned_alert = status
        .maintenance
        .pinned_snapshot
        .as_ref()
        .and_then(|p| p.alert(state.config.pinned_alert));
    Ok(Json(StorageView {
        status,
        pinned_alert,
    }))
}

#[utoipa::path(get, path = "/api/runtimes", tag = "system",
    responses((status = 200, body = RuntimeList), (status = 401, body = crate::ErrorBody),
              (status = 503, body = crate::ErrorBody)))]
pub async fn runtimes(State(state): State<AppState>) -> Result<Json<RuntimeList>, ApiError> {
    let mut conn = state.pool.acquire().await?;
    let runtimes = awa_control::runtimes::list(&mut conn).await?;
    Ok(Json(RuntimeList { runtimes }))
}

#[utoipa::path(get, path = "/api/cron", tag = "system",
    responses((status = 200, body = CronList), (status = 401, body = crate::ErrorBody),
              (status = 503, body = crate::ErrorBody)))]
pub async fn cron(State(state): State<AppState>) -> Result<Json<CronList>, ApiError> {
    let mut conn = state.pool.acquire().await?;
    let now = chrono::Utc::now();
    let schedules = awa_control::cron::list(&mut conn, false)
        .await?
        .into_iter()
        .map(|s| CronEntry::new(s, now))
        .collect();
    Ok(Json(CronList { schedules }))
}
