//! `/api/jobs`: the filtered, cursor-paged list, one job with its
//! attempts, cancel and retry of one job, and bulk cancel and retry by
//! filter.

use super::model::{BulkSelection, Cancelled, JobDetail, JobPage};
use crate::AppState;
use crate::auth::Actor;
use crate::error::ApiError;
use awa_core::{JobId, JobState, QueueName};
use awa_exec::{ExecPlane, PgExecPlane};
use awa_history::{HistoryPlane, JobFilter, PgHistoryPlane};
use axum::Json;
use axum::extract::rejection::{JsonRejection, PathRejection, QueryRejection};
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
    /// Only jobs whose args contain this JSON object (jsonb containment,
    /// e.g. `{"user":42}`, URL-encoded).
    pub args_contains: Option<String>,
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
    let args_contains = params
        .args_contains
        .as_deref()
        .map(|text| {
            serde_json::from_str::<serde_json::Value>(text).map_err(|e| {
                ApiError::bad_request(format!(
                    "args_contains is not JSON ({e}); e.g. {{\"user\":42}}"
                ))
            })
        })
        .transpose()?;
    if let Some(value) = &args_contains {
        awa_core::check_containment(value)?;
    }
    Ok(JobFilter {
        queue,
        state,
        kind: params.kind.clone(),
        args_contains,
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

#[utoipa::path(post, path = "/api/jobs/{id}/retry", tag = "jobs",
    params(("id" = i64, Path, description = "job id")),
    responses((status = 200, body = awa_history::Retried), (status = 400, body = crate::ErrorBody),
              (status = 401, body = crate::ErrorBody), (status = 403, body = crate::ErrorBody),
              (status = 404, body = crate::ErrorBody), (status = 409, body = crate::ErrorBody)))]
/// Put a failed or cancelled job back as fresh work (same id, attempts
/// start again, history kept), whether or not its queue dead-letters.
pub async fn retry(
    State(state): State<AppState>,
    Extension(actor): Extension<Actor>,
    id: Result<Path<i64>, PathRejection>,
) -> Result<Json<awa_history::Retried>, ApiError> {
    let Path(id) = id?;
    let id = job_id(id)?;
    super::log_action(&actor, "job.retry", &id.to_string());
    let schema = state.config.schema.clone();
    let mut conn = state.pool.acquire().await?;
    let done = PgHistoryPlane::new(schema.clone())
        .retry(&mut conn, &[id])
        .await?;
    if done.matched == 0 {
        return Err(ApiError::not_found(format!(
            "no failed or cancelled job with id {id} in schema {schema} (unknown, not finished, \
             dead-lettered: use /api/dlq/retry, or past the failure retention)"
        )));
    }
    if let Some(kept) = done.kept.first() {
        return Err(ApiError::new(
            axum::http::StatusCode::CONFLICT,
            "unique_key_held",
            format!(
                "job {id} stays failed: its unique key {:?} is held by unfinished job {}; \
                 retry it once that job has finished",
                kept.unique_key, kept.held_by
            ),
        ));
    }
    Ok(Json(done))
}

fn bulk(body: &BulkSelection) -> Result<awa_core::JobSelection, ApiError> {
    let state = body
        .state
        .as_deref()
        .map(str::parse::<JobState>)
        .transpose()
        .map_err(ApiError::bad_request)?;
    Ok(awa_core::JobSelection {
        queue: QueueName::new(body.queue.clone())?,
        state,
        kind: body.kind.clone(),
        args_contains: body.args_contains.clone(),
    })
}

fn bulk_target(sel: &awa_core::JobSelection) -> String {
    let mut out = format!("queue {}", sel.queue);
    if let Some(s) = sel.state {
        out.push_str(&format!(" state {s}"));
    }
    if let Some(k) = &sel.kind {
        out.push_str(&format!(" kind {k}"));
    }
    if let Some(a) = &sel.args_contains {
        out.push_str(&format!(" args @> {a}"));
    }
    out
}

#[utoipa::path(post, path = "/api/jobs/retry", tag = "jobs", request_body = BulkSelection,
    responses((status = 200, body = awa_history::Retried), (status = 400, body = crate::ErrorBody),
              (status = 401, body = crate::ErrorBody), (status = 403, body = crate::ErrorBody),
              (status = 413, body = crate::ErrorBody)))]
/// Put back every failed or cancelled job of a queue that matches the
/// filter (`state` is required: failed or cancelled); with `dry_run`, only
/// count them.
pub async fn retry_matching(
    State(state): State<AppState>,
    Extension(actor): Extension<Actor>,
    body: Result<Json<BulkSelection>, JsonRejection>,
) -> Result<Json<awa_history::Retried>, ApiError> {
    let Json(body) = body?;
    let sel = bulk(&body)?;
    sel.validate(awa_core::SelectionFor::Retry)?;
    if !body.dry_run {
        super::log_action(&actor, "job.retry_matching", &bulk_target(&sel));
    }
    let mut conn = state.pool.acquire().await?;
    let done = awa_history::retry_matching(
        &mut conn,
        std::slice::from_ref(&state.config.schema),
        &sel,
        body.dry_run,
    )
    .await?;
    Ok(Json(done))
}

#[utoipa::path(post, path = "/api/jobs/cancel", tag = "jobs", request_body = BulkSelection,
    responses((status = 200, body = awa_exec::BulkCancelled), (status = 400, body = crate::ErrorBody),
              (status = 401, body = crate::ErrorBody), (status = 403, body = crate::ErrorBody),
              (status = 413, body = crate::ErrorBody)))]
/// Cancel every unfinished job of a queue that matches the filter (`state`
/// optional: available, scheduled, retryable, snoozed or running); with
/// `dry_run`, only count them.
pub async fn cancel_matching(
    State(state): State<AppState>,
    Extension(actor): Extension<Actor>,
    body: Result<Json<BulkSelection>, JsonRejection>,
) -> Result<Json<awa_exec::BulkCancelled>, ApiError> {
    let Json(body) = body?;
    let sel = bulk(&body)?;
    sel.validate(awa_core::SelectionFor::Cancel)?;
    if !body.dry_run {
        super::log_action(&actor, "job.cancel_matching", &bulk_target(&sel));
    }
    let mut conn = state.pool.acquire().await?;
    let done = awa_exec::cancel_matching(
        &mut conn,
        std::slice::from_ref(&state.config.schema),
        &sel,
        body.dry_run,
    )
    .await?;
    Ok(Json(done))
}
