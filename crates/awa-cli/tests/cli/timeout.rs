//! Job timeouts as processes (issue 23): `awa job enqueue --timeout 1s`,
//! then `awa worker run --handler sleep:1800000`. The sleep handler never
//! returns in time; the worker drops it at the job's timeout and the
//! attempt fails with a timeout error, within the timeout plus one second
//! of its claim, and the job is retried until its attempts are used up.

use crate::common;

use common::{awa, migrated_db, spawn_awa};
use std::time::{Duration, Instant};

fn dump(url: &str, id: i64) -> serde_json::Value {
    let run = awa(url, &["--json", "job", "dump", &id.to_string()]);
    assert!(run.ok(), "{run:?}");
    run.json()
}

#[tokio::test]
async fn a_job_over_its_timeout_fails_with_a_timeout_error_and_is_retried() {
    let db = migrated_db().await;
    let url = db.url();
    let enqueued = awa(
        url,
        &[
            "--json",
            "job",
            "enqueue",
            "--queue",
            "naps",
            "--kind",
            "nap",
            "--max-attempts",
            "2",
            "--timeout",
            "1s",
            "--metadata",
            r#"{"tenant": 7}"#,
        ],
    );
    assert!(enqueued.ok(), "{enqueued:?}");
    let id = enqueued.json()["ids"][0].as_i64().unwrap();
    assert_eq!(
        dump(url, id)["metadata"],
        serde_json::json!({"tenant": 7, "awa_timeout_ms": 1000})
    );

    let worker = spawn_awa(
        url,
        &[
            "--json",
            "worker",
            "run",
            "--queue",
            "naps",
            "--handler",
            "sleep:1800000",
            "--concurrency",
            "1",
        ],
    );
    let deadline = Instant::now() + Duration::from_secs(90);
    let job = loop {
        let job = dump(url, id);
        if job["state"] == "failed" {
            break job;
        }
        assert!(Instant::now() < deadline, "hang guard: {job}");
        std::thread::sleep(Duration::from_millis(200));
    };
    worker.terminate();
    let run = worker.finish();
    assert!(run.ok(), "{run:?}");
    let report: serde_json::Value = serde_json::from_str(run.stdout.trim()).unwrap();
    assert_eq!(
        (report["retried"].as_i64(), report["failed"].as_i64()),
        (Some(1), Some(1)),
        "{report}"
    );

    let attempts = job["attempts"].as_array().expect("\"attempts\": [...]");
    assert_eq!(attempts.len(), 2, "{job}");
    for (a, outcome) in attempts.iter().zip(["retried", "failed"]) {
        assert_eq!(a["outcome"], outcome, "{a}");
        let error = a["error"].as_str().unwrap_or_default();
        assert!(error.starts_with("timeout:"), "{a}");
        let at = |k: &str| chrono::DateTime::parse_from_rfc3339(a[k].as_str().unwrap()).unwrap();
        let ran = (at("ended_at") - at("started_at")).to_std().unwrap();
        assert!(
            (Duration::from_secs(1)..=Duration::from_secs(2)).contains(&ran),
            "ended {ran:?} after its claim, not within the 1 s timeout plus one second: {a}"
        );
    }

    // Refused before connecting: out of bounds, or no object to keep it in.
    awa(
        url,
        &[
            "job",
            "enqueue",
            "--queue",
            "naps",
            "--kind",
            "nap",
            "--timeout",
            "0s",
        ],
    )
    .usage("--timeout");
    awa(
        url,
        &[
            "job",
            "enqueue",
            "--queue",
            "naps",
            "--kind",
            "nap",
            "--timeout",
            "1s",
            "--metadata",
            "[1]",
        ],
    )
    .usage("--timeout");
}
