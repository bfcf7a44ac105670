//! Every endpoint of the admin API against a real, seeded database: reads
//! match the database, actions change it, the token rule holds, and bad
//! input is refused with a 4xx that says what was wrong, changing nothing.

use crate::common;

use axum::http::StatusCode;
use common::*;
use serde_json::json;

#[tokio::test]
async fn reads_show_what_the_database_holds() {
    let (_db, pool) = setup().await;
    let seeded = seed(&pool).await;
    let app = app(&pool, config(false));

    let info = get(&app, "/api/info", None).await;
    assert_eq!(info.status, StatusCode::OK, "{}", info.text);
    assert_eq!(info.json()["read_only"], true);
    assert_eq!(info.json()["schema"], "awa");

    let queues = get(&app, "/api/queues", None).await.json();
    let by_name = |name: &str| {
        queues["queues"]
            .as_array()
            .unwrap()
            .iter()
            .find(|q| q["queue"] == name)
            .unwrap_or_else(|| panic!("queue {name} listed: {queues}"))
            .clone()
    };
    let alpha = by_name("alpha");
    assert_eq!(alpha["counts"]["available"], 3);
    assert_eq!(alpha["counts"]["completed"], 1);
    assert_eq!(alpha["counts"]["running"], 0);
    assert!(alpha["oldest_available_secs"].as_f64().unwrap() >= 0.0);
    assert_eq!(alpha["throughput"].as_array().unwrap().len(), 15);
    let done: i64 = alpha["throughput"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["completed"].as_i64().unwrap())
        .sum();
    assert_eq!(done, 1, "the completion is in the sparkline window");
    assert_eq!(by_name("beta")["counts"]["scheduled"], 1);
    assert_eq!(by_name("dead")["counts"]["dead_lettered"], 2);

    // Jobs: newest first, filters, and a cursor that walks every page.
    let all = get(&app, "/api/jobs", None).await.json();
    let ids: Vec<i64> = all["jobs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|j| j["id"].as_i64().unwrap())
        .collect();
    let mut expected: Vec<i64> = seeded
        .alpha
        .iter()
        .chain(&seeded.dead)
        .map(|j| j.0)
        .collect();
    expected.push(seeded.completed.0);
    expected.push(seeded.scheduled.0);
    expected.sort_unstable_by(|a, b| b.cmp(a));
    assert_eq!(ids, expected);
    assert!(all["next_before"].is_null());
    let mut walked = Vec::new();
    let mut uri = "/api/jobs?limit=3".to_string();
    loop {
        let page = get(&app, &uri, None).await.json();
        walked.extend(
            page["jobs"]
                .as_array()
                .unwrap()
                .iter()
                .map(|j| j["id"].as_i64().unwrap()),
        );
        match page["next_before"].as_i64() {
            Some(before) => uri = format!("/api/jobs?limit=3&before={before}"),
            None => break,
        }
    }
    assert_eq!(walked, expected, "the cursor walks every job once");
    let emails = get(
        &app,
        "/api/jobs?queue=alpha&kind=email&state=available",
        None,
    )
    .await
    .json();
    let emails: Vec<i64> = emails["jobs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|j| j["id"].as_i64().unwrap())
        .collect();
    assert_eq!(
        emails,
        vec![seeded.alpha[1].0],
        "alpha's one waiting email job"
    );

    let detail = get(&app, &format!("/api/jobs/{}", seeded.dead[0]), None).await;
    assert_eq!(detail.status, StatusCode::OK);
    let detail = detail.json();
    assert_eq!(detail["job"]["state"], "dead_lettered");
    assert_eq!(detail["job"]["last_error"], "boom");
    assert_eq!(detail["job"]["attempt"], 1);
    assert!(detail["progress"].is_null());

    let missing = get(&app, "/api/jobs/999999", None).await;
    assert_eq!(missing.status, StatusCode::NOT_FOUND);
    assert_eq!(missing.error_code(), "not_found");

    let dlq = get(&app, "/api/dlq", None).await.json();
    let dead: Vec<i64> = dlq["entries"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["job_id"].as_i64().unwrap())
        .collect();
    assert_eq!(
        dead,
        seeded.dead.iter().rev().map(|j| j.0).collect::<Vec<_>>(),
        "newest first"
    );
    assert_eq!(
        get(&app, "/api/dlq?queue=alpha", None).await.json()["entries"],
        json!([])
    );

    let storage = get(&app, "/api/storage", None).await;
    assert_eq!(storage.status, StatusCode::OK, "{}", storage.text);
    let storage = storage.json();
    assert_eq!(storage["substrates"][0]["schema"], "awa");
    assert!(storage["substrates"][0]["rings"].as_array().unwrap().len() >= 3);
    assert!(storage["pinned_alert"].is_null());

    let runtimes = get(&app, "/api/runtimes", None).await;
    assert_eq!(runtimes.status, StatusCode::OK);
    assert_eq!(runtimes.json()["runtimes"], json!([]));
    let cron = get(&app, "/api/cron", None).await;
    assert_eq!(cron.status, StatusCode::OK);
    assert_eq!(cron.json()["schedules"], json!([]));

    let page = get(&app, "/", None).await;
    assert_eq!(page.status, StatusCode::OK);
    assert!(page.text.contains("<html"));
    assert!(
        page.headers["content-security-policy"]
            .to_str()
            .unwrap()
            .contains("default-src 'none'")
    );
    assert!(
        page.headers.get("access-control-allow-origin").is_none(),
        "no CORS"
    );
    let doc = get(&app, "/openapi.json", None).await;
    assert_eq!(doc.status, StatusCode::OK);
    assert!(doc.json()["paths"]["/api/jobs"].is_object());
}

#[tokio::test]
async fn runtimes_and_cron_are_listed() {
    let (_db, pool) = setup().await;
    let mut conn = pool.acquire().await.unwrap();
    let id = uuid::Uuid::new_v4();
    awa_control::runtimes::register(
        &mut conn,
        &awa_control::runtimes::RuntimeInfo {
            instance_id: id,
            role: "worker",
            queues: vec!["alpha".into()],
        },
    )
    .await
    .unwrap();
    awa_control::cron::create(
        &mut conn,
        &awa_control::cron::Schedule::new("nightly", "0 3 * * *", "alpha", "report"),
    )
    .await
    .unwrap();
    awa_control::cron::create(
        &mut conn,
        &awa_control::cron::Schedule::new("x-broken", "0 3 * * *", "alpha", "report"),
    )
    .await
    .unwrap();
    awa_control::cron::record_error(&mut conn, "x-broken", "enqueue refused: too big")
        .await
        .unwrap();
    drop(conn);
    let app = app(&pool, config(false));
    let runtimes = get(&app, "/api/runtimes", None).await.json();
    assert_eq!(runtimes["runtimes"][0]["instance_id"], id.to_string());
    assert_eq!(runtimes["runtimes"][0]["queues"], json!(["alpha"]));
    assert_eq!(runtimes["runtimes"][0]["role"], "worker");
    let cron = get(&app, "/api/cron", None).await.json();
    assert_eq!(cron["schedules"][0]["name"], "nightly");
    assert_eq!(cron["schedules"][0]["enabled"], true);
    // The next fire is the tick, 03:00:00 UTC, to the second.
    let next = cron["schedules"][0]["next_fire"].as_str().unwrap();
    assert!(next.ends_with("T03:00:00Z"), "{next}");
    // A schedule the leader cannot fire says why, and since when.
    assert!(cron["schedules"][0]["error"].is_null());
    assert_eq!(cron["schedules"][1]["name"], "x-broken");
    assert_eq!(cron["schedules"][1]["error"], "enqueue refused: too big");
    assert!(cron["schedules"][1]["error_since"].is_string());
}

#[tokio::test]
async fn without_a_token_the_server_is_read_only() {
    let (_db, pool) = setup().await;
    let seeded = seed(&pool).await;
    seed_cron(&pool).await;
    let app = app(&pool, config(false));
    let before = fingerprint(&pool).await;
    for (uri, body) in [
        (format!("/api/jobs/{}/cancel", seeded.alpha[0]), None),
        ("/api/queues/alpha/pause".to_string(), None),
        (format!("/api/cron/{CRON}/pause"), None),
        (format!("/api/cron/{CRON}/resume"), None),
        (format!("/api/cron/{CRON}/run"), None),
        (
            "/api/dlq/retry".to_string(),
            Some(json!({ "job_id": seeded.dead[0].0 })),
        ),
        ("/api/dlq/purge".to_string(), Some(json!({ "all": true }))),
    ] {
        for token in [None, Some(TOKEN)] {
            let r = post(&app, &uri, token, body.clone()).await;
            assert_eq!(r.status, StatusCode::FORBIDDEN, "{uri}: {}", r.text);
            assert_eq!(r.error_code(), "read_only");
            assert!(
                r.text.contains("AWA_ADMIN_TOKEN"),
                "says how to enable actions"
            );
        }
    }
    assert_eq!(fingerprint(&pool).await, before, "nothing changed");
}

#[tokio::test]
async fn actions_need_the_token_and_do_what_they_say() {
    let (_db, pool) = setup().await;
    let seeded = seed(&pool).await;
    let app = app(&pool, config(true));
    let before = fingerprint(&pool).await;
    let cancel = format!("/api/jobs/{}/cancel", seeded.alpha[0]);
    for token in [
        None,
        Some("wrong-token-0123456789abcdef"),
        Some(&TOKEN[..TOKEN.len() - 1]),
    ] {
        let r = post(&app, &cancel, token, None).await;
        assert_eq!(r.status, StatusCode::UNAUTHORIZED, "{}", r.text);
        assert_eq!(r.error_code(), "unauthorized");
        assert_eq!(r.headers["www-authenticate"], "Bearer");
        assert!(!r.text.contains(TOKEN));
    }
    // A token in another scheme is no token.
    let r = send(
        &app,
        axum::http::Request::post(&cancel)
            .header("authorization", format!("Basic {TOKEN}"))
            .body(axum::body::Body::empty())
            .unwrap(),
    )
    .await;
    assert_eq!(r.status, StatusCode::UNAUTHORIZED);
    assert_eq!(
        fingerprint(&pool).await,
        before,
        "refused actions change nothing"
    );
    // Reads stay open unless the server protects them.
    assert_eq!(get(&app, "/api/queues", None).await.status, StatusCode::OK);

    let r = post(&app, &cancel, Some(TOKEN), None).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text);
    assert_eq!(r.json()["cancelled_from"], "available");
    assert_eq!(state_of(&pool, seeded.alpha[0]).await, "cancelled");
    let again = post(&app, &cancel, Some(TOKEN), None).await;
    assert_eq!(again.status, StatusCode::NOT_FOUND);
    assert_eq!(again.error_code(), "not_found");

    let paused = post(&app, "/api/queues/alpha/pause", Some(TOKEN), None).await;
    assert_eq!(paused.status, StatusCode::OK, "{}", paused.text);
    assert_eq!(paused.json()["paused"], true);
    let q = get(&app, "/api/queues", None).await.json();
    let alpha = q["queues"]
        .as_array()
        .unwrap()
        .iter()
        .find(|q| q["queue"] == "alpha")
        .unwrap()
        .clone();
    assert_eq!(alpha["paused"], true);
    let resumed = post(&app, "/api/queues/alpha/resume", Some(TOKEN), None).await;
    assert_eq!(resumed.json()["paused"], false);

    let retried = post(
        &app,
        "/api/dlq/retry",
        Some(TOKEN),
        Some(json!({ "job_id": seeded.dead[0].0 })),
    )
    .await;
    assert_eq!(retried.status, StatusCode::OK, "{}", retried.text);
    assert_eq!(retried.json()["retried"], json!([seeded.dead[0].0]));
    assert_eq!(state_of(&pool, seeded.dead[0]).await, "available");
    let gone = post(
        &app,
        "/api/dlq/retry",
        Some(TOKEN),
        Some(json!({ "job_id": seeded.dead[0].0 })),
    )
    .await;
    assert_eq!(gone.status, StatusCode::NOT_FOUND);

    let purged = post(
        &app,
        "/api/dlq/purge",
        Some(TOKEN),
        Some(json!({ "all": true, "queue": "dead" })),
    )
    .await;
    assert_eq!(purged.status, StatusCode::OK, "{}", purged.text);
    assert_eq!(purged.json()["purged"], json!([seeded.dead[1].0]));
    assert_eq!(
        get(&app, "/api/dlq", None).await.json()["entries"],
        json!([])
    );
}

#[tokio::test]
async fn reads_can_require_the_token() {
    let (_db, pool) = setup().await;
    let mut config = config(true);
    config.token_for_reads = true;
    let app = app(&pool, config);
    for uri in [
        "/api/queues",
        "/api/jobs",
        "/api/storage",
        "/api/dlq",
        "/api/info",
        "/metrics",
    ] {
        let r = get(&app, uri, None).await;
        assert_eq!(r.status, StatusCode::UNAUTHORIZED, "{uri}");
        assert_eq!(r.error_code(), "unauthorized");
        assert_eq!(
            get(&app, uri, Some("not-the-token-0123456789"))
                .await
                .status,
            StatusCode::UNAUTHORIZED
        );
    }
    assert_eq!(
        get(&app, "/api/queues", Some(TOKEN)).await.status,
        StatusCode::OK
    );
    // The page itself loads, and asks for the token.
    assert_eq!(get(&app, "/", None).await.status, StatusCode::OK);
    assert_eq!(
        get(&app, "/assets/app.js", None).await.status,
        StatusCode::OK
    );
}

#[tokio::test]
async fn bad_input_is_refused_with_what_was_wrong_and_changes_nothing() {
    let (_db, pool) = setup().await;
    let seeded = seed(&pool).await;
    let app = app(&pool, config(true));
    let before = fingerprint(&pool).await;
    let long = "q".repeat(64);
    let gets = [
        "/api/jobs?queue=Robert%27)%3B%20DROP%20TABLE%20awa.queue_meta%3B--".to_string(),
        "/api/jobs?queue=..%2Fetc".to_string(),
        format!("/api/jobs?queue={long}"),
        "/api/jobs?state=exploded".to_string(),
        "/api/jobs?kind=a%00b".to_string(),
        format!("/api/jobs?kind={}", "k".repeat(256)),
        "/api/jobs?limit=0".to_string(),
        "/api/jobs?limit=501".to_string(),
        "/api/jobs?limit=1000000000000".to_string(),
        "/api/jobs?limit=ten".to_string(),
        "/api/jobs?before=-1".to_string(),
        "/api/jobs?before=99999999999999999999999".to_string(),
        "/api/jobs?sort=id".to_string(),
        "/api/jobs/0".to_string(),
        "/api/jobs/-5".to_string(),
        "/api/jobs/abc".to_string(),
        "/api/jobs/99999999999999999999999".to_string(),
        "/api/dlq?limit=501".to_string(),
        "/api/dlq?queue=-starts-with-dash".to_string(),
    ];
    for uri in &gets {
        let r = get(&app, uri, None).await;
        assert_eq!(r.status, StatusCode::BAD_REQUEST, "{uri}: {}", r.text);
        assert_eq!(r.error_code(), "bad_request", "{uri}");
    }
    let msg = get(&app, "/api/jobs?limit=501", None).await.json();
    assert!(
        msg["error"]["message"]
            .as_str()
            .unwrap()
            .contains("between 1 and 500"),
        "{msg}"
    );
    let msg = get(&app, "/api/jobs?state=exploded", None).await.json();
    assert!(
        msg["error"]["message"]
            .as_str()
            .unwrap()
            .contains("expected one of"),
        "{msg}"
    );

    let posts: Vec<(String, Option<serde_json::Value>, StatusCode)> = vec![
        (
            "/api/queues/Bad%20Name/pause".into(),
            None,
            StatusCode::BAD_REQUEST,
        ),
        (
            format!("/api/queues/{long}/pause"),
            None,
            StatusCode::BAD_REQUEST,
        ),
        ("/api/jobs/0/cancel".into(), None, StatusCode::BAD_REQUEST),
        ("/api/jobs/x/cancel".into(), None, StatusCode::BAD_REQUEST),
        (
            "/api/jobs/424242/cancel".into(),
            None,
            StatusCode::NOT_FOUND,
        ),
        (
            "/api/dlq/retry".into(),
            Some(json!({})),
            StatusCode::BAD_REQUEST,
        ),
        (
            "/api/dlq/retry".into(),
            Some(json!({ "job_id": -1 })),
            StatusCode::BAD_REQUEST,
        ),
        (
            "/api/dlq/retry".into(),
            Some(json!({ "job_id": "1" })),
            StatusCode::BAD_REQUEST,
        ),
        (
            "/api/dlq/retry".into(),
            Some(json!({ "job_id": 1, "all": true })),
            StatusCode::BAD_REQUEST,
        ),
        (
            "/api/dlq/retry".into(),
            Some(json!({ "all": true, "queue": "x; DROP" })),
            StatusCode::BAD_REQUEST,
        ),
        (
            "/api/dlq/retry".into(),
            Some(json!({ "job_id": seeded.dead[0].0, "force": true })),
            StatusCode::BAD_REQUEST,
        ),
        (
            "/api/dlq/retry".into(),
            Some(json!({ "job_id": 424242 })),
            StatusCode::NOT_FOUND,
        ),
        (
            "/api/dlq/purge".into(),
            Some(json!({ "job_id": 424242 })),
            StatusCode::NOT_FOUND,
        ),
        (
            "/api/dlq/purge".into(),
            Some(json!({ "queue": "dead" })),
            StatusCode::BAD_REQUEST,
        ),
        (
            "/api/dlq/purge".into(),
            Some(json!({ "all": true, "queue": "x".repeat(20_000) })),
            StatusCode::PAYLOAD_TOO_LARGE,
        ),
        (
            "/api/dlq/purge".into(),
            None,
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
        ),
    ];
    for (uri, body, status) in posts {
        let r = post(&app, &uri, Some(TOKEN), body.clone()).await;
        assert_eq!(r.status, status, "{uri} {body:?}: {}", r.text);
        r.error_code();
    }
    // Malformed JSON.
    let r = send(
        &app,
        axum::http::Request::post("/api/dlq/retry")
            .header("authorization", format!("Bearer {TOKEN}"))
            .header("content-type", "application/json")
            .body(axum::body::Body::from("{\"job_id\": 1"))
            .unwrap(),
    )
    .await;
    assert_eq!(r.status, StatusCode::BAD_REQUEST);
    assert_eq!(r.error_code(), "bad_request");
    // Unknown endpoints and methods answer in the same shape.
    let r = get(&app, "/api/nothing", None).await;
    assert_eq!(r.status, StatusCode::NOT_FOUND);
    assert_eq!(r.error_code(), "not_found");
    let r = post(&app, "/api/queues", Some(TOKEN), None).await;
    assert_eq!(r.status, StatusCode::METHOD_NOT_ALLOWED);
    assert_eq!(r.error_code(), "method_not_allowed");

    assert_eq!(fingerprint(&pool).await, before, "nothing changed");
    // The hostile name reached no SQL: the table it named is still there.
    let meta: i64 = sqlx::query_scalar("SELECT count(*) FROM awa.queue_meta")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert_eq!(meta, 1);
}

#[tokio::test]
async fn a_database_error_is_reported_without_sql_or_detail() {
    let (_db, pool) = setup().await;
    seed(&pool).await;
    let app = app(&pool, config(true));
    // Break a read view the job list goes through (jobs_page reads
    // live_jobs' parts and history, not the jobs view).
    sqlx::query("ALTER VIEW awa.live_jobs RENAME TO live_jobs_moved_away")
        .execute(&pool)
        .await
        .unwrap();
    let r = get(&app, "/api/jobs", None).await;
    assert_eq!(r.status, StatusCode::SERVICE_UNAVAILABLE, "{}", r.text);
    assert_eq!(r.error_code(), "database_error");
    for leak in [
        "jobs", "relation", "SELECT", "FROM", "42P01", "sqlx", "awa.", "panicked", ".rs:",
    ] {
        assert!(
            !r.json()["error"]["message"]
                .as_str()
                .unwrap()
                .contains(leak),
            "{leak} in {}",
            r.text
        );
    }
    // Other endpoints still answer.
    assert_eq!(get(&app, "/api/dlq", None).await.status, StatusCode::OK);
}

/// Issue 22: a job that failed three times shows all three attempts, with
/// times and the runtime; a running job names its holder; retry one job and
/// retry or cancel by filter, with the count before acting (dry run), under
/// the token rule of every action.
#[tokio::test]
async fn attempts_holder_retry_and_bulk_actions() {
    let (_db, pool) = setup().await;
    let (failed, running, runtime) = seed_failures(&pool).await;
    let app = app(&pool, config(true));
    let t = Some(TOKEN);

    let detail = get(&app, &format!("/api/jobs/{failed}"), None).await.json();
    let job = &detail["job"];
    assert_eq!(job["state"], "failed", "{detail}");
    let attempts = job["attempts"].as_array().expect("attempts in the detail");
    assert_eq!(attempts.len(), 3, "{detail}");
    for (i, a) in attempts.iter().enumerate() {
        assert_eq!(a["attempt"], i + 1);
        assert_eq!(a["error"], format!("error {}", i + 1));
        assert!(
            a["started_at"].is_string() && a["ended_at"].is_string(),
            "{a}"
        );
        assert_eq!(a["runtime"]["id"], runtime.to_string());
        assert_eq!(a["runtime"]["pid"], std::process::id());
    }
    assert_eq!(attempts[2]["outcome"], "failed");

    // The running job: holder in the list and the detail.
    let list = get(&app, "/api/jobs?queue=gamma&state=running", None)
        .await
        .json();
    let row = &list["jobs"][0];
    assert_eq!(row["id"], running.0);
    assert_eq!(row["holder"]["instance_id"], runtime.to_string());
    assert!(row["holder"]["heartbeat_age_secs"].as_f64().unwrap() >= 0.0);
    assert!(
        row.get("attempts").is_none(),
        "lists leave attempts out: {row}"
    );
    let detail = get(&app, &format!("/api/jobs/{running}"), None)
        .await
        .json();
    assert_eq!(detail["job"]["holder"]["pid"], std::process::id());
    assert_eq!(detail["job"]["attempts"][0]["outcome"], "running");

    // Args containment in the list.
    let found = get(&app, "/api/jobs?args_contains=%7B%22user%22%3A42%7D", None)
        .await
        .json();
    let ids: Vec<i64> = found["jobs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|j| j["id"].as_i64().unwrap())
        .collect();
    assert_eq!(ids, vec![failed.0]);
    let bad = get(&app, "/api/jobs?args_contains=42", None).await;
    assert_eq!(bad.status, StatusCode::BAD_REQUEST, "{}", bad.text);

    // Actions need the token, and change nothing without it.
    let before = fingerprint(&pool).await;
    for (uri, body) in [
        (format!("/api/jobs/{failed}/retry"), None),
        (
            "/api/jobs/retry".to_string(),
            Some(json!({"queue": "gamma", "state": "failed"})),
        ),
        (
            "/api/jobs/cancel".to_string(),
            Some(json!({"queue": "gamma"})),
        ),
    ] {
        let r = post(&app, &uri, None, body.clone()).await;
        assert_eq!(r.status, StatusCode::UNAUTHORIZED, "{uri}: {}", r.text);
        let open = common::app(&pool, config(false));
        let r = post(&open, &uri, None, body).await;
        assert_eq!(r.status, StatusCode::FORBIDDEN, "{uri}: {}", r.text);
    }
    assert_eq!(fingerprint(&pool).await, before);

    // Bulk retry: the dry run counts, then the retry acts.
    let dry = post(
        &app,
        "/api/jobs/retry",
        t,
        Some(json!({"queue": "gamma", "state": "failed", "kind": "sync", "dry_run": true})),
    )
    .await
    .json();
    assert_eq!(
        (dry["matched"].as_i64(), dry["dry_run"].as_bool()),
        (Some(1), Some(true))
    );
    assert_eq!(fingerprint(&pool).await, before);
    let done = post(
        &app,
        "/api/jobs/retry",
        t,
        Some(json!({"queue": "gamma", "state": "failed", "args_contains": {"user": 42}})),
    )
    .await
    .json();
    assert_eq!(done["retried"], json!([failed.0]));
    assert_eq!(state_of(&pool, failed).await, "available");
    let gone = post(&app, &format!("/api/jobs/{failed}/retry"), t, None).await;
    assert_eq!(gone.status, StatusCode::NOT_FOUND, "{}", gone.text);

    // Bulk cancel of what is unfinished in gamma (the retried job and the
    // running one), counted first.
    let dry = post(
        &app,
        "/api/jobs/cancel",
        t,
        Some(json!({"queue": "gamma", "dry_run": true})),
    )
    .await
    .json();
    assert_eq!(dry["matched"], 2, "{dry}");
    let done = post(&app, "/api/jobs/cancel", t, Some(json!({"queue": "gamma"})))
        .await
        .json();
    let mut from: Vec<&str> = done["cancelled"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["cancelled_from"].as_str().unwrap())
        .collect();
    from.sort();
    assert_eq!(from, ["available", "running"], "{done}");

    // One job back from cancelled, through its own endpoint.
    let one = post(&app, &format!("/api/jobs/{running}/retry"), t, None)
        .await
        .json();
    assert_eq!(one["retried"], json!([running.0]));
    assert_eq!(state_of(&pool, running).await, "available");

    // A selection that names the wrong states is refused, changing nothing.
    let before = fingerprint(&pool).await;
    for (uri, body) in [
        (
            "/api/jobs/retry",
            json!({"queue": "gamma", "state": "available"}),
        ),
        ("/api/jobs/retry", json!({"queue": "gamma"})),
        (
            "/api/jobs/cancel",
            json!({"queue": "gamma", "state": "failed"}),
        ),
        ("/api/jobs/cancel", json!({"queue": " "})),
        (
            "/api/jobs/cancel",
            json!({"queue": "gamma", "args_contains": 7}),
        ),
        (
            "/api/jobs/cancel",
            json!({"queue": "gamma", "colour": "red"}),
        ),
    ] {
        let r = post(&app, uri, t, Some(body.clone())).await;
        assert!(
            r.status == StatusCode::BAD_REQUEST || r.status == StatusCode::UNPROCESSABLE_ENTITY,
            "{uri} {body}: {} {}",
            r.status,
            r.text
        );
        r.error_code();
    }
    assert_eq!(fingerprint(&pool).await, before);
}

#[tokio::test]
async fn cron_controls_pause_resume_and_run_a_schedule() {
    let (_db, pool) = setup().await;
    seed_cron(&pool).await;
    let app = app(&pool, config(true));
    let before = fingerprint(&pool).await;
    for action in ["pause", "resume", "run"] {
        let uri = format!("/api/cron/{CRON}/{action}");
        let r = post(&app, &uri, None, None).await;
        assert_eq!(r.status, StatusCode::UNAUTHORIZED, "{uri}: {}", r.text);
        let r = post(&app, &format!("/api/cron/nope/{action}"), Some(TOKEN), None).await;
        assert_eq!(r.status, StatusCode::NOT_FOUND, "{action}: {}", r.text);
        assert!(r.text.contains("no schedule named"), "{}", r.text);
    }
    assert_eq!(fingerprint(&pool).await, before, "refusals change nothing");

    let paused = post(&app, &format!("/api/cron/{CRON}/pause"), Some(TOKEN), None).await;
    assert_eq!(paused.status, StatusCode::OK, "{}", paused.text);
    assert_eq!(paused.json()["enabled"], false);
    assert!(
        paused.json()["next_fire"].is_null(),
        "a paused schedule never fires"
    );
    let listed = get(&app, "/api/cron", None).await.json();
    assert_eq!(listed["schedules"][0]["enabled"], false);
    let resumed = post(&app, &format!("/api/cron/{CRON}/resume"), Some(TOKEN), None).await;
    assert_eq!(resumed.json()["enabled"], true);
    assert!(resumed.json()["next_fire"].is_string());
    assert_eq!(resumed.json()["timezone"], "Europe/Berlin");

    // Run now: the schedule's job, enqueued at once and recorded as its last.
    let run = post(&app, &format!("/api/cron/{CRON}/run"), Some(TOKEN), None).await;
    assert_eq!(run.status, StatusCode::OK, "{}", run.text);
    let job_id = run.json()["job_id"].as_i64().expect("a job id");
    let job = get(&app, &format!("/api/jobs/{job_id}"), None).await.json();
    assert_eq!(job["job"]["queue"], "reports");
    assert_eq!(job["job"]["kind"], "build_report");
    assert_eq!(job["job"]["state"], "available");
    assert_eq!(job["job"]["metadata"]["awa_cron"]["manual"], true);
    let listed = get(&app, "/api/cron", None).await.json();
    assert_eq!(listed["schedules"][0]["last_job_id"], job_id);
}

#[tokio::test]
async fn activity_serves_what_the_health_task_recorded_per_minute() {
    let (_db, pool) = setup().await;
    seed(&pool).await;
    let app = app(&pool, config(false));
    let empty = get(&app, "/api/activity", None).await;
    assert_eq!(empty.status, StatusCode::OK, "{}", empty.text);
    let empty = empty.json();
    assert_eq!(empty["minutes"], 60);
    assert_eq!(empty["points"].as_array().unwrap().len(), 60);
    assert!(empty["last_measured_at"].is_null(), "nothing recorded yet");

    // What the leader's health task does every few seconds.
    let mut conn = pool.acquire().await.unwrap();
    use awa_history::HistoryPlane;
    let history = awa_history::PgHistoryPlane::new(schema());
    history.publish_health(&mut conn).await.unwrap();
    history.publish_activity(&mut conn).await.unwrap();
    drop(conn);

    let sum = |v: &serde_json::Value, field: &str| -> i64 {
        v["points"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| p[field].as_i64().unwrap())
            .sum()
    };
    let all = get(&app, "/api/activity?minutes=5", None).await.json();
    assert_eq!(all["points"].as_array().unwrap().len(), 5);
    assert!(all["last_measured_at"].is_string());
    // The seed completed one job of alpha and dead-lettered two of dead.
    assert_eq!(sum(&all, "completed"), 1, "{all}");
    assert_eq!(sum(&all, "dead_lettered"), 2, "{all}");
    let latest = all["points"].as_array().unwrap().last().unwrap().clone();
    assert!(
        latest["wait_max_secs"].as_f64().is_some(),
        "alpha has waiting jobs: {all}"
    );
    let alpha = get(&app, "/api/activity?queue=alpha", None).await.json();
    assert_eq!(sum(&alpha, "completed"), 1);
    assert_eq!(sum(&alpha, "dead_lettered"), 0);
    assert_eq!(alpha["queue"], "alpha");
    for bad in [
        "minutes=0",
        "minutes=121",
        "minutes=x",
        "queue=%20",
        "other=1",
    ] {
        let r = get(&app, &format!("/api/activity?{bad}"), None).await;
        assert_eq!(r.status, StatusCode::BAD_REQUEST, "{bad}: {}", r.text);
        assert_eq!(r.error_code(), "bad_request");
    }
}
