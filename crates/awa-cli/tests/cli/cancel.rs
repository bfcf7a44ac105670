//! Cancel of a running job in a worker process (issue 20, item 7), with
//! the handler the issue used: `--handler sleep:1800000 --concurrency 2`.
//! The cancel reaches the worker at once; the sleep handler does not watch
//! for it, so after `--cancel-grace` it is dropped and its slot goes to the
//! job that waited in the buffer. The log says so once, with no warning
//! every heartbeat. `queue stats` says running and buffered apart.

use crate::common;

use common::{awa, enqueue, migrated_db, spawn_awa};
use std::time::{Duration, Instant};

/// `queue stats --json` counts of one queue: (running, buffered, cancelled).
fn counts(url: &str, queue: &str) -> (i64, i64, i64) {
    let run = awa(url, &["--json", "queue", "stats", queue]);
    assert!(run.ok(), "{run:?}");
    let v = run.json();
    let n = |s: &str| {
        v[queue][s]
            .as_i64()
            .unwrap_or_else(|| panic!("{s} of {queue} in {v}"))
    };
    (n("running"), n("buffered"), n("cancelled"))
}

fn wait_for(what: &str, mut ok: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(90);
    while !ok() {
        assert!(Instant::now() < deadline, "hang guard: {what}");
        std::thread::sleep(Duration::from_millis(200));
    }
}

#[tokio::test]
async fn a_cancelled_running_job_frees_its_slot_after_the_grace_and_says_so_once() {
    let db = migrated_db().await;
    let url = db.url();
    let ids: Vec<i64> = enqueue(url, "sleepers", "nap", 3)["ids"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i.as_i64().unwrap())
        .collect();
    let worker = spawn_awa(
        url,
        &[
            "-v",
            "--json",
            "worker",
            "run",
            "--queue",
            "sleepers",
            "--handler",
            "sleep:1800000",
            "--concurrency",
            "2",
            "--cancel-grace",
            "1s",
            "--no-maintenance",
        ],
    );
    // Two run, the third waits in the worker's buffer: not "3 running".
    wait_for("2 running and 1 buffered", || {
        counts(url, "sleepers") == (2, 1, 0)
    });

    // The first two claimed are the ones running (lane order).
    let cancel = awa(url, &["job", "cancel", &ids[0].to_string()]);
    assert!(cancel.ok(), "{cancel:?}");
    // Its slot goes to the buffered job once the grace is over.
    wait_for("the buffered job to start", || {
        counts(url, "sleepers") == (2, 0, 1)
    });
    let dump = awa(url, &["--json", "job", "dump", &ids[2].to_string()]).json();
    assert_eq!(dump["state"], "running", "{dump}");

    worker.terminate();
    let run = worker.finish();
    assert!(run.ok(), "{run:?}");
    let report: serde_json::Value = serde_json::from_str(run.stdout.trim()).unwrap();
    assert_eq!(report["dropped"], 1, "{report}");
    assert_eq!(report["released"], 2, "the two still sleeping: {report}");
    let log = &run.stderr;
    assert_eq!(
        log.matches("did not return within the cancel grace")
            .count(),
        1,
        "said once: {log}"
    );
    assert_eq!(
        log.matches("its handler is told to stop").count(),
        1,
        "{log}"
    );
    assert!(
        !log.contains("a heartbeat found the attempt is no longer ours"),
        "the notification told it, not a heartbeat: {log}"
    );
}
