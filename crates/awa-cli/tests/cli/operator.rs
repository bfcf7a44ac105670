//! The CLI on a real server, as an operator meets it: quiet logs, no
//! terminal codes or progress where nobody watches a terminal, relative
//! `--run-at`, the unique-key exit code, and a worker that stops by itself
//! when told to, without counting every unfinished job while it is busy.
//! Tests run the binary with piped stdout and stderr, i.e. not a terminal.

use crate::common;

use chrono::{DateTime, Utc};
use common::{Run, awa, awa_bare, enqueue, migrated_db, spawn_awa, worker_run};
use serde_json::Value;
use sqlx::Connection;
use std::time::Duration;

fn no_terminal_codes(run: &Run) {
    for (name, out) in [("stdout", &run.stdout), ("stderr", &run.stderr)] {
        assert!(
            !out.contains('\x1b'),
            "{name} holds an escape sequence though it is not a terminal: {run:#?}"
        );
    }
}

#[tokio::test]
async fn migrate_on_a_fresh_database_is_quiet() {
    let fresh = awa_harness::TestDb::empty()
        .await
        .expect("an empty database");
    let run = awa(fresh.url(), &["migrate"]);
    assert!(run.ok(), "{run:#?}");
    assert!(
        run.stderr.len() < 2048,
        "migrate wrote {} bytes to stderr: {}",
        run.stderr.len(),
        &run.stderr[..run.stderr.len().min(4000)]
    );
    no_terminal_codes(&run);

    // Louder, and still no escape codes on a pipe, and no migration
    // script quoted back.
    let fresh = awa_harness::TestDb::empty()
        .await
        .expect("an empty database");
    let run = awa(fresh.url(), &["-vv", "migrate"]);
    assert!(run.ok(), "{run:#?}");
    assert!(run.stderr.contains("applied"), "{run:#?}");
    assert!(
        run.stderr.len() < 16 * 1024,
        "-vv migrate wrote {} bytes to stderr",
        run.stderr.len()
    );
    no_terminal_codes(&run);
    let again = awa(fresh.url(), &["-v", "migrate"]);
    assert!(
        again.ok() && again.stdout.contains("up to date"),
        "{again:#?}"
    );
    no_terminal_codes(&again);
}

#[tokio::test]
async fn rust_log_replaces_the_default_filter() {
    let db = migrated_db().await;
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_awa"));
    cmd.env("RUST_LOG", "sqlx::query=debug")
        .env_remove("AWA_LOG")
        .env_remove("NO_COLOR")
        .args(["--database-url", db.url(), "queue", "stats"]);
    let out = cmd.output().expect("run awa");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(
        stderr.contains("sqlx::query"),
        "RUST_LOG=sqlx::query=debug: {stderr}"
    );
    assert!(!stderr.contains('\x1b'), "{stderr}");
    // Not even -vv shows statements without it.
    let quiet = awa(db.url(), &["-vv", "queue", "stats"]);
    assert!(
        quiet.ok() && !quiet.stderr.contains("sqlx::query"),
        "{quiet:#?}"
    );
}

#[tokio::test]
async fn json_output_is_never_mixed_with_progress() {
    let db = migrated_db().await;
    let url = db.url();
    // More than one enqueue round trip: the case that draws a bar on a
    // terminal.
    let out = awa(
        url,
        &[
            "job", "enqueue", "--queue", "bulk", "--kind", "k", "--count", "12000", "--json",
        ],
    );
    let value = out.json();
    assert_eq!(value["inserted"], 12000);
    no_terminal_codes(&out);
    let text = awa(
        url,
        &[
            "job", "enqueue", "--queue", "bulk", "--kind", "k", "--count", "6000",
        ],
    );
    assert!(text.ok() && text.stderr.is_empty(), "{text:#?}");

    let configured = awa(
        url,
        &[
            "queue",
            "configure",
            "doomed",
            "--dlq",
            "on",
            "--max-attempts",
            "1",
        ],
    );
    assert!(configured.ok(), "{configured:#?}");
    enqueue(url, "doomed", "k", 3);
    let run = awa(
        url,
        &worker_run("doomed", "fail", &["--exit-when-idle", "--json"]),
    );
    assert_eq!(run.json()["dead_lettered"], 3, "{run:#?}");
    let retried = awa(url, &["dlq", "retry", "--all", "--json"]);
    assert_eq!(
        retried.json()["retried"].as_array().map(Vec::len),
        Some(3),
        "{retried:#?}"
    );
    assert!(retried.stderr.is_empty(), "{retried:#?}");
    no_terminal_codes(&retried);
}

#[tokio::test]
async fn exit_when_idle_drains_without_counting_while_busy() {
    let db = migrated_db().await;
    let url = db.url();
    enqueue(url, "busy", "k", 600);
    // About 3 s of work: the old check counted live_jobs every 200 ms
    // throughout (some 15 times).
    let run = awa(
        url,
        &worker_run(
            "busy",
            "sleep:20",
            &["--concurrency", "4", "--exit-when-idle", "--json"],
        ),
    );
    let report = run.json();
    no_terminal_codes(&run);
    assert_eq!(report["completed"], 600, "{report}");
    let queries = report["idle_queries"].as_u64().expect("idle_queries");
    assert!(
        (2..=6).contains(&queries),
        "asked the database {queries} times whether it was idle: {report}"
    );
    assert_eq!(report["left_waiting"], 0);
    let stats = awa(url, &["queue", "stats", "busy", "--json"]).json();
    assert_eq!(stats["busy"]["completed"], 600, "{stats}");
}

fn enqueue_at(url: &str, queue: &str, run_at: &str) -> Value {
    awa(
        url,
        &[
            "job", "enqueue", "--queue", queue, "--kind", "k", "--run-at", run_at, "--json",
        ],
    )
    .json()
}

#[tokio::test]
async fn exit_when_drained_leaves_work_past_the_horizon() {
    let db = migrated_db().await;
    let url = db.url();
    enqueue(url, "q", "k", 5);
    let later = enqueue_at(url, "q", "+1h")["ids"][0].as_i64().unwrap();
    // Due within the horizon: waited for, and run.
    enqueue_at(url, "q", "+2s");
    let run = awa(
        url,
        &[
            "-v",
            "worker",
            "run",
            "--queue",
            "q",
            "--handler",
            "noop",
            "--exit-when-drained=10m",
            "--json",
        ],
    );
    let report = run.json();
    no_terminal_codes(&run);
    assert_eq!(report["completed"], 6, "{report}");
    assert_eq!(report["left_waiting"], 1, "{report}");
    assert!(
        run.stderr
            .contains("left waiting past the horizon: 1 scheduled job (next at"),
        "{run:#?}"
    );
    let job = awa(url, &["job", "dump", &later.to_string(), "--json"]).json();
    assert_eq!(job["state"], "scheduled", "{job}");

    // The default horizon (1m) leaves it too; text output says so.
    let run = awa(url, &worker_run("q", "noop", &["--exit-when-drained"]));
    assert!(
        run.ok()
            && run
                .stdout
                .contains("1 unfinished job(s) left waiting past the horizon"),
        "{run:#?}"
    );
    awa(url, &worker_run("q", "noop", &["--exit-when-drained=soon"])).refused("\"soon\"");
}

#[tokio::test]
async fn exit_when_idle_waits_for_scheduled_work_and_says_so() {
    let db = migrated_db().await;
    let url = db.url();
    let id = enqueue_at(url, "q", "+1h")["ids"][0].as_i64().unwrap();
    let mut worker = spawn_awa(
        url,
        &[
            "-v",
            "worker",
            "run",
            "--queue",
            "q",
            "--handler",
            "noop",
            "--exit-when-idle",
            "--json",
        ],
    );
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert!(
        !worker.exited(),
        "--exit-when-idle stopped with a job still scheduled"
    );
    worker.terminate();
    let run = worker.finish();
    let report = run.json();
    assert_eq!(report["completed"], 0, "{report}");
    assert!(
        run.stderr.contains("waiting for 1 scheduled job (next at"),
        "{run:#?}"
    );
    // Said once, not on every check.
    assert_eq!(run.stderr.matches("waiting for").count(), 1, "{run:#?}");
    let job = awa(url, &["job", "dump", &id.to_string(), "--json"]).json();
    assert_eq!(job["state"], "scheduled");
}

#[tokio::test]
async fn run_at_takes_relative_times() {
    let db = migrated_db().await;
    let url = db.url();
    let before = Utc::now();
    let id = enqueue_at(url, "later", "+10m")["ids"][0].as_i64().unwrap();
    let job = awa(url, &["job", "dump", &id.to_string(), "--json"]).json();
    assert_eq!(job["state"], "scheduled", "{job}");
    let at: DateTime<Utc> = job["at"].as_str().unwrap().parse().expect("a time");
    let ahead = (at - before).num_seconds();
    assert!(
        (590..=620).contains(&ahead),
        "+10m scheduled {ahead}s ahead: {job}"
    );
    for spec in ["2h", "90s"] {
        let out = enqueue_at(url, "later", spec);
        assert_eq!(out["scheduled"], 1, "{spec}: {out}");
    }
    let absolute = enqueue_at(url, "later", "2999-12-01T10:00:00Z");
    assert_eq!(absolute["scheduled"], 1);
    for bad in ["+10 parsecs", "tomorrow", "2026-13-01T10:00:00Z"] {
        awa(
            url,
            &[
                "job", "enqueue", "--queue", "later", "--kind", "k", "--run-at", bad,
            ],
        )
        .refused(&format!("--run-at {bad:?}"));
    }
}

#[tokio::test]
async fn taken_unique_key_has_its_own_exit_code() {
    let db = migrated_db().await;
    let url = db.url();
    let args = [
        "job",
        "enqueue",
        "--queue",
        "u",
        "--kind",
        "k",
        "--unique-key",
        "nightly",
        "--json",
    ];
    let holder = awa(url, &args).json()["ids"][0].as_i64().unwrap();
    let again = awa(url, &args);
    assert_eq!(again.code, Some(3), "{again:#?}");
    let refusal: Value = serde_json::from_str(&again.stdout).expect("JSON on stdout");
    assert_eq!(refusal["held_by"], holder, "{refusal}");
    assert_eq!(refusal["exit_code"], 3, "{refusal}");
    // Copies of one enqueue share the key among themselves: not a refusal.
    let copies = awa(
        url,
        &[
            "job",
            "enqueue",
            "--queue",
            "u",
            "--kind",
            "k",
            "--unique-key",
            "batch",
            "--count",
            "3",
            "--json",
        ],
    );
    assert_eq!(copies.json()["inserted"], 1, "{copies:#?}");
    // Other failures keep exit code 1, command-line errors clap's 2.
    assert_eq!(awa(url, &["job", "dump", "999999"]).code, Some(1));
    assert_eq!(awa(url, &["job", "enqueue", "--bogus"]).code, Some(2));
}

/// Jobs, schedules and queue settings, as counts.
async fn written(conn: &mut sqlx::PgConnection) -> (i64, i64, i64) {
    sqlx::query_as(
        "SELECT (SELECT count(*) FROM awa.jobs), (SELECT count(*) FROM awa.cron_jobs), \
                (SELECT count(*) FROM awa.queue_meta)",
    )
    .fetch_one(conn)
    .await
    .unwrap()
}

/// Every value the CLI checks after clap parsed the command line is a bad
/// command line too: exit code 2 like clap's own refusals, a message that
/// names what was wrong, and nothing written. What fails for other reasons
/// (a name already taken, a file that cannot be read, an unknown job) keeps
/// exit code 1.
#[tokio::test]
async fn values_refused_after_parsing_exit_2_and_write_nothing() {
    let db = migrated_db().await;
    let url = db.url();
    let mut conn = sqlx::PgConnection::connect(url).await.unwrap();
    let enqueue = |extra: &[&'static str]| {
        let mut args = vec!["job", "enqueue", "--queue", "q", "--kind", "k"];
        args.extend_from_slice(extra);
        args
    };
    let cron = |expr: &'static str, zone: &'static str| {
        vec![
            "cron",
            "add",
            "n",
            "--cron",
            expr,
            "--timezone",
            zone,
            "--queue",
            "q",
            "--kind",
            "k",
        ]
    };
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (enqueue(&["--args", "{bad"]), "--args is not valid JSON"),
        (
            enqueue(&["--metadata", "["]),
            "--metadata is not valid JSON",
        ),
        (enqueue(&["--run-at", "tomorrowish"]), "--run-at"),
        (enqueue(&["--priority", "9"]), "priority"),
        (
            vec!["job", "enqueue", "--queue", "", "--kind", "k"],
            "queue",
        ),
        (vec!["job", "enqueue", "--queue", "q", "--kind", ""], "kind"),
        (vec!["job", "list", "--state", "bogus"], "bogus"),
        (vec!["job", "list", "--limit", "0"], "limit"),
        (vec!["job", "dump", "0"], "job id"),
        (vec!["job", "cancel", "-5"], "job id"),
        (
            vec!["queue", "configure", "q", "--priority-aging", "banana"],
            "--priority-aging",
        ),
        (
            vec!["worker", "run", "--queue", "q", "--handler", "bogus"],
            "--handler",
        ),
        (
            vec!["worker", "run", "--queue", "q", "--exit-when-drained=soon"],
            "--exit-when-drained",
        ),
        (
            vec!["maint", "run", "--rotate-interval", "forever"],
            "--rotate-interval",
        ),
        (
            vec!["serve", "--pinned-alert-after", "x"],
            "--pinned-alert-after",
        ),
        (cron("61 * * * *", "UTC"), "61 * * * *"),
        (cron("* * * * *", "Mars/Base"), "Mars/Base"),
        (
            cron("* * * * *", "UTC")
                .into_iter()
                .chain(["--priority", "0"])
                .collect(),
            "priority",
        ),
        (vec!["cron", "pause", "not a name!"], "not a name!"),
        (vec!["storage", "configure"], "nothing to change"),
        (
            vec!["storage", "configure", "--history-retention", "soon"],
            "--history-retention",
        ),
        (
            vec!["--schema", "Bad-Schema!", "queue", "stats"],
            "Bad-Schema!",
        ),
        (vec!["dlq", "list", "--queue", ""], "queue"),
    ];
    let before = written(&mut conn).await;
    for (args, needle) in &cases {
        awa(url, args).usage(needle);
    }
    // The URL itself and its absence.
    awa("mysql://u@h/db", &["queue", "stats"]).usage("not a postgres");
    awa_bare(&["queue", "stats"]).usage("no database given");
    assert_eq!(written(&mut conn).await, before, "nothing was written");

    // Failures that are not the command line's keep exit code 1.
    let add = cron("0 3 * * *", "UTC");
    assert!(awa(url, &add).ok());
    let again = awa(url, &add);
    again.refused("already exists");
    assert_eq!(again.code, Some(1), "{again:#?}");
    let missing = awa(url, &enqueue(&["--args-file", "/no/such/args.json"]));
    missing.refused("/no/such/args.json");
    assert_eq!(missing.code, Some(1), "{missing:#?}");
    assert_eq!(awa(url, &["cron", "pause", "nope"]).code, Some(1));
}
