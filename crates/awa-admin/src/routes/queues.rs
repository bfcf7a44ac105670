//! `/api/queues`: counts, health and throughput per queue; pause/resume.

use super::model::{QueueList, QueueSummary, ThroughputMinute};
use crate::AppState;
use crate::auth::Actor;
use crate::error::ApiError;
use awa_control::queues::{QueueConfig, QueueSettings};
use awa_core::{JobState, QueueName};
use awa_history::{HistoryPlane, PgHistoryPlane};
use axum::Json;
use axum::extract::rejection::PathRejection;
use axum::extract::{Extension, Path, State};
use chrono::{DurationRound, Utc};
use std::collections::{BTreeMap, BTreeSet};

/// Minutes of throughput each queue reports (the page's sparkline).
pub const THROUGHPUT_MINUTES: i32 = 15;

#[utoipa::path(get, path = "/api/queues", tag = "queues",
    responses((status = 200, body = QueueList), (status = 401, body = crate::ErrorBody),
              (status = 503, body = crate::ErrorBody)))]
pub async fn list(State(state): State<AppState>) -> Result<Json<QueueList>, ApiError> {
    let mut conn = state.pool.acquire().await?;
    let history = PgHistoryPlane::new(state.config.schema.clone());
    let stats = history.queue_stats(&mut conn, None).await?;
    let ages: BTreeMap<String, f64> = history.queue_ages(&mut conn).await?.into_iter().collect();
    let points = history.throughput(&mut conn, THROUGHPUT_MINUTES).await?;
    let settings: BTreeMap<String, QueueSettings> = awa_control::queues::list(&mut conn)
        .await?
        .into_iter()
        .map(|s| (s.queue.clone(), s))
        .collect();
    let mut limits: BTreeMap<String, Vec<awa_control::limits::QueueLimit>> = BTreeMap::new();
    for l in awa_control::limits::list(&mut conn, None).await? {
        limits.entry(l.queue.clone()).or_default().push(l);
    }
    drop(conn);

    let names: BTreeSet<&String> = stats
        .keys()
        .chain(settings.keys())
        .chain(limits.keys())
        .collect();
    // Minutes of the window, oldest first, ending with the current one.
    let now = Utc::now()
        .duration_trunc(chrono::Duration::minutes(1))
        .unwrap_or_else(|_| Utc::now());
    let minutes: Vec<_> = (0..THROUGHPUT_MINUTES)
        .rev()
        .map(|i| now - chrono::Duration::minutes(i64::from(i)))
        .collect();
    let queues = names
        .into_iter()
        .map(|name| {
            let counts = JobState::ALL
                .iter()
                .map(|s| {
                    let n = stats
                        .get(name)
                        .and_then(|m| m.get(s.as_str()))
                        .copied()
                        .unwrap_or(0);
                    (s.as_str().to_string(), n)
                })
                .collect();
            let throughput = minutes
                .iter()
                .map(|minute| {
                    let of = |state: JobState| {
                        points
                            .iter()
                            .filter(|p| {
                                &p.queue == name
                                    && p.minute == awa_core::DbTime::At(*minute)
                                    && p.state == state
                            })
                            .map(|p| p.jobs)
                            .sum()
                    };
                    ThroughputMinute {
                        minute: *minute,
                        completed: of(JobState::Completed),
                        failed: of(JobState::Failed),
                        cancelled: of(JobState::Cancelled),
                    }
                })
                .collect();
            QueueSummary {
                queue: name.clone(),
                counts,
                oldest_available_secs: ages.get(name).copied(),
                paused: settings.get(name).is_some_and(|s| s.paused),
                limits: limits.get(name).cloned().unwrap_or_default(),
                throughput,
            }
        })
        .collect();
    Ok(Json(QueueList {
        queues,
        throughput_minutes: THROUGHPUT_MINUTES,
    }))
}

#[utoipa::path(post, path = "/api/queues/{queue}/pause", tag = "queues",
    params(("queue" = String, Path, description = "queue name")),
    responses((status = 200, body = QueueSettings), (status = 400, body = crate::ErrorBody),
              (status = 401, body = crate::ErrorBody), (status = 403, body = crate::ErrorBody)))]
pub async fn pause(
    state: State<AppState>,
    actor: Extension<Actor>,
    queue: Result<Path<String>, PathRejection>,
) -> Result<Json<QueueSettings>, ApiError> {
    set_paused(state, actor, queue, true).await
}

#[utoipa::path(post, path = "/api/queues/{queue}/resume", tag = "queues",
    params(("queue" = String, Path, description = "queue name")),
    responses((status = 200, body = QueueSettings), (status = 400, body = crate::ErrorBody),
              (status = 401, body = crate::ErrorBody), (status = 403, body = crate::ErrorBody)))]
pub async fn resume(
    state: State<AppState>,
    actor: Extension<Actor>,
    queue: Result<Path<String>, PathRejection>,
) -> Result<Json<QueueSettings>, ApiError> {
    set_paused(state, actor, queue, false).await
}

async fn set_paused(
    State(state): State<AppState>,
    Extension(actor): Extension<Actor>,
    queue: Result<Path<String>, PathRejection>,
    paused: bool,
) -> Result<Json<QueueSettings>, ApiError> {
    let Path(queue) = queue?;
    let queue = QueueName::new(queue)?;
    let action = if paused {
        "queue.pause"
    } else {
        "queue.resume"
    };
    super::log_action(&actor, action, queue.as_str());
    let mut conn = state.pool.acquire().await?;
    let config = QueueConfig {
        paused: Some(paused),
        ..QueueConfig::default()
    };
    Ok(Json(config.apply(&mut conn, &queue).await?))
}
