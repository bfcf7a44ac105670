//! `/metrics` after a small workload: the counters equal what the
//! workload did (enqueued through the client, claimed, completed, retried,
//! failed, dead-lettered per queue and kind), the histograms counted every
//! handler run, and the database gauges show the queues as they are.
//! Its own test binary: the worker's instruments are process-wide.

use crate::common;

use async_trait::async_trait;
use awa_admin::AppState;
use awa_exec::worker::{
    Handler, HandlerResult, JobContext, JobError, Outcome, Worker, WorkerConfig,
};
use axum::http::StatusCode;
use common::*;
use std::collections::BTreeMap;
use std::time::Duration;

/// By kind: `ok` completes, `retry` asks to run again in an hour,
/// `hold` completes once released (after the test cancelled it, so its
/// result is a stale write), `fail` and `dead` fail for good.
struct ByKind {
    release: std::sync::Arc<tokio::sync::Notify>,
}

#[async_trait]
impl Handler for ByKind {
    async fn handle(&self, ctx: JobContext) -> HandlerResult {
        match ctx.job.kind.as_str() {
            "ok" => Ok(Outcome::Complete),
            "hold" => {
                self.release.notified().await;
                Ok(Outcome::Complete)
            }
            "retry" => Err(JobError::RetryAfter(
                Duration::from_secs(3600),
                "again later".into(),
            )),
            _ => Err(JobError::Permanent("broken".into())),
        }
    }
}

/// One sample of the text format: name, labels, value.
fn samples(text: &str) -> Vec<(String, BTreeMap<String, String>, f64)> {
    let mut out = Vec::new();
    for line in text
        .lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
    {
        let (series, value) = line.rsplit_once(' ').expect("name and value");
        let value: f64 = value
            .parse()
            .unwrap_or_else(|_| panic!("a number in {line}"));
        let (name, labels) = match series.split_once('{') {
            Some((name, rest)) => {
                let rest = rest.trim_end_matches('}');
                let labels = rest
                    .split("\",")
                    .filter(|p| !p.is_empty())
                    .map(|pair| {
                        let (k, v) = pair.split_once('=').expect("label=value");
                        (k.to_string(), v.trim_matches('"').to_string())
                    })
                    .collect();
                (name.to_string(), labels)
            }
            None => (series.to_string(), BTreeMap::new()),
        };
        out.push((name, labels, value));
    }
    out
}

fn value(
    samples: &[(String, BTreeMap<String, String>, f64)],
    name: &str,
    want: &[(&str, &str)],
) -> f64 {
    samples
        .iter()
        .filter(|(n, labels, _)| {
            n == name
                && want
                    .iter()
                    .all(|(k, v)| labels.get(*k).map(String::as_str) == Some(*v))
        })
        .map(|(_, _, v)| v)
        .sum()
}

#[tokio::test]
async fn the_counters_equal_what_the_workload_did() {
    let (_db, pool) = setup().await;
    let metrics = awa_admin::metrics::Metrics::install().unwrap();
    let mut conn = pool.acquire().await.unwrap();
    awa_control::queues::QueueConfig {
        dlq_enabled: Some(true),
        ..Default::default()
    }
    .apply(&mut conn, &queue("mdlq"))
    .await
    .unwrap();
    drop(conn);

    // The workload: 6 ok, 2 retry, 1 fail on queue m; 2 dead on mdlq.
    let client = awa::Client::new(pool.clone());
    let mut jobs = Vec::new();
    for (q, kind, n) in [
        ("m", "ok", 6),
        ("m", "retry", 2),
        ("m", "fail", 1),
        ("m", "hold", 1),
        ("mdlq", "dead", 2),
    ] {
        for i in 0..n {
            let mut job = awa_core::NewJob::new(queue(q), kind, serde_json::json!({ "i": i }));
            job.max_attempts = Some(if kind == "retry" { 5 } else { 1 });
            jobs.push(job);
        }
    }
    let inserted = client.insert_raw(&pool, &jobs).await.unwrap();
    let hold = inserted[9].id;

    let worker_config = WorkerConfig::new(schema(), vec![(queue("m"), 4), (queue("mdlq"), 4)]);
    let mut worker = Worker::new(pool.clone(), worker_config);
    let release = std::sync::Arc::new(tokio::sync::Notify::new());
    worker.register_default(ByKind {
        release: release.clone(),
    });
    let worker_stats = worker.stats();
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let running = tokio::spawn(worker.run(async move {
        let _ = stop_rx.await;
    }));
    // Wait (generously) until the database shows every outcome.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    loop {
        let mut conn = pool.acquire().await.unwrap();
        use awa_history::HistoryPlane;
        let stats = awa_history::PgHistoryPlane::new(schema())
            .queue_stats(&mut conn, None)
            .await
            .unwrap();
        let n = |q: &str, s: &str| stats.get(q).and_then(|m| m.get(s)).copied().unwrap_or(0);
        if n("m", "completed") == 6
            && n("m", "retryable") == 2
            && n("m", "failed") == 1
            && n("mdlq", "dead_lettered") == 2
            && n("m", "running") == 1
        {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the workload did not finish: {stats:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // Cancel the held job while it runs, then let its handler finish: the
    // guarded finish rejects that result.
    let mut conn = pool.acquire().await.unwrap();
    use awa_exec::ExecPlane;
    let from = awa_exec::PgExecPlane::new(schema())
        .cancel_job(&mut conn, hold)
        .await
        .unwrap();
    assert_eq!(from.as_deref(), Some("running"));
    drop(conn);
    release.notify_one();
    while worker_stats.snapshot().rejected < 1 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the stale result was never written"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // Stop the worker so every result it wrote has been counted.
    let _ = stop_tx.send(());
    running.await.unwrap().unwrap();

    let app = awa_admin::router(AppState::new(pool.clone(), config(false), Some(metrics)));
    let r = get(&app, "/metrics", None).await;
    assert_eq!(r.status, StatusCode::OK);
    assert!(
        r.headers["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/plain")
    );
    let s = samples(&r.text);
    let of = |name: &str, q: &str, kind: &str| value(&s, name, &[("queue", q), ("kind", kind)]);

    for (q, kind, n) in [
        ("m", "ok", 6.0),
        ("m", "retry", 2.0),
        ("m", "fail", 1.0),
        ("m", "hold", 1.0),
        ("mdlq", "dead", 2.0),
    ] {
        assert_eq!(
            of("awa_jobs_enqueued_total", q, kind),
            n,
            "enqueued {q}/{kind}\n{}",
            r.text
        );
        assert_eq!(
            of("awa_jobs_claimed_total", q, kind),
            n,
            "claimed {q}/{kind}"
        );
        assert_eq!(
            of("awa_handler_duration_seconds_count", q, kind),
            n,
            "handler runs {q}/{kind}"
        );
    }
    assert_eq!(of("awa_jobs_completed_total", "m", "ok"), 6.0);
    assert_eq!(
        value(&s, "awa_jobs_completed_total", &[]),
        6.0,
        "nothing else completed"
    );
    assert_eq!(of("awa_jobs_retried_total", "m", "retry"), 2.0);
    assert_eq!(value(&s, "awa_jobs_retried_total", &[]), 2.0);
    assert_eq!(of("awa_jobs_failed_total", "m", "fail"), 1.0);
    assert_eq!(value(&s, "awa_jobs_failed_total", &[]), 1.0);
    assert_eq!(of("awa_jobs_dead_lettered_total", "mdlq", "dead"), 2.0);
    assert_eq!(value(&s, "awa_jobs_dead_lettered_total", &[]), 2.0);
    assert_eq!(of("awa_stale_writes_rejected_total", "m", "hold"), 1.0);
    assert_eq!(value(&s, "awa_stale_writes_rejected_total", &[]), 1.0);
    assert!(value(&s, "awa_claim_duration_seconds_count", &[("queue", "m")]) >= 1.0);
    assert!(value(&s, "awa_finish_duration_seconds_count", &[]) >= 1.0);

    // Gauges read from the database at scrape time.
    let depth =
        |q: &str, state: &str| value(&s, "awa_queue_depth", &[("queue", q), ("state", state)]);
    assert_eq!(depth("m", "retryable"), 2.0);
    assert_eq!(depth("m", "available"), 0.0);
    assert_eq!(depth("m", "running"), 0.0);
    assert_eq!(
        value(&s, "awa_leader_up", &[]),
        0.0,
        "no maintenance leader ran"
    );
    assert!(
        s.iter()
            .any(|(n, _, _)| n == "awa_pinned_snapshot_age_seconds"),
        "{}",
        r.text
    );
    assert!(
        s.iter()
            .any(|(n, l, _)| n == "awa_ring_slot_rows" && l.get("ring").is_some())
    );

    // The Grafana dashboard charts only names this endpoint exports (the
    // two added appear once something happened: a waiting job, a ring
    // outcome; this workload leaves neither).
    let grafana = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/grafana-awa.json"),
    )
    .unwrap();
    let mut exported: std::collections::BTreeSet<&str> =
        s.iter().map(|(n, _, _)| n.as_str()).collect();
    exported.extend([
        "awa_queue_oldest_available_seconds",
        "awa_ring_last_outcome_timestamp_seconds",
    ]);
    let mut charted = std::collections::BTreeSet::new();
    for (at, _) in grafana.match_indices("awa_") {
        let name: String = grafana[at..]
            .chars()
            .take_while(|c| c.is_ascii_lowercase() || *c == '_')
            .collect();
        if name.starts_with("awa_overview") {
            continue;
        }
        assert!(
            exported.contains(name.as_str()),
            "docs/grafana-awa.json charts {name}, which /metrics does not export"
        );
        charted.insert(name);
    }
    assert!(
        charted.len() >= 12,
        "the dashboard charts the metrics: {charted:?}"
    );
}
