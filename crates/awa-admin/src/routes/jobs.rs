//! `/api/jobs`: the filtered, cursor-paged list, one job, cancel.

use super::model::{Cancelled, JobDetail, JobPage};
use crate::AppState;
use crate::auth::Actor;
use crate::error::ApiError;
use awa_core::{JobId, JobState, QueueName};
use awa_exec::{ExecPlane, PgExecPlane};
use awa_history::{HistoryPlane, JobFilter, PgHistoryPlane};
use axum::Json;
use axum::extract::rejection::{PathRejection, QueryRejection};
use axum::extract::{Extension, Path, Query, State};

/// The page size when none is asked for.
pub const DEFAULT_PAGE: i64 = 50;

#[derive(Debug, serde::Deserialize, utoipa::IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct ListParams {
    /// Only this queue.
    pub queue: Option<String>,
    /// Only this state (available, scheduled, retryable, snoozed, running,
    /// completed, failed, cancelled, dead_lettered).
    pub state: Option<String>,
    /// Only this job kind.
    pub kind: Option<String>,
    /// Only ids below this one: the previous page's `next_before`.
    pub before: Option<i64>,
    /// Page size, 1 to 500 (default 50).
    pub limit: Option<i64>,
}

/// A job id from a path or body: a positive integer.
pub(crate) fn job_id(id: i64) -> Result<JobId, ApiError> {
    if id < 1 {
        return Err(ApiError::bad_request(format!(
            "job id {id} is not valid: job ids are positive integers"
        )));
    }
    Ok(JobId(id))
}

pub(crate) fn page_size(limit: Option<i64>, default: i64) -> Result<i64, ApiError> {
    let limit = limit.unwrap_or(default);
    if !(1..=crate::MAX_PAGE).contains(&limit) {
        return Err(ApiError::bad_request(format!(
            "limit must be between 1 and {} (got {limit}); page with `before`",
            crate::MAX_PAGE
        )));
    }
    Ok(limit)
}

fn filter(params: &ListParams) -> Result<JobFilter, ApiError> {
    let queue = params.queue.clone().map(QueueName::new).transpose()?;
    let state = params
        .state
        .as_deref()
        .map(str::parse::<JobState>)
        .transpose()
        .map_err(ApiError::bad_request)?;
    if let Some(kind) = &params.kind {
        awa_core::NewJob::check_kind(kind)?;
    }
    let before = params.before.map(job_id).transpose()?;
    Ok(JobFilter {
        queue,
        state,
        kind: params.kind.clone(),
        before,
    })
}

#[utoipa::path(get, path = "/api/jobs", tag = "jobs", params(ListParams),
    responses((status = 200, body = JobPage), (status = 400, body = crate::ErrorBody),
              (status = 401, body = crate::ErrorBody), (status = 503, body = crate::ErrorBody)))]
pub async fn list(
    State(state): State<AppState>,
    params: Result<Query<ListParams>, QueryRejection>,
) -> Result<Json<JobPage>, ApiError> {
    let Query(params) = params?;
    let filter = filter(&params)?;
    let limit = page_size(params.limit, DEFAULT_PAGE)?;
    let mut conn = state.pool.acquire().await?;
    let jobs = PgHistoryPlane::new(state.config.schema.clone())
        .list_page(&mut conn, &filter, limit)
        .await?;
    let next_before = (jobs.len() as i64 == limit)
        .then(|| jobs.last().map(|j| j.id.0))
        .flatten();
    Ok(Json(JobPage { jobs, next_before }))
}

#[utoipa::path(get, path = "/api/jobs/{id}", tag = "jobs",
    params(("id" = i64, Path, description = "job id")),
    responses((status = 200, body = JobDetail), (status = 400, body = crate::ErrorBody),
              (status = 404, body = crate::ErrorBody), (status = 503, body = crate::ErrorBody)))]
pub async fn detail(
    State(state): State<AppState>,
    id: Result<Path<i64>, PathRejection>,
) -> Result<Json<JobDetail>, ApiError> {
    let Path(id) = id?;
    let id = job_id(id)?;
    let schema = state.config.schema.clone();
    let mut conn = state.pool.acquire().await?;
    let history = PgHistoryPlane::new(schema.clone());
    let Some(job) = history.job(&mut conn, id).await? else {
        let horizon = history.horizon(&mut conn).await?;
        return Err(ApiError::not_found(match horizon {
            Some(h) if id <= h.pruned_through => format!(
                "job {id} is no longer stored: terminal history of jobs up to id {} has been \
                 pruned (the latest at {}); queue counts still include it",
                h.pruned_through,
                h.pruned_at.to_rfc3339()
            ),
            _ => format!("no job with id {id} in schema {schema}"),
        }));
    };
    let progress = PgExecPlane::new(schema)
        .attempt_progress(&mut conn, id)
        .await?;
    Ok(Json(JobDetail { job, progress }))
}

#[utoipa::path(post, path = "/api/jobs/{id}/cancel", tag = "jobs",
    params(("id" = i64, Path, description = "job id")),
    responses((status = 200, body = Cancelled), (status = 400, body = crate::ErrorBody),
              (status = 401, body = crate::ErrorBody), (status = 403, body = crate::ErrorBody),
              (status = 404, body = crate::ErrorBody)))]
pub async fn cancel(
    State(state): State<AppState>,
    Extension(actor): Extension<Actor>,
    id: Result<Path<i64>, PathRejection>,
) -> Result<Json<Cancelled>, ApiError> {
    let Path(id) = id?;
    let id = job_id(id)?;
    super::log_action(&actor, "job.cancel", &id.to_string());
    let schema = state.config.schema.clone();
    let mut conn = state.pool.acquire().await?;
    let Some(from) = PgExecPlane::new(schema.clone())
        .cancel_job(&mut conn, id)
        .await?
    else {
        return Err(ApiError::not_found(format!(
            "no unfinished job with id {id} in schema {schema} (unknown, or already completed, \
             failed, cancelled or dead-lettered)"
        )));
    };
    Ok(Json(Cancelled {
        id,
        cancelled_from: from,
    }))
}
