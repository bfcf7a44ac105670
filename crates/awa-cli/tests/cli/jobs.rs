//! The job-path commands, run as the `awa` binary against real PostgreSQL.

use crate::common;

use common::{Run, awa, awa_stdin, enqueue, migrated_db, spawn_awa, worker_run};
use serde_json::{Value, json};
use sqlx::Connection;

fn count(stats: &Value, queue: &str, state: &str) -> i64 {
    stats[queue][state]
        .as_i64()
        .unwrap_or_else(|| panic!("no {queue}.{state} in {stats}"))
}

fn stats(url: &str) -> Value {
    awa(url, &["queue", "stats", "--json"]).json()
}

#[tokio::test]
async fn enqueue_then_stats_list_dump_cancel() {
    let db = migrated_db().await;
    let url = db.url();

    let out = awa(
        url,
        &[
            "job",
            "enqueue",
            "--queue",
            "emails",
            "--kind",
            "send",
            "--args",
            r#"{"to":"a@example.com"}"#,
            "--priority",
            "3",
            "--max-attempts",
            "7",
            "--metadata",
            r#"{"trace":"t1"}"#,
            "--json",
        ],
    )
    .json();
    assert_eq!(out["inserted"], 1);
    assert_eq!(out["existing"], json!([]));
    let id = out["ids"][0].as_i64().expect("an id");

    let later = awa(
        url,
        &[
            "job",
            "enqueue",
            "--queue",
            "emails",
            "--kind",
            "send",
            "--run-at",
            "2099-12-01T10:00:00Z",
            "--json",
        ],
    )
    .json();
    assert_eq!(later["scheduled"], 1);

    let s = stats(url);
    assert_eq!(count(&s, "emails", "available"), 1);
    assert_eq!(count(&s, "emails", "scheduled"), 1);
    for state in [
        "retryable",
        "snoozed",
        "running",
        "completed",
        "failed",
        "cancelled",
        "dead_lettered",
    ] {
        assert_eq!(count(&s, "emails", state), 0, "zeros are shown");
    }
    let text = awa(url, &["queue", "stats", "emails"]);
    assert!(
        text.ok() && text.stdout.contains("dead_lettered"),
        "{text:#?}"
    );

    let listed = awa(
        url,
        &[
            "job",
            "list",
            "--queue",
            "emails",
            "--state",
            "available",
            "--json",
        ],
    )
    .json();
    assert_eq!(listed.as_array().map(Vec::len), Some(1), "{listed}");
    assert_eq!(listed[0]["id"], id);
    let table = awa(url, &["job", "list"]);
    assert!(table.ok() && table.stdout.starts_with("ID"), "{table:#?}");

    let job = awa(url, &["job", "dump", &id.to_string(), "--json"]).json();
    assert_eq!(job["kind"], "send");
    assert_eq!(job["args"], json!({"to": "a@example.com"}));
    assert_eq!(job["priority"], 3);
    assert_eq!(job["max_attempts"], 7);
    assert_eq!(job["metadata"], json!({"trace": "t1"}));
    assert_eq!(job["state"], "available");
    let text = awa(url, &["job", "dump", &id.to_string()]);
    assert!(
        text.ok() && text.stdout.contains("state: available"),
        "{text:#?}"
    );

    // A unique key held by a live job is refused with exit code 3,
    // naming the holder.
    let enqueue_unique = |json: bool| {
        let mut args = vec![
            "job",
            "enqueue",
            "--queue",
            "emails",
            "--kind",
            "k",
            "--unique-key",
            "u1",
        ];
        if json {
            args.push("--json");
        }
        awa(url, &args)
    };
    let first = enqueue_unique(true).json();
    let holder = first["ids"][0].clone();
    let again = enqueue_unique(true);
    again.refused(&format!("held by unfinished job {holder}"));
    assert_eq!(again.code, Some(3), "{again:#?}");
    let refusal: serde_json::Value = serde_json::from_str(&again.stdout).expect("JSON");
    assert_eq!(refusal["held_by"], holder, "{refusal}");
    assert_eq!(refusal["unique_key"], "u1", "{refusal}");
    let text = enqueue_unique(false);
    text.refused(&format!(
        "unique key \"u1\" is already held by unfinished job {holder}"
    ));
    assert_eq!(text.code, Some(3), "{text:#?}");
    assert!(text.stdout.is_empty(), "{text:#?}");

    let cancelled = awa(url, &["job", "cancel", &id.to_string(), "--json"]).json();
    assert_eq!(cancelled["cancelled_from"], "available");
    awa(url, &["job", "cancel", &id.to_string()]).refused("no unfinished job with id");
    assert_eq!(count(&stats(url), "emails", "cancelled"), 1);
}

#[tokio::test]
async fn bad_input_is_refused_and_writes_nothing() {
    let db = migrated_db().await;
    let url = db.url();
    let mut conn = sqlx::PgConnection::connect(url).await.expect("connect");
    sqlx::query("create table t (x int)")
        .execute(&mut conn)
        .await
        .expect("create t");

    let base = ["job", "enqueue", "--queue", "q", "--kind", "k"];
    let with = |extra: &[&str]| -> Run {
        let mut args = base.to_vec();
        args.extend_from_slice(extra);
        awa(url, &args)
    };
    awa(
        url,
        &[
            "job",
            "enqueue",
            "--queue",
            "x'; drop table t; --",
            "--kind",
            "k",
        ],
    )
    .refused("invalid queue name");
    with(&["--args", "{not json"]).refused("--args is not valid JSON");
    with(&["--metadata", "{not json"]).refused("--metadata is not valid JSON");
    with(&["--args", r#"{"a": "x\u0000"}"#]).refused("NUL character");
    with(&["--metadata", r#"{"a\u0000": 1}"#]).refused("NUL character");
    with(&["--priority", "0"]).refused("priority must be between 1 and 4");
    with(&["--priority", "9"]).refused("priority must be between 1 and 4");
    with(&["--run-at", "tomorrow"]).refused("2026-12-01T10:00:00Z");
    with(&["--max-attempts", "0"]).refused("max attempts must be between 1 and 1000");
    with(&["--max-attempts", "-3"]).refused("max attempts must be between 1 and 1000");
    with(&["--count", "0"]).refused("count must be between 1 and 1000000");
    with(&["--count", "1000001"]).refused("count must be between 1 and 1000000");
    awa(url, &["job", "dump", "424242"]).refused("no job with id 424242 in schema awa");
    awa(url, &["job", "cancel", "424242"]).refused("no unfinished job with id 424242");
    awa(url, &["job", "dump", "-1"]).refused("job id");
    awa(url, &["job", "list", "--state", "done"]).refused("expected one of available");
    awa(url, &["job", "list", "--limit", "10001"]).refused("limit");
    awa(url, &["queue", "configure", "q", "--shards", "0"]).refused("shard count");
    awa(
        url,
        &["queue", "configure", "q", "--priority-aging", "soon"],
    )
    .refused("not a duration");
    awa(url, &["queue", "configure", "q", "--pause", "--resume"]).refused("cannot be used with");
    awa(url, &["queue", "configure", "q", "--priority-aging", "1ms"]).refused("at least 1s");
    awa(url, &["queue", "configure", "q", "--dlq-retention", "0s"]).refused("at least 1s");
    awa(url, &["queue", "configure", "q", "--max-attempts", "-3"]).refused("max attempts");
    awa(
        url,
        &["worker", "run", "--queue", "q", "--handler", "explode"],
    )
    .refused("invalid --handler");
    awa(url, &["dlq", "retry", "--id", "1", "--all"]).refused("cannot be used with");
    awa(url, &["dlq", "purge", "--id", "1", "--queue", "q"]).refused("cannot be used with");
    awa(url, &["dlq", "purge"]).refused("required");

    // --json errors are JSON on stdout too.
    let refused = awa(
        url,
        &[
            "job",
            "enqueue",
            "--queue",
            "q",
            "--kind",
            "k",
            "--priority",
            "0",
            "--json",
        ],
    );
    let err: Value = serde_json::from_str(refused.stdout.trim()).expect("JSON error");
    assert!(
        err["error"]
            .as_str()
            .is_some_and(|e| e.contains("priority")),
        "{err}"
    );

    assert_eq!(stats(url), json!({}), "nothing was written");
    assert_eq!(awa(url, &["job", "list", "--json"]).json(), json!([]));
    assert_eq!(
        awa(url, &["queue", "stats", "q", "--json"]).json()["q"]["available"],
        0
    );
    let t_exists: bool = sqlx::query_scalar("select to_regclass('public.t') is not null")
        .fetch_one(&mut conn)
        .await
        .expect("look up t");
    assert!(t_exists);
    conn.close().await.ok();
}

#[tokio::test]
async fn count_enqueues_in_one_transaction() {
    let db = migrated_db().await;
    let url = db.url();
    let out = enqueue(url, "bulk", "k", 1000);
    let ids = out["ids"].as_array().expect("ids");
    assert_eq!(ids.len(), 1000);
    let distinct: std::collections::HashSet<_> = ids.iter().map(|v| v.as_i64()).collect();
    assert_eq!(distinct.len(), 1000);
    assert_eq!(out["inserted"], 1000);
    assert_eq!(count(&stats(url), "bulk", "available"), 1000);
    let text = awa(
        url,
        &[
            "job", "enqueue", "--queue", "bulk", "--kind", "k", "--count", "3",
        ],
    );
    assert!(
        text.ok() && text.stdout.contains("enqueued 3 jobs"),
        "{text:#?}"
    );
}

#[tokio::test]
async fn noop_worker_drains_every_queue() {
    let db = migrated_db().await;
    let url = db.url();
    enqueue(url, "a", "one", 300);
    enqueue(url, "b", "two", 20);
    let run = awa(
        url,
        &[
            "worker",
            "run",
            "--queue",
            "a",
            "--queue",
            "b",
            "--handler",
            "noop",
            "--concurrency",
            "16",
            "--exit-when-idle",
            "--json",
        ],
    )
    .json();
    assert_eq!(run["completed"], 320, "{run}");
    let s = stats(url);
    assert_eq!(count(&s, "a", "completed"), 300);
    assert_eq!(count(&s, "b", "completed"), 20);
    assert_eq!(count(&s, "a", "available") + count(&s, "a", "running"), 0);
}

#[tokio::test]
async fn fail_first_completes_on_the_second_attempt() {
    let db = migrated_db().await;
    let url = db.url();
    let out = enqueue(url, "flaky", "k", 3);
    let run = awa(
        url,
        &worker_run("flaky", "fail-first:1", &["--exit-when-idle", "--json"]),
    )
    .json();
    assert_eq!(run["retried"], 3, "{run}");
    assert_eq!(run["completed"], 3, "{run}");
    assert_eq!(count(&stats(url), "flaky", "completed"), 3);
    let id = out["ids"][0].as_i64().expect("an id").to_string();
    let job = awa(url, &["job", "dump", &id, "--json"]).json();
    assert_eq!(job["state"], "completed");
    assert_eq!(job["attempt"], 2);
}

#[tokio::test]
async fn dead_letter_list_retry_purge() {
    let db = migrated_db().await;
    let url = db.url();
    let settings = awa(
        url,
        &["queue", "configure", "doomed", "--dlq", "on", "--json"],
    )
    .json();
    assert_eq!(settings["dlq_enabled"], true);
    let out = awa(
        url,
        &[
            "job",
            "enqueue",
            "--queue",
            "doomed",
            "--kind",
            "k",
            "--max-attempts",
            "1",
            "--json",
        ],
    )
    .json();
    let id = out["ids"][0].as_i64().expect("an id");
    let fail = [
        "worker",
        "run",
        "--queue",
        "doomed",
        "--handler",
        "fail",
        "--exit-when-idle",
        "--json",
    ];

    let run = awa(url, &fail).json();
    assert_eq!(run["dead_lettered"], 1, "{run}");
    let listed = awa(url, &["dlq", "list", "--json"]).json();
    assert_eq!(listed[0]["job_id"], id, "{listed}");
    assert_eq!(listed[0]["last_error"], "fail handler always fails");
    assert_eq!(count(&stats(url), "doomed", "dead_lettered"), 1);

    awa(url, &["dlq", "retry", "--id", "424242"]).refused("no dead-lettered job with id 424242");
    let retried = awa(url, &["dlq", "retry", "--id", &id.to_string(), "--json"]).json();
    assert_eq!(retried["retried"], json!([id]));
    let s = stats(url);
    assert_eq!(count(&s, "doomed", "available"), 1);
    assert_eq!(count(&s, "doomed", "dead_lettered"), 0);
    assert_eq!(awa(url, &["dlq", "list", "--json"]).json(), json!([]));

    let run = awa(url, &fail).json();
    assert_eq!(run["dead_lettered"], 1, "{run}");
    let purged = awa(
        url,
        &["dlq", "purge", "--all", "--queue", "doomed", "--json"],
    )
    .json();
    assert_eq!(purged["purged"], json!([id]));
    assert_eq!(awa(url, &["dlq", "list", "--json"]).json(), json!([]));
    // The queue has no jobs left at all; naming it still shows its zeros.
    let s = awa(url, &["queue", "stats", "doomed", "--json"]).json();
    assert_eq!(count(&s, "doomed", "dead_lettered"), 0);
}

#[tokio::test]
async fn maint_once_reports_each_task() {
    let db = migrated_db().await;
    let url = db.url();
    let out = awa(url, &["maint", "run", "--once", "--json"]).json();
    assert_eq!(out["promote"]["outcome"], "idle", "{out}");
}

#[tokio::test]
async fn queue_configure_round_trip() {
    let db = migrated_db().await;
    let url = db.url();
    let s = awa(
        url,
        &[
            "queue",
            "configure",
            "tuned",
            "--dlq",
            "on",
            "--max-attempts",
            "3",
            "--shards",
            "4",
            "--priority-aging",
            "5m",
            "--dlq-retention",
            "2h",
            "--pause",
            "--json",
        ],
    )
    .json();
    assert_eq!(s["dlq_enabled"], true);
    assert_eq!(s["max_attempts"], 3);
    assert_eq!(s["shard_count"], 4);
    assert_eq!(s["priority_aging_secs"], 300.0);
    assert_eq!(s["dlq_retention_secs"], 7200.0);
    assert_eq!(s["paused"], true);
    let s = awa(
        url,
        &[
            "queue",
            "configure",
            "tuned",
            "--resume",
            "--priority-aging",
            "off",
            "--json",
        ],
    )
    .json();
    assert_eq!(s["paused"], false);
    assert_eq!(s["priority_aging_secs"], Value::Null);
    assert_eq!(s["max_attempts"], 3, "unnamed settings are kept");

    // The queue default applies to jobs enqueued without --max-attempts.
    let out = awa(
        url,
        &[
            "job", "enqueue", "--queue", "tuned", "--kind", "k", "--json",
        ],
    )
    .json();
    let id = out["ids"][0].as_i64().expect("an id").to_string();
    assert_eq!(
        awa(url, &["job", "dump", &id, "--json"]).json()["max_attempts"],
        3
    );
}

#[tokio::test]
async fn aging_off_on_a_new_queue_leaves_it_claimable() {
    let db = migrated_db().await;
    let url = db.url();
    let s = awa(
        url,
        &[
            "queue",
            "configure",
            "plain",
            "--priority-aging",
            "off",
            "--json",
        ],
    )
    .json();
    assert_eq!(s["priority_aging_secs"], Value::Null, "{s}");
    awa(
        url,
        &[
            "job", "enqueue", "--queue", "plain", "--kind", "k", "--json",
        ],
    )
    .json();
    let run = awa(
        url,
        &worker_run(
            "plain",
            "noop",
            &["--exit-when-idle", "--no-maintenance", "--json"],
        ),
    )
    .json();
    assert_eq!(run["completed"], 1, "{run}");
}

#[tokio::test]
async fn worker_stops_gracefully_on_sigterm() {
    let db = migrated_db().await;
    let url = db.url();
    enqueue(url, "slow", "k", 4);
    let worker = spawn_awa(url, &worker_run("slow", "sleep:300", &["--json"]));
    // Wait until the jobs are done; without --exit-when-idle it keeps serving.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while count(
        &awa(url, &["queue", "stats", "slow", "--json"]).json(),
        "slow",
        "completed",
    ) < 4
    {
        assert!(
            std::time::Instant::now() < deadline,
            "jobs did not complete"
        );
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    worker.terminate();
    let run = worker.finish().json();
    assert_eq!(run["completed"], 4, "{run}");
}

/// Arguments beyond what a command line can carry (128 KiB) come from a
/// file or stdin; arguments over the substrate's job size limit are refused
/// with a clear message and write nothing.
#[tokio::test]
async fn large_args_from_a_file_or_stdin_and_oversized_args_are_refused() {
    let db = migrated_db().await;
    let url = db.url();
    let blob = |bytes: usize| format!(r#"{{"blob":"{}"}}"#, "ab".repeat(bytes / 2));
    let dir = std::env::temp_dir().join(format!("awa-cli-args-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let big = dir.join("big.json");
    std::fs::write(&big, blob(200 * 1024)).unwrap();
    let huge = dir.join("huge.json");
    std::fs::write(&huge, blob(1536 * 1024)).unwrap();
    let base = ["job", "enqueue", "--queue", "big", "--kind", "k", "--json"];
    let with = |extra: &[&str]| -> Vec<String> {
        base.iter().chain(extra).map(|s| s.to_string()).collect()
    };
    let run = |extra: &[&str]| {
        let args = with(extra);
        awa(url, &args.iter().map(String::as_str).collect::<Vec<_>>())
    };
    let run_stdin = |extra: &[&str], input: String| {
        let args = with(extra);
        awa_stdin(
            url,
            &args.iter().map(String::as_str).collect::<Vec<_>>(),
            input.into_bytes(),
        )
    };
    let (big_path, huge_path) = (big.to_str().unwrap(), huge.to_str().unwrap());

    let from_file = run(&["--args-file", big_path]).json();
    assert_eq!(from_file["inserted"], 1, "{from_file}");
    let id = from_file["ids"][0].as_i64().unwrap();
    let dumped = awa(url, &["job", "dump", &id.to_string(), "--json"]).json();
    assert_eq!(
        dumped["args"]["blob"].as_str().map(str::len),
        Some(200 * 1024),
        "the args arrive whole"
    );

    let from_stdin = run_stdin(&["--args", "-"], blob(300 * 1024));
    assert_eq!(from_stdin.json()["inserted"], 1, "{from_stdin:#?}");

    // Over the limit: refused, saying what and what to do; nothing written.
    run(&["--args-file", huge_path])
        .refused("over the limit of 1048576 bytes")
        .refused("pass a reference");
    run_stdin(&["--args", "-"], blob(1536 * 1024)).refused("over the limit of 1048576 bytes");
    run(&["--args-file", huge_path, "--count", "3"]).refused("over the limit");

    // Bad sources are refused before connecting.
    run(&["--args", "{}", "--args-file", big_path]).refused("cannot be used with");
    run(&["--args-file", dir.join("none.json").to_str().unwrap()])
        .refused("could not open --args-file");
    run_stdin(&["--args", "-"], "{not json".into()).refused("--args - is not valid JSON");

    let mut conn = sqlx::PgConnection::connect(url).await.expect("connect");
    let jobs: i64 = sqlx::query_scalar("SELECT count(*) FROM awa.jobs WHERE queue = 'big'")
        .fetch_one(&mut conn)
        .await
        .unwrap();
    assert_eq!(jobs, 2, "only the two accepted jobs exist");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// `job enqueue --priority` then `worker run --concurrency 1`: priority 1
/// runs first, 4 last, enqueue order within a priority (ADR 12). The old
/// code ran 4,4,4,2,2,2,1,1,1.
#[tokio::test]
async fn cli_jobs_run_priority_one_first() {
    let db = migrated_db().await;
    let url = db.url();
    let mixed = ["4", "2", "1", "4", "2", "1", "4", "2", "1"];
    for (n, p) in mixed.iter().enumerate() {
        let kind = format!("n{n}");
        let run = awa(
            url,
            &[
                "job",
                "enqueue",
                "--queue",
                "cliprio",
                "--kind",
                &kind,
                "--priority",
                p,
            ],
        );
        assert!(run.ok(), "{run:?}");
    }
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("ran.log");
    let handler = format!("chaos:{}", log.display());
    let run = awa(
        url,
        &worker_run(
            "cliprio",
            &handler,
            &["--concurrency", "1", "--exit-when-idle", "--no-maintenance"],
        ),
    );
    assert!(run.ok(), "{run:?}");
    let ran: Vec<String> = std::fs::read_to_string(&log)
        .unwrap()
        .lines()
        .map(|l| l.split_whitespace().nth(3).unwrap().to_string())
        .collect();
    let mut expected: Vec<(&str, usize)> = mixed.iter().copied().zip(0..).collect();
    expected.sort();
    let expected: Vec<String> = expected.iter().map(|(_, n)| format!("n{n}")).collect();
    assert_eq!(ran, expected);
}
