//! `awa storage ...` and `awa migrate` refusals, run as the binary.

mod common;

use common::{awa, awa_bare, migrated_db};
use serde_json::Value;
use sqlx::Connection;

fn status(url: &str) -> Value {
    awa(url, &["storage", "status", "--json"]).json()
}

fn prepare<'a>(schema: &'a str, extra: &[&'a str]) -> Vec<&'a str> {
    let mut args = vec![
        "storage",
        "prepare-queue-storage-schema",
        "--schema",
        schema,
    ];
    args.extend_from_slice(extra);
    args
}

#[tokio::test]
async fn prepare_is_idempotent_and_refuses_bad_shapes() {
    let db = migrated_db().await;
    let url = db.url();

    let out = awa(url, &[prepare("custom_a", &[]), vec!["--json"]].concat()).json();
    assert_eq!(out["outcome"], "installed");
    let before = status(url);
    let custom = before["substrates"]
        .as_array()
        .and_then(|s| s.iter().find(|s| s["schema"] == "custom_a"))
        .unwrap_or_else(|| panic!("custom_a in {before}"));
    assert_eq!(custom["active"], false);
    assert_eq!(custom["slots"]["queue"], 16);

    let again = awa(url, &[prepare("custom_a", &[]), vec!["--json"]].concat()).json();
    assert_eq!(again["outcome"], "unchanged");
    assert_eq!(status(url), before);

    let refusals: Vec<(Vec<&str>, &str)> = vec![
        (
            prepare("custom_a", &["--queue-slot-count", "32"]),
            "cannot be resized",
        ),
        (
            prepare("x\"; drop schema awa cascade; --", &[]),
            "invalid schema name",
        ),
        (
            prepare("custom_b", &["--queue-slot-count", "0"]),
            "queue slot count",
        ),
        (
            prepare("custom_b", &["--lease-slot-count", "1"]),
            "lease slot count",
        ),
        (
            prepare("custom_b", &["--claim-slot-count", "100000"]),
            "claim slot count",
        ),
        (prepare("awa", &["--reset"]), "cannot be reset"),
    ];
    for (args, needle) in refusals {
        awa(url, &args).refused(needle);
        assert_eq!(status(url), before, "unchanged after {args:?}");
    }
}

#[tokio::test]
async fn unreachable_database_says_so() {
    awa("postgres://postgres@127.0.0.1:1/x", &["storage", "status"])
        .refused("could not connect to PostgreSQL at postgres://postgres@127.0.0.1:1/x");
    // A password never reaches the message.
    let run = awa(
        "postgres://postgres:s3cret@127.0.0.1:1/x",
        &["storage", "status"],
    );
    run.refused("could not connect to PostgreSQL at postgres://postgres:***@127.0.0.1:1/x");
    assert!(!run.stderr.contains("s3cret"), "{run:#?}");
    awa("postgres://postgres@127.0.0.1:1/x", &["job", "list"]).refused("could not connect");
    awa_bare(&["queue", "stats"]).refused("no database given");
}

#[tokio::test]
async fn newer_schema_is_refused_everywhere() {
    let db = migrated_db().await;
    let url = db.url();
    let mut conn = sqlx::PgConnection::connect(url).await.expect("connect");
    sqlx::query(
        "insert into awa.schema_version (version, description, checksum) values (999, 'future', 'x')",
    )
    .execute(&mut conn)
    .await
    .expect("pretend a newer binary migrated");
    conn.close().await.ok();

    let newer = "newer than the 1 this binary knows";
    awa(url, &["storage", "status"]).refused(newer);
    awa(url, &["migrate"]).refused(newer);
    awa(url, &prepare("custom_c", &[])).refused(newer);
    awa(url, &["job", "enqueue", "--queue", "q", "--kind", "k"]).refused(newer);
    awa(url, &["job", "list"]).refused(newer);
    awa(url, &["queue", "configure", "q", "--dlq", "on"]).refused(newer);
    awa(
        url,
        &[
            "worker",
            "run",
            "--queue",
            "q",
            "--handler",
            "noop",
            "--exit-when-idle",
        ],
    )
    .refused(newer);
    awa(url, &["maint", "run", "--once"]).refused(newer);

    let mut conn = sqlx::PgConnection::connect(url).await.expect("connect");
    let (versions, queues, jobs): (i64, i64, i64) = sqlx::query_as(
        "select (select count(*) from awa.schema_version), \
                (select count(*) from awa.queue_meta), \
                (select count(*) from awa.jobs)",
    )
    .fetch_one(&mut conn)
    .await
    .expect("count");
    assert_eq!((versions, queues, jobs), (2, 0, 0), "nothing was written");
    conn.close().await.ok();
}

#[tokio::test]
async fn unmigrated_database_is_refused_by_job_commands() {
    let db = awa_harness::TestDb::empty()
        .await
        .expect("an empty database");
    let url = db.url();
    awa(url, &["job", "list"]).refused("has not been migrated");
    awa(url, &["queue", "stats"]).refused("has not been migrated");
    let s = status(url);
    assert_eq!(s["schema_version"], Value::Null);
}
