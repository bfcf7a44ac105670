//! Terminal history as an operator sees it: its retention is a setting, and
//! a job whose history was pruned is reported as pruned, not as unknown.

use crate::common;

use common::{awa, migrated_db, worker_run};

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
        &worker_run("h", "noop", &["--exit-when-idle", "--no-maintenance"]),
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

/// `job dump` shows what `GET /api/jobs/{id}` shows: the progress and
/// checkpoint a running attempt reported (text and `--json`), and a job
/// without metadata the same way whatever its state (`-` in text, null in
/// JSON; a finished job's stored body used to print `null`).
#[tokio::test]
async fn dump_shows_progress_and_checkpoint_and_absent_metadata_alike() {
    use awa_core::{QueueName, SchemaName};
    use awa_exec::{ExecPlane, Frontier, PgExecPlane, Progress};
    use sqlx::Connection;

    let db = migrated_db().await;
    let url = db.url();
    let enqueue = || {
        awa(
            url,
            &["job", "enqueue", "--queue", "p", "--kind", "k", "--json"],
        )
        .json()["ids"][0]
            .as_i64()
            .expect("an id")
    };
    let running = enqueue();
    let mut conn = sqlx::PgConnection::connect(url).await.unwrap();
    let exec = PgExecPlane::new(SchemaName::new("awa").unwrap());
    let mut frontier = Frontier::default();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    let claimed = loop {
        assert!(std::time::Instant::now() < deadline, "claim the job");
        let mut got = exec
            .claim(
                &mut conn,
                &QueueName::new("p").unwrap(),
                1,
                &mut frontier,
                None,
            )
            .await
            .unwrap();
        if let Some(c) = got.pop() {
            break c;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    };
    assert_eq!(claimed.token.job_id.0, running);
    let progress = Progress {
        percent: Some(40),
        message: Some("page 4 of 10".into()),
        checkpoint: Some(serde_json::json!({ "page": 4 })),
    };
    assert!(
        exec.heartbeat(&mut conn, &claimed.token, &progress)
            .await
            .unwrap()
    );
    let id = running.to_string();
    let json = awa(url, &["job", "dump", &id, "--json"]).json();
    assert_eq!(json["state"], "running", "{json}");
    assert_eq!(json["progress"]["percent"], 40, "{json}");
    assert_eq!(json["progress"]["message"], "page 4 of 10", "{json}");
    assert_eq!(
        json["progress"]["checkpoint"],
        serde_json::json!({ "page": 4 })
    );
    let text = awa(url, &["job", "dump", &id]);
    assert!(text.ok(), "{text:#?}");
    assert!(
        text.stdout.contains("progress: 40% page 4 of 10"),
        "{}",
        text.stdout
    );
    assert!(
        text.stdout.contains(r#"checkpoint: {"page":4}"#),
        "{}",
        text.stdout
    );

    // No metadata, live and finished (a cancelled job's body is stored
    // with the history): shown alike.
    let waiting = enqueue().to_string();
    let cancelled = enqueue().to_string();
    assert!(awa(url, &["job", "cancel", &cancelled]).ok());
    for (id, state) in [(&waiting, "available"), (&cancelled, "cancelled")] {
        let json = awa(url, &["job", "dump", id, "--json"]).json();
        assert_eq!(json["state"], state, "{json}");
        assert!(json["metadata"].is_null(), "{json}");
        assert!(json["progress"].is_null(), "{json}");
        let text = awa(url, &["job", "dump", id]).stdout;
        assert!(text.contains("\nmetadata: -\n"), "{state}: {text}");
        assert!(text.contains("\nprogress: -\n"), "{state}: {text}");
        assert!(text.contains("\ncheckpoint: -\n"), "{state}: {text}");
        assert!(!text.contains("null"), "{state}: {text}");
    }
}
