//! `/api/dlq`: dead-lettered jobs; retry and purge.

use super::jobs::{job_id, page_size};
use super::model::{DlqPage, DlqSelection, Purged};
use crate::AppState;
use crate::auth::Actor;
use crate::error::ApiError;
use awa_core::QueueName;
use awa_dlq::{DlqPlane, PgDlqPlane, Retried, Selection};
use axum::Json;
use axum::extract::rejection::{JsonRejection, QueryRejection};
use axum::extract::{Extension, Query, State};

#[derive(Debug, serde::Deserialize, utoipa::IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct DlqParams {
    /// Only this queue.
    pub queue: Option<String>,
    /// Entries to list, 1 to 500 (default 100), newest dead-lettered first.
    pub limit: Option<i64>,
}

#[utoipa::path(get, path = "/api/dlq", tag = "dlq", params(DlqParams),
    responses((status = 200, body = DlqPage), (status = 400, body = crate::ErrorBody),
              (status = 401, body = crate::ErrorBody), (status = 503, body = crate::ErrorBody)))]
pub async fn list(
    State(state): State<AppState>,
    params: Result<Query<DlqParams>, QueryRejection>,
) -> Result<Json<DlqPage>, ApiError> {
    let Query(params) = params?;
    let queue = params.queue.map(QueueName::new).transpose()?;
    let limit = page_size(params.limit, 100)?;
    let mut conn = state.pool.acquire().await?;
    let entries = PgDlqPlane::new(state.config.schema.clone())
        .list(&mut conn, queue.as_ref(), limit)
        .await?;
    Ok(Json(DlqPage { entries }))
}

fn selection(body: &DlqSelection) -> Result<Selection, ApiError> {
    match (body.job_id, body.all) {
        (Some(id), false) => {
            if body.queue.is_some() {
                return Err(ApiError::bad_request(
                    "give either job_id, or all: true with an optional queue, not both",
                ));
            }
            Ok(Selection::One(job_id(id)?))
        }
        (None, true) => Ok(Selection::All {
            queue: body.queue.clone().map(QueueName::new).transpose()?,
        }),
        (Some(_), true) => Err(ApiError::bad_request(
            "give either job_id, or all: true with an optional queue, not both",
        )),
        (None, false) => Err(ApiError::bad_request(
            "say which entries: {\"job_id\": N}, or {\"all\": true} (optionally with \"queue\")",
        )),
    }
}

fn target(which: &Selection) -> String {
    match which {
        Selection::One(id) => format!("job {id}"),
        Selection::All { queue: None } => "all entries".into(),
        Selection::All { queue: Some(q) } => format!("all entries of queue {q}"),
    }
}

#[utoipa::path(post, path = "/api/dlq/retry", tag = "dlq", request_body = DlqSelection,
    responses((status = 200, body = Retried), (status = 400, body = crate::ErrorBody),
              (status = 401, body = crate::ErrorBody), (status = 403, body = crate::ErrorBody),
              (status = 404, body = crate::ErrorBody), (status = 413, body = crate::ErrorBody)))]
pub async fn retry(
    State(state): State<AppState>,
    Extension(actor): Extension<Actor>,
    body: Result<Json<DlqSelection>, JsonRejection>,
) -> Result<Json<Retried>, ApiError> {
    let Json(body) = body?;
    let which = selection(&body)?;
    super::log_action(&actor, "dlq.retry", &target(&which));
    let mut conn = state.pool.acquire().await?;
    let retried = PgDlqPlane::new(state.config.schema.clone())
        .retry(&mut conn, &which)
        .await?;
    if let Selection::One(id) = which
        && retried.retried.is_empty()
        && retried.kept.is_empty()
    {
        return Err(ApiError::not_found(format!(
            "job {id} is not dead-lettered"
        )));
    }
    Ok(Json(retried))
}

#[utoipa::path(post, path = "/api/dlq/purge", tag = "dlq", request_body = DlqSelection,
    responses((status = 200, body = Purged), (status = 400, body = crate::ErrorBody),
              (status = 401, body = crate::ErrorBody), (status = 403, body = crate::ErrorBody),
              (status = 404, body = crate::ErrorBody), (status = 413, body = crate::ErrorBody)))]
pub async fn purge(
    State(state): State<AppState>,
    Extension(actor): Extension<Actor>,
    body: Result<Json<DlqSelection>, JsonRejection>,
) -> Result<Json<Purged>, ApiError> {
    let Json(body) = body?;
    let which = selection(&body)?;
    super::log_action(&actor, "dlq.purge", &target(&which));
    let mut conn = state.pool.acquire().await?;
    let purged = PgDlqPlane::new(state.config.schema.clone())
        .purge(&mut conn, &which)
        .await?;
    if let Selection::One(id) = which
        && purged.is_empty()
    {
        return Err(ApiError::not_found(format!(
            "job {id} is not dead-lettered"
        )));
    }
    Ok(Json(Purged { purged }))
}
