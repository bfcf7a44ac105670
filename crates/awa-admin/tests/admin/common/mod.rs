//! Fixtures of the admin tests: a migrated database seeded with jobs in
//! every interesting state, the router over it, and requests without a
//! network (tower's `oneshot`).

#![allow(dead_code)] // not every module uses every fixture

use awa_admin::{AdminConfig, AppState, Token};
use awa_core::{JobId, NewJob, QueueName, SchemaName};
use awa_exec::{ExecPlane, Finish, Frontier, PgExecPlane};
use awa_ready::{PgReadyPlane, ReadyPlane};
use axum::body::Body;
use axum::http::{Request, StatusCode, header};
use sqlx::PgPool;
use std::time::Duration;
use tower::ServiceExt;

pub const TOKEN: &str = "test-admin-token-0123456789abcdef";

pub fn schema() -> SchemaName {
    SchemaName::default_schema()
}

pub fn queue(name: &str) -> QueueName {
    QueueName::new(name).unwrap()
}

/// What the seed made, by id.
#[derive(Debug)]
pub struct Seeded {
    /// Waiting in `alpha`, oldest first.
    pub alpha: Vec<JobId>,
    /// Completed in `alpha`.
    pub completed: JobId,
    /// Scheduled an hour out in `beta`.
    pub scheduled: JobId,
    /// Dead-lettered in `dead`, in order.
    pub dead: Vec<JobId>,
}

pub async fn setup() -> (awa_harness::TestDb, PgPool) {
    let db = awa_maint::migrated_test_db().await.expect("test database");
    let pool = db.pool().await.expect("pool");
    (db, pool)
}

async fn enqueue(pool: &PgPool, jobs: &[NewJob]) -> Vec<JobId> {
    let mut conn = pool.acquire().await.unwrap();
    PgReadyPlane::new(schema())
        .enqueue(&mut conn, jobs)
        .await
        .unwrap()
        .into_iter()
        .map(|e| e.job_id)
        .collect()
}

/// Claim `n` jobs of `q` (polling: the frontier may need a moment).
pub async fn claim(pool: &PgPool, q: &str, n: usize) -> Vec<awa_core::ClaimedJob> {
    let plane = PgExecPlane::new(schema());
    let mut frontier = Frontier::default();
    let mut out = Vec::new();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    while out.len() < n {
        assert!(
            tokio::time::Instant::now() < deadline,
            "could not claim {n} jobs of {q}"
        );
        let mut conn = pool.acquire().await.unwrap();
        let got = plane
            .claim(
                &mut conn,
                &queue(q),
                (n - out.len()) as i32,
                &mut frontier,
                None,
            )
            .await
            .unwrap();
        if got.is_empty() {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        out.extend(got);
    }
    out
}

pub async fn finish(pool: &PgPool, items: &[(awa_core::AttemptToken, Finish)]) {
    let mut conn = pool.acquire().await.unwrap();
    let done = PgExecPlane::new(schema())
        .finish(&mut conn, items)
        .await
        .unwrap();
    assert!(done.iter().all(|f| f.accepted));
}

/// alpha: 4 jobs, the first completed; beta: one scheduled; dead: two
/// dead letters (the queue opts in to the DLQ).
pub async fn seed(pool: &PgPool) -> Seeded {
    let mut conn = pool.acquire().await.unwrap();
    awa_control::queues::QueueConfig {
        dlq_enabled: Some(true),
        ..Default::default()
    }
    .apply(&mut conn, &queue("dead"))
    .await
    .unwrap();
    drop(conn);
    let alpha_jobs: Vec<NewJob> = (0..4)
        .map(|i| {
            NewJob::new(
                queue("alpha"),
                if i % 2 == 0 { "email" } else { "resize" },
                serde_json::json!({ "n": i }),
            )
        })
        .collect();
    let mut alpha = enqueue(pool, &alpha_jobs).await;
    let first = claim(pool, "alpha", 1).await.remove(0);
    assert_eq!(first.token.job_id, alpha[0]);
    finish(pool, &[(first.token, Finish::Complete)]).await;
    let completed = alpha.remove(0);
    let mut later = NewJob::new(queue("beta"), "report", serde_json::json!({}));
    later.run_at = Some(chrono::Utc::now() + chrono::Duration::hours(1));
    let scheduled = enqueue(pool, &[later]).await[0];
    let dead_jobs: Vec<NewJob> = (0..2)
        .map(|i| {
            let mut j = NewJob::new(queue("dead"), "flaky", serde_json::json!({ "d": i }));
            j.max_attempts = Some(1);
            j
        })
        .collect();
    let dead = enqueue(pool, &dead_jobs).await;
    let claimed = claim(pool, "dead", 2).await;
    let fails: Vec<_> = claimed
        .into_iter()
        .map(|c| {
            (
                c.token,
                Finish::Fail {
                    error: "boom".into(),
                },
            )
        })
        .collect();
    finish(pool, &fails).await;
    Seeded {
        alpha,
        completed,
        scheduled,
        dead,
    }
}

/// The cron schedule the cron tests act on: `nightly`, enabled, firing
/// `build_report` into `reports` at 03:00 Berlin time.
pub const CRON: &str = "nightly";

pub async fn seed_cron(pool: &PgPool) {
    let mut conn = pool.acquire().await.unwrap();
    let mut s = awa_control::cron::Schedule::new(CRON, "0 3 * * *", "reports", "build_report");
    s.timezone = "Europe/Berlin".into();
    assert!(awa_control::cron::create(&mut conn, &s).await.unwrap());
}

pub fn config(token: bool) -> AdminConfig {
    let mut config = AdminConfig::new(schema());
    if token {
        config.token = Some(Token::new(TOKEN).unwrap());
    }
    config
}

pub fn app(pool: &PgPool, config: AdminConfig) -> axum::Router {
    awa_admin::router(AppState::new(pool.clone(), config, None))
}

/// A response as the tests read it.
#[derive(Debug)]
pub struct Reply {
    pub status: StatusCode,
    pub headers: axum::http::HeaderMap,
    pub text: String,
}

impl Reply {
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_str(&self.text).unwrap_or_else(|e| panic!("not JSON ({e}): {}", self.text))
    }

    /// An error reply: its code, after checking the shape.
    pub fn error_code(&self) -> String {
        let v = self.json();
        let err = v
            .get("error")
            .unwrap_or_else(|| panic!("no error object: {v}"));
        let message = err["message"].as_str().expect("a message");
        assert!(!message.is_empty());
        assert_eq!(
            err.as_object().unwrap().len(),
            2,
            "only code and message: {v}"
        );
        err["code"].as_str().expect("a code").to_string()
    }
}

/// Send `req` as a browser on this machine would: naming the server as
/// `localhost` unless it names a host of its own.
pub async fn send(app: &axum::Router, mut req: Request<Body>) -> Reply {
    if !req.headers().contains_key(header::HOST) {
        req.headers_mut()
            .insert(header::HOST, "localhost:8088".parse().unwrap());
    }
    send_as_is(app, req).await
}

/// Send `req` exactly as built.
pub async fn send_as_is(app: &axum::Router, req: Request<Body>) -> Reply {
    let response = app.clone().oneshot(req).await.unwrap();
    let status = response.status();
    let headers = response.headers().clone();
    let bytes = axum::body::to_bytes(response.into_body(), 1 << 24)
        .await
        .unwrap();
    Reply {
        status,
        headers,
        text: String::from_utf8_lossy(&bytes).into_owned(),
    }
}

pub async fn get(app: &axum::Router, uri: &str, token: Option<&str>) -> Reply {
    let mut req = Request::get(uri);
    if let Some(t) = token {
        req = req.header(header::AUTHORIZATION, format!("Bearer {t}"));
    }
    send(app, req.body(Body::empty()).unwrap()).await
}

pub async fn post(
    app: &axum::Router,
    uri: &str,
    token: Option<&str>,
    body: Option<serde_json::Value>,
) -> Reply {
    let mut req = Request::post(uri);
    if let Some(t) = token {
        req = req.header(header::AUTHORIZATION, format!("Bearer {t}"));
    }
    let body = match body {
        Some(v) => {
            req = req.header(header::CONTENT_TYPE, "application/json");
            Body::from(v.to_string())
        }
        None => Body::empty(),
    };
    send(app, req.body(body).unwrap()).await
}

/// Everything an API call could change, as one comparable value: counts
/// per queue and state, every job's state and lease, the DLQ, the queue
/// settings and the cron schedules' state.
pub async fn fingerprint(pool: &PgPool) -> String {
    let jobs: Vec<(i64, String, i64)> =
        sqlx::query_as("SELECT id, state, run_lease FROM awa.jobs ORDER BY id")
            .fetch_all(pool)
            .await
            .unwrap();
    let dlq: Vec<(i64,)> = sqlx::query_as("SELECT job_id FROM awa.dlq_entries ORDER BY job_id")
        .fetch_all(pool)
        .await
        .unwrap();
    let meta: Vec<(String, bool)> =
        sqlx::query_as("SELECT queue, paused FROM awa.queue_meta ORDER BY queue")
            .fetch_all(pool)
            .await
            .unwrap();
    let cron: Vec<(String, bool, Option<i64>)> =
        sqlx::query_as("SELECT name, enabled, last_job_id FROM awa.cron_jobs ORDER BY name")
            .fetch_all(pool)
            .await
            .unwrap();
    format!("{jobs:?}|{dlq:?}|{meta:?}|{cron:?}")
}

pub async fn state_of(pool: &PgPool, id: JobId) -> String {
    sqlx::query_scalar("SELECT state FROM awa.jobs WHERE id = $1 ORDER BY run_lease DESC LIMIT 1")
        .bind(id.0)
        .fetch_one(pool)
        .await
        .unwrap()
}

/// gamma (no DLQ): one job that failed three times with three different
/// errors ("error 1" .. "error 3"), run by a registered runtime; and one
/// job running under that runtime. Returns (failed, running, runtime).
pub async fn seed_failures(pool: &PgPool) -> (JobId, JobId, uuid::Uuid) {
    use awa_maint::tasks::MaintTask;
    let mut conn = pool.acquire().await.unwrap();
    let runtime = uuid::Uuid::new_v4();
    awa_control::runtimes::register(
        &mut conn,
        &awa_control::runtimes::RuntimeInfo {
            instance_id: runtime,
            role: "worker",
            queues: vec!["gamma".into()],
        },
    )
    .await
    .unwrap();
    drop(conn);
    let mut job = NewJob::new(queue("gamma"), "sync", serde_json::json!({ "user": 42 }));
    job.max_attempts = Some(3);
    let failed = enqueue(pool, &[job]).await[0];
    let promote = awa_maint::tasks::Promote::new(schema(), Duration::from_millis(10));
    let plane = PgExecPlane::new(schema());
    for n in 1..=3 {
        let c = loop {
            promote.run_once(pool).await.unwrap();
            let mut conn = pool.acquire().await.unwrap();
            let mut got = plane
                .claim(
                    &mut conn,
                    &queue("gamma"),
                    1,
                    &mut Frontier::default(),
                    Some(runtime),
                )
                .await
                .unwrap();
            if let Some(c) = got.pop() {
                break c;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        };
        let error = Finish::Retry {
            delay: Some(Duration::ZERO),
            error: format!("error {n}"),
        };
        finish(pool, &[(c.token, error)]).await;
    }
    let running = enqueue(
        pool,
        &[NewJob::new(queue("gamma"), "long", serde_json::json!({}))],
    )
    .await[0];
    let mut conn = pool.acquire().await.unwrap();
    loop {
        let got = plane
            .claim(
                &mut conn,
                &queue("gamma"),
                1,
                &mut Frontier::default(),
                Some(runtime),
            )
            .await
            .unwrap();
        if !got.is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    (failed, running, runtime)
}
