//! `awa job enqueue --traceparent` (or TRACEPARENT in the environment):
//! the caller's trace context stored in the job's metadata, the shape
//! every producer stores and the worker's span takes as its parent;
//! malformed contexts refused before anything is written. And `awa worker
//! run` exporting its spans over OTLP/HTTP to the endpoint the standard
//! environment names, to a local receiver; nothing without one.

mod common;

use common::{awa, awa_env, migrated_db};
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::any_value;
use opentelemetry_proto::tonic::trace::v1::Span;
use prost::Message as _;
use serde_json::json;
use std::sync::{Arc, Mutex};
use std::time::Duration;

const TP: &str = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";

fn metadata(url: &str, id: &serde_json::Value) -> serde_json::Value {
    awa(url, &["job", "dump", &id.to_string(), "--json"]).json()["metadata"].clone()
}

#[tokio::test]
async fn the_callers_trace_context_goes_into_the_metadata() {
    let db = migrated_db().await;
    let url = db.url();
    let base = ["job", "enqueue", "--queue", "q", "--kind", "k", "--json"];
    let with = |extra: &[&str]| {
        let mut args = base.to_vec();
        args.extend_from_slice(extra);
        awa(url, &args)
    };

    let out = with(&["--traceparent", TP, "--tracestate", "vendor=x"]).json();
    assert_eq!(
        metadata(url, &out["ids"][0]),
        json!({ "awa_trace": { "traceparent": TP, "tracestate": "vendor=x" } })
    );
    // Beside the caller's metadata; a context in --metadata is kept.
    let out = with(&["--traceparent", TP, "--metadata", r#"{"user": 7}"#]).json();
    assert_eq!(
        metadata(url, &out["ids"][0]),
        json!({ "user": 7, "awa_trace": { "traceparent": TP } })
    );
    let own = r#"{"awa_trace": {"traceparent": "00-11111111111111111111111111111111-2222222222222222-00"}}"#;
    let out = with(&["--traceparent", TP, "--metadata", own]).json();
    assert_eq!(
        metadata(url, &out["ids"][0]),
        serde_json::from_str::<serde_json::Value>(own).unwrap()
    );
    // From the environment, as CI systems and otel-cli export it.
    let out = awa_env(&[("DATABASE_URL", url), ("TRACEPARENT", TP)], &base).json();
    assert_eq!(
        metadata(url, &out["ids"][0]),
        json!({ "awa_trace": { "traceparent": TP } })
    );
    // Without one, nothing is added.
    let out = with(&[]).json();
    assert_eq!(metadata(url, &out["ids"][0]), serde_json::Value::Null);

    let available = || {
        let stats = awa(url, &["queue", "stats", "--json"]).json();
        stats["q"]["available"]
            .as_i64()
            .unwrap_or_else(|| panic!("no q.available in {stats}"))
    };
    let before = available();
    for bad in [
        &[
            "--traceparent",
            "01-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
        ][..],
        &[
            "--traceparent",
            "00-00000000000000000000000000000000-b7ad6b7169203331-01",
        ],
        &["--traceparent", "nonsense"],
        &["--traceparent", TP, "--metadata", "[1]"],
    ] {
        let run = with(bad);
        assert_eq!(run.code, Some(2), "{bad:?}: {run:#?}");
    }
    let long = "x".repeat(513);
    let run = with(&["--traceparent", TP, "--tracestate", &long]);
    assert_eq!(run.code, Some(2), "{run:#?}");
    assert_eq!(available(), before, "nothing written");
}

/// One job of kind `mail` in queue `traced`, enqueued in the trace `TP`.
const ENQUEUE_TRACED: [&str; 9] = [
    "job",
    "enqueue",
    "--queue",
    "traced",
    "--kind",
    "mail",
    "--traceparent",
    TP,
    "--json",
];

/// Every request a local HTTP server got: (path, body).
type Received = Arc<Mutex<Vec<(String, Vec<u8>)>>>;

/// An OTLP/HTTP receiver on 127.0.0.1:`port` (0: any free port) that
/// records every request, whatever its path, and answers each with an
/// empty (valid) export response. None when the port is taken.
async fn receiver(port: u16) -> Option<(std::net::SocketAddr, Received)> {
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", port))
        .await
        .ok()?;
    let addr = listener.local_addr().unwrap();
    let got: Received = Arc::default();
    let app = axum::Router::new()
        .fallback(
            |axum::extract::State(got): axum::extract::State<Received>,
             uri: axum::http::Uri,
             body: axum::body::Bytes| async move {
                got.lock()
                    .unwrap()
                    .push((uri.path().to_string(), body.to_vec()));
                (
                    [(axum::http::header::CONTENT_TYPE, "application/x-protobuf")],
                    Vec::<u8>::new(),
                )
            },
        )
        .with_state(got.clone());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    Some((addr, got))
}

/// `awa worker run` over `queue` until it is idle, with no OpenTelemetry
/// variable of the test's environment and `vars` set.
async fn work(url: &str, queue: &str, vars: &[(&str, &str)]) -> (serde_json::Value, String) {
    let mut cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_awa"));
    for (name, _) in std::env::vars_os() {
        let text = name.to_string_lossy();
        if text.starts_with("OTEL_") || text == "TRACEPARENT" || text == "TRACESTATE" {
            cmd.env_remove(&name);
        }
    }
    cmd.env_remove("DATABASE_URL")
        .envs(vars.iter().copied())
        .args([
            "--database-url",
            url,
            "--json",
            "worker",
            "run",
            "--queue",
            queue,
        ])
        .args(["--handler", "fail-first:1", "--exit-when-idle"])
        .kill_on_drop(true);
    let out = tokio::time::timeout(Duration::from_secs(120), cmd.output())
        .await
        .expect("the worker ran past two minutes")
        .expect("start the awa binary");
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "worker failed: {stderr}");
    (
        serde_json::from_slice(&out.stdout).expect("--json report"),
        stderr,
    )
}

fn attribute<'a>(span: &'a Span, key: &str) -> Option<&'a any_value::Value> {
    span.attributes
        .iter()
        .find(|kv| kv.key == key)
        .and_then(|kv| kv.value.as_ref())
        .and_then(|v| v.value.as_ref())
}

fn text(value: Option<&any_value::Value>) -> Option<&str> {
    match value {
        Some(any_value::Value::StringValue(s)) => Some(s),
        _ => None,
    }
}

fn int(value: Option<&any_value::Value>) -> Option<i64> {
    match value {
        Some(any_value::Value::IntValue(n)) => Some(*n),
        _ => None,
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn worker_run_exports_execution_spans_over_otlp_only_when_configured() {
    let db = migrated_db().await;
    let url = db.url();
    let (addr, got) = receiver(0).await.expect("a free port");
    let enqueued = awa(url, &ENQUEUE_TRACED).json();
    let id = enqueued["ids"][0].as_i64().expect("an id");

    let endpoint = format!("http://{addr}");
    let (report, stderr) = work(
        url,
        "traced",
        &[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint.as_str()),
            ("OTEL_SERVICE_NAME", "awa-test-worker"),
        ],
    )
    .await;
    assert_eq!(
        (report["retried"].as_i64(), report["completed"].as_i64()),
        (Some(1), Some(1)),
        "{report}"
    );
    assert!(stderr.contains("exporting traces"), "{stderr}");

    // The worker flushed its spans before it exited.
    let requests = got.lock().unwrap().clone();
    assert!(
        !requests.is_empty(),
        "nothing exported; worker said: {stderr}"
    );
    let mut spans = Vec::new();
    for (path, body) in &requests {
        assert_eq!(path, "/v1/traces");
        let export = ExportTraceServiceRequest::decode(body.as_slice()).expect("an OTLP export");
        for resource in export.resource_spans {
            let service = resource
                .resource
                .iter()
                .flat_map(|r| &r.attributes)
                .find(|kv| kv.key == "service.name")
                .and_then(|kv| kv.value.as_ref())
                .and_then(|v| v.value.clone());
            assert_eq!(
                service,
                Some(any_value::Value::StringValue("awa-test-worker".into()))
            );
            spans.extend(resource.scope_spans.into_iter().flat_map(|s| s.spans));
        }
    }
    spans.sort_by_key(|s| int(attribute(s, "awa.attempt")));
    let (trace_id, parent) = (&TP[3..35], &TP[36..52]);
    let seen: Vec<_> = spans
        .iter()
        .map(|s| {
            (
                s.name.as_str(),
                hex(&s.trace_id),
                hex(&s.parent_span_id),
                text(attribute(s, "awa.queue")),
                text(attribute(s, "awa.kind")),
                int(attribute(s, "awa.job_id")),
                int(attribute(s, "awa.attempt")),
                text(attribute(s, "awa.outcome")),
            )
        })
        .collect();
    let expect = |attempt, outcome| {
        (
            "awa.execute",
            trace_id.to_string(),
            parent.to_string(),
            Some("traced"),
            Some("mail"),
            Some(id),
            Some(attempt),
            Some(outcome),
        )
    };
    assert_eq!(seen, vec![expect(1, "retry"), expect(2, "completed")]);
    // The failed attempt's span says so.
    let status = spans[0].status.as_ref().expect("a status");
    assert!(status.message.contains("fail-first:1"), "{status:?}");

    // Unset: nothing is set up, so nothing is sent, not even to the
    // default endpoint (localhost:4318), listened on here when it is free.
    let default = receiver(4318).await;
    let before = got.lock().unwrap().len();
    let again = awa(url, &ENQUEUE_TRACED);
    assert!(again.ok(), "{again:#?}");
    let (report, stderr) = work(url, "traced", &[("OTEL_SERVICE_NAME", "awa-test-worker")]).await;
    assert_eq!(report["completed"].as_i64(), Some(1), "{report}");
    assert!(!stderr.contains("traces"), "{stderr}");
    assert_eq!(
        got.lock().unwrap().len(),
        before,
        "exported without an endpoint"
    );
    if let Some((_, at_default)) = default {
        assert!(
            at_default.lock().unwrap().is_empty(),
            "exported to the default endpoint"
        );
    }
}
