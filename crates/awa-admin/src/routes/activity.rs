//! `/api/activity`: throughput, failures and latency per minute over the
//! last hour (or up to two), for the dashboard's charts. Read from
//! `awa.queue_minutes`, which the maintenance leader's health task fills;
//! nothing is measured per request.

use super::model::{ActivityPoint, ActivityView};
use crate::AppState;
use crate::error::ApiError;
use awa_core::QueueName;
use awa_history::{ActivityMinute, PgHistoryPlane};
use axum::Json;
use axum::extract::rejection::QueryRejection;
use axum::extract::{Query, State};
use chrono::{DateTime, DurationRound, Utc};

/// Minutes served when none are asked for: the charts' hour.
pub const DEFAULT_MINUTES: i32 = 60;

#[derive(Debug, serde::Deserialize, utoipa::IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct ActivityParams {
    /// Minutes to cover, 1 to 120 (default 60), ending with the current one.
    pub minutes: Option<i32>,
    /// Only this queue (default: every queue, summed).
    pub queue: Option<String>,
}

#[utoipa::path(get, path = "/api/activity", tag = "queues", params(ActivityParams),
    responses((status = 200, body = ActivityView), (status = 400, body = crate::ErrorBody),
              (status = 401, body = crate::ErrorBody), (status = 503, body = crate::ErrorBody)))]
pub async fn activity(
    State(state): State<AppState>,
    params: Result<Query<ActivityParams>, QueryRejection>,
) -> Result<Json<ActivityView>, ApiError> {
    let Query(params) = params?;
    let minutes = params.minutes.unwrap_or(DEFAULT_MINUTES);
    awa_core::bounds::ACTIVITY_MINUTES.check(i64::from(minutes))?;
    let queue = params.queue.map(QueueName::new).transpose()?;
    let mut conn = state.pool.acquire().await?;
    let rows = PgHistoryPlane::new(state.config.schema.clone())
        .activity(&mut conn, minutes)
        .await?;
    drop(conn);
    let rows: Vec<ActivityMinute> = rows
        .into_iter()
        .filter(|r| queue.as_ref().is_none_or(|q| r.queue == q.as_str()))
        .collect();
    Ok(Json(ActivityView {
        minutes,
        queue: queue.map(|q| q.as_str().to_owned()),
        last_measured_at: rows.iter().filter_map(|r| r.measured_at.time()).max(),
        points: points(&rows, minutes, Utc::now()),
    }))
}

/// One point per minute of the window ending with `now`'s minute, oldest
/// first, the queues summed: counts added, pickup averages weighted by the
/// claims sampled, maxima the largest.
fn points(rows: &[ActivityMinute], minutes: i32, now: DateTime<Utc>) -> Vec<ActivityPoint> {
    let last = now
        .duration_trunc(chrono::Duration::minutes(1))
        .unwrap_or(now);
    (0..minutes)
        .rev()
        .map(|i| {
            let minute = last - chrono::Duration::minutes(i64::from(i));
            let of: Vec<&ActivityMinute> = rows
                .iter()
                .filter(|r| r.minute == awa_core::DbTime::At(minute))
                .collect();
            let sampled: i64 = of.iter().map(|r| i64::from(r.claims_sampled)).sum();
            let weighted: f64 = of
                .iter()
                .filter_map(|r| r.pickup_avg_secs.map(|s| s * f64::from(r.claims_sampled)))
                .sum();
            let max = |f: fn(&ActivityMinute) -> Option<f64>| {
                of.iter().filter_map(|r| f(r)).reduce(f64::max)
            };
            ActivityPoint {
                minute,
                completed: of.iter().map(|r| r.completed).sum(),
                failed: of.iter().map(|r| r.failed).sum(),
                cancelled: of.iter().map(|r| r.cancelled).sum(),
                dead_lettered: of.iter().map(|r| r.dead_lettered).sum(),
                pickup_avg_secs: (sampled > 0).then(|| weighted / sampled as f64),
                pickup_max_secs: max(|r| r.pickup_max_secs),
                wait_max_secs: max(|r| r.wait_max_secs),
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    fn row(queue: &str, minute: DateTime<Utc>, claims: i32, avg: Option<f64>) -> ActivityMinute {
        ActivityMinute {
            queue: queue.into(),
            minute: minute.into(),
            completed: 2,
            failed: 1,
            cancelled: 0,
            dead_lettered: 1,
            claims_sampled: claims,
            pickup_avg_secs: avg,
            pickup_max_secs: avg.map(|a| a * 2.0),
            wait_max_secs: None,
            measured_at: minute.into(),
        }
    }

    #[test]
    fn queues_are_summed_per_minute_and_empty_minutes_are_zero() {
        let now = Utc.with_ymd_and_hms(2026, 1, 2, 3, 4, 30).unwrap();
        let m = |back: i64| {
            Utc.with_ymd_and_hms(2026, 1, 2, 3, 4, 0).unwrap() - chrono::Duration::minutes(back)
        };
        let rows = [
            row("a", m(0), 1, Some(1.0)),
            row("b", m(0), 3, Some(3.0)),
            row("a", m(2), 0, None),
        ];
        let p = points(&rows, 3, now);
        assert_eq!(
            p.iter().map(|p| p.minute).collect::<Vec<_>>(),
            vec![m(2), m(1), m(0)]
        );
        assert_eq!(p[2].completed, 4);
        assert_eq!(p[2].pickup_avg_secs, Some(2.5), "weighted by claims");
        assert_eq!(p[2].pickup_max_secs, Some(6.0));
        assert_eq!((p[1].completed, p[1].pickup_avg_secs), (0, None));
        assert_eq!(
            (p[0].failed, p[0].dead_lettered, p[0].pickup_avg_secs),
            (1, 1, None)
        );
    }
}
