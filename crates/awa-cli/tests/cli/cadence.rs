//! Item 9 across processes: a maintenance process with a short
//! `--rescue-after` and a worker process that share only the database. The
//! worker must heartbeat within that bound, so its healthy long job is not
//! rescued, and completes once, on its first attempt.

use crate::common;

use common::{awa, enqueue, migrated_db, spawn_awa};

#[tokio::test]
async fn a_short_rescue_bound_elsewhere_does_not_take_a_healthy_long_job() {
    let db = migrated_db().await;
    let url = db.url().to_string();
    let id = enqueue(&url, "long", "k", 1)["ids"][0].as_i64().unwrap();

    let maint = spawn_awa(&url, &["maint", "run", "--rescue-after", "1s"]);
    // 12 s of work: at least two rescue passes (every 5 s) see it running.
    let worker = awa(
        &url,
        &[
            "--json",
            "worker",
            "run",
            "--queue",
            "long",
            "--handler",
            "sleep:12000",
            "--no-maintenance",
            "--exit-when-idle",
        ],
    );
    maint.terminate();
    let maint = maint.finish();
    assert!(maint.ok(), "{maint:#?}");
    let stats = worker.json();
    assert_eq!(
        stats["rejected"], 0,
        "the worker's result was rejected: {stats}"
    );
    assert_eq!(stats["completed"], 1, "{stats}");
    let job = awa(&url, &["--json", "job", "dump", &id.to_string()]).json();
    assert_eq!(job["state"], "completed");
    assert_eq!(
        job["attempt"], 1,
        "never rescued: completed on its first attempt"
    );
}
