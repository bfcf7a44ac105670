//! The OpenAPI document: the checked-in `docs/openapi.json` is the one the
//! types generate, and real responses (successes and errors) of every
//! endpoint validate against the schemas it gives for them.
//!
//! After changing the API, regenerate with
//! `AWA_BLESS_OPENAPI=1 cargo test -p awa-admin --test admin openapi::`.

use crate::common;

use axum::http::StatusCode;
use common::*;
use serde_json::{Value, json};
use std::path::PathBuf;

fn checked_in() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../docs/openapi.json")
}

#[test]
fn the_checked_in_document_is_the_generated_one() {
    let generated = awa_admin::openapi::document_json();
    let path = checked_in();
    if std::env::var_os("AWA_BLESS_OPENAPI").is_some() {
        std::fs::write(&path, &generated).unwrap();
    }
    let stored = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        stored == generated,
        "docs/openapi.json differs from the document the types generate; regenerate it with \
         AWA_BLESS_OPENAPI=1 cargo test -p awa-admin --test admin openapi:: and review the diff"
    );
}

/// The schema the document gives for `status` of `method path`, as a
/// standalone JSON Schema whose `#/components/...` references resolve.
fn response_schema(doc: &Value, method: &str, path: &str, status: StatusCode) -> Value {
    let op = &doc["paths"][path][method];
    assert!(op.is_object(), "{method} {path} is in the document");
    let response = &op["responses"][status.as_str()];
    assert!(
        response.is_object(),
        "{method} {path} documents status {status}: {}",
        op["responses"]
    );
    let schema = response["content"]["application/json"]["schema"].clone();
    assert!(
        schema.is_object(),
        "{method} {path} {status} has a JSON schema"
    );
    json!({
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "allOf": [schema],
        "components": doc["components"].clone(),
    })
}

fn check(doc: &Value, method: &str, template: &str, reply: &Reply) {
    let schema = response_schema(doc, method, template, reply.status);
    let validator = jsonschema::validator_for(&schema)
        .unwrap_or_else(|e| panic!("schema of {method} {template}: {e}"));
    let body = reply.json();
    let errors: Vec<String> = validator
        .iter_errors(&body)
        .map(|e| format!("{} at {}", e, e.instance_path))
        .collect();
    assert!(
        errors.is_empty(),
        "{method} {template} {} does not match the document: {errors:?}\n{body}",
        reply.status
    );
}

#[tokio::test]
async fn real_responses_match_the_document() {
    let (_db, pool) = setup().await;
    let seeded = seed(&pool).await;
    seed_cron(&pool).await;
    let doc: Value = serde_json::from_str(&awa_admin::openapi::document_json()).unwrap();
    let open = app(&pool, config(false));
    let app = app(&pool, config(true));
    let t = Some(TOKEN);

    let mut gets: Vec<(&str, String, StatusCode)> = vec![
        ("/api/info", "/api/info".into(), StatusCode::OK),
        ("/api/queues", "/api/queues".into(), StatusCode::OK),
        ("/api/jobs", "/api/jobs?limit=2".into(), StatusCode::OK),
        (
            "/api/jobs",
            "/api/jobs?limit=0".into(),
            StatusCode::BAD_REQUEST,
        ),
        (
            "/api/jobs/{id}",
            format!("/api/jobs/{}", seeded.dead[0]),
            StatusCode::OK,
        ),
        (
            "/api/jobs/{id}",
            format!("/api/jobs/{}", seeded.completed),
            StatusCode::OK,
        ),
        (
            "/api/jobs/{id}",
            "/api/jobs/987654".into(),
            StatusCode::NOT_FOUND,
        ),
        (
            "/api/jobs/{id}",
            "/api/jobs/nope".into(),
            StatusCode::BAD_REQUEST,
        ),
        ("/api/dlq", "/api/dlq".into(), StatusCode::OK),
        (
            "/api/dlq",
            "/api/dlq?queue=%20".into(),
            StatusCode::BAD_REQUEST,
        ),
        ("/api/storage", "/api/storage".into(), StatusCode::OK),
        ("/api/runtimes", "/api/runtimes".into(), StatusCode::OK),
        ("/api/cron", "/api/cron".into(), StatusCode::OK),
        ("/api/activity", "/api/activity".into(), StatusCode::OK),
        (
            "/api/activity",
            "/api/activity?minutes=500".into(),
            StatusCode::BAD_REQUEST,
        ),
    ];
    let (failed, running, _) = seed_failures(&pool).await;
    gets.extend([
        (
            "/api/jobs/{id}",
            format!("/api/jobs/{failed}"),
            StatusCode::OK,
        ),
        (
            "/api/jobs/{id}",
            format!("/api/jobs/{running}"),
            StatusCode::OK,
        ),
        (
            "/api/jobs",
            "/api/jobs?args_contains=%7B%22user%22%3A42%7D".into(),
            StatusCode::OK,
        ),
        (
            "/api/jobs",
            "/api/jobs?args_contains=oops".into(),
            StatusCode::BAD_REQUEST,
        ),
    ]);
    for (template, uri, status) in gets {
        let r = get(&app, &uri, None).await;
        assert_eq!(r.status, status, "{uri}: {}", r.text);
        check(&doc, "get", template, &r);
    }

    let posts: Vec<(&str, String, Option<Value>, StatusCode, &axum::Router)> = vec![
        (
            "/api/queues/{queue}/pause",
            "/api/queues/alpha/pause".into(),
            None,
            StatusCode::OK,
            &app,
        ),
        (
            "/api/queues/{queue}/resume",
            "/api/queues/alpha/resume".into(),
            None,
            StatusCode::OK,
            &app,
        ),
        (
            "/api/queues/{queue}/pause",
            "/api/queues/alpha/pause".into(),
            None,
            StatusCode::FORBIDDEN,
            &open,
        ),
        (
            "/api/queues/{queue}/pause",
            "/api/queues/%20/pause".into(),
            None,
            StatusCode::BAD_REQUEST,
            &app,
        ),
        (
            "/api/jobs/{id}/cancel",
            format!("/api/jobs/{}/cancel", seeded.alpha[0]),
            None,
            StatusCode::OK,
            &app,
        ),
        (
            "/api/jobs/{id}/cancel",
            "/api/jobs/987654/cancel".into(),
            None,
            StatusCode::NOT_FOUND,
            &app,
        ),
        (
            "/api/jobs/retry",
            "/api/jobs/retry".into(),
            Some(json!({ "queue": "gamma", "state": "failed", "dry_run": true })),
            StatusCode::OK,
            &app,
        ),
        (
            "/api/jobs/retry",
            "/api/jobs/retry".into(),
            Some(json!({ "queue": "gamma", "state": "running" })),
            StatusCode::BAD_REQUEST,
            &app,
        ),
        (
            "/api/jobs/{id}/retry",
            format!("/api/jobs/{failed}/retry"),
            None,
            StatusCode::OK,
            &app,
        ),
        (
            "/api/jobs/{id}/retry",
            "/api/jobs/987654/retry".into(),
            None,
            StatusCode::NOT_FOUND,
            &app,
        ),
        (
            "/api/jobs/cancel",
            "/api/jobs/cancel".into(),
            Some(json!({ "queue": "gamma", "dry_run": true })),
            StatusCode::OK,
            &app,
        ),
        (
            "/api/jobs/cancel",
            "/api/jobs/cancel".into(),
            Some(json!({ "queue": "gamma", "kind": "long" })),
            StatusCode::OK,
            &app,
        ),
        (
            "/api/dlq/retry",
            "/api/dlq/retry".into(),
            Some(json!({ "job_id": seeded.dead[0].0 })),
            StatusCode::OK,
            &app,
        ),
        (
            "/api/dlq/retry",
            "/api/dlq/retry".into(),
            Some(json!({})),
            StatusCode::BAD_REQUEST,
            &app,
        ),
        (
            "/api/dlq/purge",
            "/api/dlq/purge".into(),
            Some(json!({ "all": true })),
            StatusCode::OK,
            &app,
        ),
        (
            "/api/dlq/purge",
            "/api/dlq/purge".into(),
            Some(json!({ "all": true, "queue": "q".repeat(20_000) })),
            StatusCode::PAYLOAD_TOO_LARGE,
            &app,
        ),
        (
            "/api/cron/{name}/pause",
            format!("/api/cron/{CRON}/pause"),
            None,
            StatusCode::OK,
            &app,
        ),
        (
            "/api/cron/{name}/resume",
            format!("/api/cron/{CRON}/resume"),
            None,
            StatusCode::OK,
            &app,
        ),
        (
            "/api/cron/{name}/run",
            format!("/api/cron/{CRON}/run"),
            None,
            StatusCode::OK,
            &app,
        ),
        (
            "/api/cron/{name}/run",
            "/api/cron/nope/run".into(),
            None,
            StatusCode::NOT_FOUND,
            &app,
        ),
        (
            "/api/cron/{name}/pause",
            format!("/api/cron/{CRON}/pause"),
            None,
            StatusCode::FORBIDDEN,
            &open,
        ),
    ];
    for (template, uri, body, status, router) in posts {
        let r = post(router, &uri, t, body).await;
        assert_eq!(r.status, status, "{uri}: {}", r.text);
        check(&doc, "post", template, &r);
    }
    let unauthorized = post(&app, "/api/queues/alpha/pause", None, None).await;
    assert_eq!(unauthorized.status, StatusCode::UNAUTHORIZED);
    check(&doc, "post", "/api/queues/{queue}/pause", &unauthorized);

    // The origin rule's refusal is documented on every operation.
    for (method, template, uri) in [
        ("get", "/api/jobs", "/api/jobs"),
        ("post", "/api/dlq/purge", "/api/dlq/purge"),
        ("get", "/metrics", "/metrics"),
    ] {
        let req = axum::http::Request::builder()
            .method(method.to_uppercase().as_str())
            .uri(uri)
            .header(axum::http::header::HOST, "evil.example")
            .body(axum::body::Body::empty())
            .unwrap();
        let foreign = send(&app, req).await;
        assert_eq!(foreign.status, StatusCode::MISDIRECTED_REQUEST);
        check(&doc, method, template, &foreign);
    }

    // A database error answers in the documented shape too (a read view
    // the job list goes through, gone).
    sqlx::query("ALTER VIEW awa.live_jobs RENAME TO live_jobs_elsewhere")
        .execute(&pool)
        .await
        .unwrap();
    let broken = get(&app, "/api/jobs", None).await;
    assert_eq!(broken.status, StatusCode::SERVICE_UNAVAILABLE);
    check(&doc, "get", "/api/jobs", &broken);
}
