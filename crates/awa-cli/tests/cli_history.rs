//! Terminal history as an operator sees it: its retention is a setting, and
//! a job whose history was pruned is reported as pruned, not as unknown.

mod common;

use common::{awa, migrated_db};

#[tokio::test]
async fn dump_of_a_pruned_job_says_it_was_pruned() {
    let db = migrated_db().await;
    let url = db.url();
    let out = awa(
        url,
        &["job", "enqueue", "--queue", "h", "--kind", "k", "--json"],
    )
    .json();
    let id = out["ids"][0].as_i64().expect("an id").to_string();
    let run = awa(
        url,
        &[
            "worker",
            "run",
            "--queue",
            "h",
            "--handler",
            "noop",
            "--exit-when-idle",
            "--no-maintenance",
        ],
    );
    assert!(run.ok(), "{run:#?}");
    assert_eq!(
        awa(url, &["job", "dump", &id, "--json"]).json()["state"],
        "completed"
    );

    // With the default retention the history stays after a maintenance pass.
    awa(url, &["maint", "run", "--once", "--json"]).json();
    assert_eq!(
        awa(url, &["job", "dump", &id, "--json"]).json()["state"],
        "completed"
    );

    // Retention 0: one pass seals, retires and truncates the slot.
    let set = awa(
        url,
        &[
            "storage",
            "configure",
            "--history-retention",
            "0s",
            "--json",
        ],
    )
    .json();
    assert_eq!(set["history_retention_secs"], 0.0);
    awa(url, &["maint", "run", "--once", "--json"]).json();
    awa(url, &["maint", "run", "--once", "--json"]).json();
    awa(url, &["job", "dump", &id])
        .refused("has been pruned")
        .refused(&format!("job {id}"));
    awa(url, &["job", "dump", "999999"]).refused("no job with id 999999");
}

#[tokio::test]
async fn history_retention_is_bounded_and_needs_a_substrate() {
    let db = migrated_db().await;
    let url = db.url();
    for bad in ["-1s", "soon", "3651days"] {
        awa(url, &["storage", "configure", "--history-retention", bad])
            .refused("--history-retention");
    }
    awa(
        url,
        &[
            "storage",
            "configure",
            "--schema",
            "nope",
            "--history-retention",
            "1h",
        ],
    )
    .refused("not a prepared substrate");
    let auto = awa(
        url,
        &[
            "storage",
            "configure",
            "--history-retention",
            "auto",
            "--json",
        ],
    )
    .json();
    assert_eq!(auto["history_retention_secs"], serde_json::Value::Null);
}

#[tokio::test]
async fn the_job_size_limit_is_a_substrate_setting() {
    let db = migrated_db().await;
    let url = db.url();
    awa(url, &["storage", "configure"]).refused("nothing to change");
    for bad in ["1023", "268435457", "-5"] {
        awa(url, &["storage", "configure", "--max-job-bytes", bad]).refused("max job bytes");
    }
    let set = awa(
        url,
        &["storage", "configure", "--max-job-bytes", "2048", "--json"],
    )
    .json();
    assert_eq!(set["max_job_bytes"], 2048);
    let big = format!("{{\"pad\": \"{}\"}}", "x".repeat(4000));
    awa(
        url,
        &[
            "job", "enqueue", "--queue", "q", "--kind", "k", "--args", &big,
        ],
    )
    .refused("limit");
    let small = awa(
        url,
        &[
            "job", "enqueue", "--queue", "q", "--kind", "k", "--args", "{}", "--json",
        ],
    )
    .json();
    assert_eq!(small["inserted"], 1);
}
