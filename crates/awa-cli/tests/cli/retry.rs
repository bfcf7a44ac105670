//! Issue 22 as an operator meets it, through the `awa` binary: every
//! attempt of a job in `job dump` (text and --json), retry of a failed job
//! from a queue without the DLQ, bulk retry and cancel by filter with
//! --dry-run, `job list` filters, the failure retention setting, and
//! `queue stats --watch`.

use crate::common;

use common::{Run, awa, migrated_db, spawn_awa, worker_run};
use serde_json::Value;
use std::time::Duration;

/// `worker run` on `queue` with `handler` until nothing is left to do;
/// the worker's pid and its report.
fn work(url: &str, queue: &str, handler: &str) -> (u32, Value) {
    let worker = spawn_awa(
        url,
        &worker_run(queue, handler, &["--exit-when-idle", "--json"]),
    );
    let pid = worker.pid();
    (pid, worker.finish().json())
}

fn enqueue(url: &str, queue: &str, kind: &str, args: &str, extra: &[&str]) -> i64 {
    let mut argv = vec![
        "job", "enqueue", "--queue", queue, "--kind", kind, "--args", args, "--json",
    ];
    argv.extend_from_slice(extra);
    awa(url, &argv).json()["ids"][0].as_i64().unwrap()
}

fn dump(url: &str, id: i64) -> Value {
    awa(url, &["job", "dump", &id.to_string(), "--json"]).json()
}

fn no_escape_codes(run: &Run) {
    assert!(!run.stdout.contains('\x1b'), "{run:#?}");
}

#[tokio::test]
async fn three_failures_show_in_dump_and_retry_brings_the_job_back() {
    let db = migrated_db().await;
    let url = db.url();
    let id = enqueue(
        url,
        "triage",
        "report",
        r#"{"user": 42}"#,
        &["--max-attempts", "3"],
    );

    // fail-first:3 fails attempts 1, 2 and 3, each with its own error.
    let (pid, report) = work(url, "triage", "fail-first:3");
    assert_eq!(report["failed"], 1, "{report}");
    let job = dump(url, id);
    assert_eq!(job["state"], "failed", "{job}");
    let attempts = job["attempts"].as_array().expect("\"attempts\": [...]");
    assert_eq!(attempts.len(), 3, "{job}");
    for (i, a) in attempts.iter().enumerate() {
        let n = i + 1;
        assert_eq!(a["attempt"], n);
        assert_eq!(
            a["error"],
            format!("fail-first:3 handler fails attempt {n}"),
            "{a}"
        );
        assert_eq!(a["outcome"], if n < 3 { "retried" } else { "failed" });
        let started = a["started_at"].as_str().expect("started_at");
        let ended = a["ended_at"].as_str().expect("ended_at");
        assert!(
            chrono::DateTime::parse_from_rfc3339(started).unwrap()
                <= chrono::DateTime::parse_from_rfc3339(ended).unwrap()
        );
        assert_eq!(a["runtime"]["pid"], pid, "the worker process ran it: {a}");
        assert!(a["runtime"]["host"].is_string() && a["runtime"]["id"].is_string());
    }
    let text = awa(url, &["job", "dump", &id.to_string()]);
    assert!(text.ok(), "{text:#?}");
    for needle in [
        "attempts:",
        "#1 retried",
        "#2 retried",
        "#3 failed",
        "fails attempt 2",
        &format!("pid {pid}"),
    ] {
        assert!(
            text.stdout.contains(needle),
            "{needle:?} in {}",
            text.stdout
        );
    }
    no_escape_codes(&text);

    // The queue has no DLQ; retry puts the job back as fresh work.
    let retried = awa(url, &["job", "retry", &id.to_string(), "--json"]).json();
    assert_eq!(retried["retried"], serde_json::json!([id]), "{retried}");
    let job = dump(url, id);
    assert_eq!(
        (job["state"].as_str(), job["attempt"].as_i64()),
        (Some("available"), Some(0))
    );
    // A second retry has nothing to retry, and says why.
    awa(url, &["job", "retry", &id.to_string()]).refused("available, not failed");
    let (_, report) = work(url, "triage", "noop");
    assert_eq!(report["completed"], 1, "{report}");
    let job = dump(url, id);
    assert_eq!(job["state"], "completed", "{job}");
    let outcomes: Vec<&str> = job["attempts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["outcome"].as_str().unwrap())
        .collect();
    assert_eq!(outcomes, ["retried", "retried", "failed", "completed"]);

    // What cannot be retried, with the reason.
    awa(url, &["job", "retry", "999999"]).refused("no failed or cancelled job");
    awa(url, &["job", "retry", &id.to_string()]).refused("completed, not failed");
    let dead = enqueue(url, "dead", "k", "{}", &["--max-attempts", "1"]);
    assert!(awa(url, &["queue", "configure", "dead", "--dlq", "on"]).ok());
    work(url, "dead", "fail");
    awa(url, &["job", "retry", &dead.to_string()]).refused("awa dlq retry");

    // Its unique key held by a newer job: exit 3, and the failure stays.
    let keyed = enqueue(
        url,
        "keyed",
        "k",
        "{}",
        &["--max-attempts", "1", "--unique-key", "only-one"],
    );
    work(url, "keyed", "fail");
    let holder = enqueue(url, "other", "k", "{}", &["--unique-key", "only-one"]);
    let run = awa(url, &["job", "retry", &keyed.to_string(), "--json"]);
    assert_eq!(run.code, Some(3), "{run:#?}");
    assert!(run.stderr.contains("stays failed"), "{run:#?}");
    let err: Value = serde_json::from_str(run.stdout.trim()).unwrap();
    assert_eq!(err["held_by"], holder, "{err}");
    assert_eq!(dump(url, keyed)["state"], "failed");
}

#[tokio::test]
async fn bulk_retry_and_cancel_by_filter_with_a_dry_run() {
    let db = migrated_db().await;
    let url = db.url();
    let mut ids = Vec::new();
    for (kind, user) in [("a", 1), ("a", 2), ("a", 1), ("b", 1), ("b", 2)] {
        let args = format!(r#"{{"user": {user}}}"#);
        ids.push(enqueue(url, "bulk", kind, &args, &["--max-attempts", "1"]));
    }
    let (_, report) = work(url, "bulk", "fail");
    assert_eq!(report["failed"], 5, "{report}");

    // Find them: kind and args containment.
    let listed = |extra: &[&str]| -> Vec<i64> {
        let mut argv = vec!["job", "list", "--queue", "bulk", "--json"];
        argv.extend_from_slice(extra);
        let mut found: Vec<i64> = awa(url, &argv)
            .json()
            .as_array()
            .unwrap()
            .iter()
            .map(|j| j["id"].as_i64().unwrap())
            .collect();
        found.sort();
        found
    };
    assert_eq!(listed(&["--state", "failed"]).len(), 5);
    assert_eq!(
        listed(&["--kind", "a", "--args-contains", r#"{"user": 1}"#]),
        vec![ids[0], ids[2]]
    );
    assert!(listed(&["--args-contains", r#"{"user": 3}"#]).is_empty());

    // Dry run: counts, changes nothing.
    let dry = awa(
        url,
        &[
            "job",
            "retry",
            "--queue",
            "bulk",
            "--state",
            "failed",
            "--kind",
            "a",
            "--dry-run",
            "--json",
        ],
    )
    .json();
    assert_eq!(dry["matched"], 3, "{dry}");
    assert_eq!(dry["retried"], serde_json::json!([]));
    let text = awa(
        url,
        &[
            "job",
            "retry",
            "--queue",
            "bulk",
            "--state",
            "failed",
            "--kind",
            "a",
            "--dry-run",
        ],
    );
    assert!(
        text.stdout
            .contains("would retry 3 failed jobs of queue bulk"),
        "{text:#?}"
    );
    assert_eq!(listed(&["--state", "failed"]).len(), 5);

    let done = awa(
        url,
        &[
            "job", "retry", "--queue", "bulk", "--state", "failed", "--kind", "a", "--json",
        ],
    )
    .json();
    let mut back: Vec<i64> = done["retried"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_i64().unwrap())
        .collect();
    back.sort();
    assert_eq!(back, vec![ids[0], ids[1], ids[2]]);
    assert_eq!(
        listed(&["--state", "available"]),
        vec![ids[0], ids[1], ids[2]]
    );
    let (_, report) = work(url, "bulk", "noop");
    assert_eq!(report["completed"], 3, "{report}");

    // Bulk cancel, dry run first: scheduled work of one kind.
    for _ in 0..4 {
        enqueue(url, "bulk", "later", "{}", &["--run-at", "+1h"]);
    }
    enqueue(url, "bulk", "other", "{}", &["--run-at", "+1h"]);
    let dry = awa(
        url,
        &[
            "job",
            "cancel",
            "--queue",
            "bulk",
            "--kind",
            "later",
            "--dry-run",
            "--json",
        ],
    )
    .json();
    assert_eq!(
        (dry["matched"].as_i64(), dry["dry_run"].as_bool()),
        (Some(4), Some(true))
    );
    let done = awa(
        url,
        &[
            "job",
            "cancel",
            "--queue",
            "bulk",
            "--state",
            "scheduled",
            "--kind",
            "later",
            "--json",
        ],
    )
    .json();
    assert_eq!(done["cancelled"].as_array().unwrap().len(), 4, "{done}");
    assert!(
        done["cancelled"]
            .as_array()
            .unwrap()
            .iter()
            .all(|c| c["cancelled_from"] == "scheduled")
    );
    assert_eq!(listed(&["--state", "scheduled"]).len(), 1);
    // Cancelled jobs are retryable too.
    let back = awa(
        url,
        &[
            "job",
            "retry",
            "--queue",
            "bulk",
            "--state",
            "cancelled",
            "--json",
        ],
    )
    .json();
    assert_eq!(back["retried"].as_array().unwrap().len(), 4, "{back}");

    // Refusals: a bad command line is 2, a bad selection says what to do.
    for argv in [
        vec!["job", "retry"],
        vec!["job", "retry", "--queue", "bulk"],
        vec!["job", "retry", "7", "--queue", "bulk", "--state", "failed"],
        vec!["job", "cancel", "--state", "running"],
    ] {
        let run = awa(url, &argv);
        assert_eq!(run.code, Some(2), "{argv:?}: {run:#?}");
    }
    awa(
        url,
        &["job", "retry", "--queue", "bulk", "--state", "completed"],
    )
    .refused("failed or cancelled");
    awa(
        url,
        &["job", "cancel", "--queue", "bulk", "--state", "failed"],
    )
    .refused("only unfinished jobs");
    awa(url, &["job", "list", "--args-contains", "42"]).refused("JSON object");
    awa(url, &["job", "list", "--args-contains", "{nope"]).refused("--args-contains");
}

#[tokio::test]
async fn failure_retention_is_a_setting_of_its_own() {
    let db = migrated_db().await;
    let url = db.url();
    let set = awa(
        url,
        &[
            "storage",
            "configure",
            "--failure-retention",
            "7days",
            "--json",
        ],
    )
    .json();
    assert_eq!(set["failure_retention_secs"], 604800.0, "{set}");
    let set = awa(url, &["storage", "configure", "--failure-retention", "36h"]);
    assert!(
        set.ok()
            && set
                .stdout
                .contains("failed and cancelled jobs are kept 1day 12h"),
        "{set:#?}"
    );
    for bad in ["0s", "3651days", "soon", "-1d"] {
        awa(url, &["storage", "configure", "--failure-retention", bad])
            .refused("failure-retention");
    }
    let status = awa(url, &["storage", "status", "--json"]).json();
    assert_eq!(
        status["substrates"][0]["failure_retention_secs"], 129600.0,
        "{status}"
    );
    let text = awa(url, &["storage", "status"]);
    assert!(text.stdout.contains("failures kept 1day 12h"), "{text:#?}");
}

#[tokio::test]
async fn queue_stats_watch_shows_rates_per_queue() {
    let db = migrated_db().await;
    let url = db.url();
    let watch = spawn_awa(
        url,
        &["queue", "stats", "--watch", "--interval", "200ms", "--json"],
    );
    std::thread::sleep(Duration::from_millis(800));
    common::enqueue(url, "rated", "k", 200);
    let (_, report) = work(url, "rated", "noop");
    assert_eq!(report["completed"], 200, "{report}");
    std::thread::sleep(Duration::from_millis(800));
    watch.interrupt();
    let run = watch.finish();
    assert!(run.ok(), "Ctrl-C ends the watch cleanly: {run:#?}");
    no_escape_codes(&run);
    let lines: Vec<Value> = run
        .stdout
        .lines()
        .map(|l| serde_json::from_str(l).expect("one JSON object per line"))
        .collect();
    assert!(lines.len() >= 3, "{run:#?}");
    let rate = |what: &str| {
        lines
            .iter()
            .filter_map(|l| l["queues"]["rated"]["per_sec"][what].as_f64())
            .fold(0.0, f64::max)
    };
    assert!(rate("enqueued") > 0.0, "{run:#?}");
    assert!(rate("completed") > 0.0, "{run:#?}");
    assert_eq!(rate("failed"), 0.0);
    let last = lines.last().unwrap();
    assert_eq!(last["queues"]["rated"]["counts"]["completed"], 200);

    // Text on a pipe: one table per refresh, no screen control codes.
    let run = awa(
        url,
        &[
            "queue",
            "stats",
            "--watch",
            "--interval",
            "100ms",
            "--iterations",
            "2",
        ],
    );
    assert!(run.ok(), "{run:#?}");
    no_escape_codes(&run);
    assert_eq!(run.stdout.matches("ENQUEUED/s").count(), 2, "{run:#?}");
    awa(url, &["queue", "stats", "--watch", "--interval", "1ms"]).refused("--interval");
    assert_eq!(
        awa(url, &["queue", "stats", "--interval", "1s"]).code,
        Some(2)
    );
}
