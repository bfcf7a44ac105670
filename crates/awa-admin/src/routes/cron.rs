//! `/api/cron/{name}/pause|resume|run`: the cron controls, as `awa cron
//! pause|resume|run-now` (the same calls: `awa_control::cron` and
//! `awa_maint::cron::run_now`).

use super::model::{CronEntry, CronRun};
use crate::AppState;
use crate::auth::Actor;
use crate::error::ApiError;
use axum::Json;
use axum::extract::rejection::PathRejection;
use axum::extract::{Extension, Path, State};

fn unknown(name: &str) -> ApiError {
    ApiError::not_found(format!(
        "no schedule named {name:?}; GET /api/cron lists them"
    ))
}

#[utoipa::path(post, path = "/api/cron/{name}/pause", tag = "system",
    params(("name" = String, Path, description = "schedule name")),
    responses((status = 200, body = CronEntry), (status = 400, body = crate::ErrorBody),
              (status = 401, body = crate::ErrorBody), (status = 403, body = crate::ErrorBody),
              (status = 404, body = crate::ErrorBody)))]
pub async fn pause(
    state: State<AppState>,
    actor: Extension<Actor>,
    name: Result<Path<String>, PathRejection>,
) -> Result<Json<CronEntry>, ApiError> {
    set_enabled(state, actor, name, false).await
}

#[utoipa::path(post, path = "/api/cron/{name}/resume", tag = "system",
    params(("name" = String, Path, description = "schedule name")),
    responses((status = 200, body = CronEntry), (status = 400, body = crate::ErrorBody),
              (status = 401, body = crate::ErrorBody), (status = 403, body = crate::ErrorBody),
              (status = 404, body = crate::ErrorBody)))]
pub async fn resume(
    state: State<AppState>,
    actor: Extension<Actor>,
    name: Result<Path<String>, PathRejection>,
) -> Result<Json<CronEntry>, ApiError> {
    set_enabled(state, actor, name, true).await
}

/// Pause or resume; the schedule as it now stands. Ticks of a pause are not
/// fired on resume.
async fn set_enabled(
    State(state): State<AppState>,
    Extension(actor): Extension<Actor>,
    name: Result<Path<String>, PathRejection>,
    enabled: bool,
) -> Result<Json<CronEntry>, ApiError> {
    let Path(name) = name?;
    let action = if enabled { "cron.resume" } else { "cron.pause" };
    super::log_action(&actor, action, &name);
    let mut conn = state.pool.acquire().await?;
    if !awa_control::cron::set_enabled(&mut conn, &name, enabled).await? {
        return Err(unknown(&name));
    }
    let now = chrono::Utc::now();
    awa_control::cron::list(&mut conn, false)
        .await?
        .into_iter()
        .find(|s| s.schedule.name == name)
        .map(|s| Json(CronEntry::new(s, now)))
        .ok_or_else(|| unknown(&name))
}

#[utoipa::path(post, path = "/api/cron/{name}/run", tag = "system",
    params(("name" = String, Path, description = "schedule name")),
    responses((status = 200, body = CronRun), (status = 400, body = crate::ErrorBody),
              (status = 401, body = crate::ErrorBody), (status = 403, body = crate::ErrorBody),
              (status = 404, body = crate::ErrorBody)))]
pub async fn run_now(
    State(state): State<AppState>,
    Extension(actor): Extension<Actor>,
    name: Result<Path<String>, PathRejection>,
) -> Result<Json<CronRun>, ApiError> {
    let Path(name) = name?;
    super::log_action(&actor, "cron.run_now", &name);
    match awa_maint::cron::run_now(&state.pool, &state.config.schema, &name).await? {
        Some(job_id) => Ok(Json(CronRun { name, job_id })),
        None => Err(unknown(&name)),
    }
}
