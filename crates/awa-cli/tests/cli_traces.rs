//! `awa job enqueue --traceparent` (or TRACEPARENT in the environment):
//! the caller's trace context stored in the job's metadata, the shape
//! every producer stores and the worker's span takes as its parent;
//! malformed contexts refused before anything is written.

mod common;

use common::{awa, awa_env, migrated_db};
use serde_json::json;

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
