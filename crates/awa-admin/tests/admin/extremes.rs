//! Issue 36, item 1, through the admin API: `GET /api/jobs` and
//! `/api/jobs/ID` dropped the connection (a panic in chrono under sqlx)
//! once a job held `run_at = infinity`. Every `timestamptz` column of
//! schema `awa` is set to each extreme PostgreSQL accepts, then every
//! interval column, then every integer column no index uses; every read
//! endpoint answers 200 with JSON, and a job whose time cannot be shown as
//! one carries it raw with a warning.

use crate::common;

use axum::http::StatusCode;
use common::*;
use sqlx::Connection;

async fn read_everything(app: &axum::Router, ids: &[i64], when: &str) -> Vec<(String, Reply)> {
    let mut uris: Vec<String> = [
        "/api/jobs",
        "/api/jobs?queue=alpha",
        "/api/jobs?state=scheduled",
        "/api/jobs?state=failed",
        "/api/queues",
        "/api/activity",
        "/api/dlq",
        "/api/cron",
        "/api/storage",
        "/api/runtimes",
        "/api/info",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    uris.extend(ids.iter().map(|id| format!("/api/jobs/{id}")));
    let mut replies = Vec::new();
    for uri in uris {
        let reply = get(app, &uri, None).await;
        assert!(
            reply.status == StatusCode::OK
                || (reply.status == StatusCode::NOT_FOUND && uri.starts_with("/api/jobs/")),
            "{when}: GET {uri}: {} {}",
            reply.status,
            reply.text
        );
        let _ = reply.json();
        replies.push((uri, reply));
    }
    let metrics = get(app, "/metrics", None).await;
    assert_eq!(
        metrics.status,
        StatusCode::OK,
        "{when}: /metrics {}",
        metrics.text
    );
    replies
}

#[tokio::test]
async fn every_endpoint_shows_every_extreme_a_table_can_hold() {
    let (db, pool) = setup().await;
    let seeded = seed(&pool).await;
    let (failed, running, _runtime) = seed_failures(&pool).await;
    seed_cron(&pool).await;
    // A running job that reported progress (its attempt_state row).
    let reporting = claim(&pool, "alpha", 1).await.remove(0);
    {
        use awa_exec::ExecPlane;
        let mut conn = pool.acquire().await.unwrap();
        assert!(
            awa_exec::PgExecPlane::new(schema())
                .heartbeat(
                    &mut conn,
                    &reporting.token,
                    &awa_exec::Progress {
                        percent: Some(50),
                        message: Some("half".into()),
                        checkpoint: Some(serde_json::json!({"at": 1})),
                    },
                )
                .await
                .unwrap()
        );
    }
    let metrics = awa_admin::metrics::Metrics::install().unwrap();
    let app = awa_admin::router(awa_admin::AppState::new(
        pool.clone(),
        config(false),
        Some(metrics),
    ));
    let mut ids: Vec<i64> = seeded.alpha.iter().map(|j| j.0).collect();
    ids.extend([seeded.completed.0, seeded.scheduled.0, failed.0, running.0]);
    ids.extend(seeded.dead.iter().map(|j| j.0));
    read_everything(&app, &ids, "before").await;

    let mut conn = sqlx::PgConnection::connect(db.url()).await.unwrap();
    for value in awa_harness::extremes::TIMESTAMPTZ {
        let (written, _) = awa_harness::extremes::write_every_column(
            &mut conn,
            &["awa"],
            "timestamp with time zone",
            value,
            false,
        )
        .await
        .unwrap();
        assert!(
            written.iter().any(|w| w == "awa.runtimes.last_seen_at"),
            "{written:?}"
        );
        let replies = read_everything(&app, &ids, value).await;
        let raw = !value.ends_with("BC") && !value.starts_with("1969");
        if raw {
            let (_, list) = replies.iter().find(|(u, _)| u == "/api/jobs").unwrap();
            let jobs = list.json();
            let first = &jobs["jobs"][0];
            assert_eq!(first["at"], *value, "{jobs}");
            assert!(
                first["warnings"][0].as_str().unwrap().contains(value),
                "{jobs}"
            );
            let uri = format!("/api/jobs/{}", seeded.alpha[0].0);
            let (_, one) = replies.iter().find(|(u, _)| *u == uri).unwrap();
            let job = one.json();
            assert_eq!(job["job"]["created_at"], *value, "{job}");
        }
    }
    for value in awa_harness::extremes::INTERVAL {
        awa_harness::extremes::write_every_column(&mut conn, &["awa"], "interval", value, false)
            .await
            .unwrap();
        read_everything(&app, &ids, value).await;
    }
    for (ty, value) in [
        ("smallint", "32767"),
        ("smallint", "-32768"),
        ("integer", "2147483647"),
        ("integer", "-2147483648"),
        ("bigint", "9223372036854775807"),
        ("bigint", "-9223372036854775808"),
    ] {
        awa_harness::extremes::write_every_column(&mut conn, &["awa"], ty, value, true)
            .await
            .unwrap();
        read_everything(&app, &ids, &format!("{ty} {value}")).await;
    }
}
