//! Issue 36, item 1: a value the producer accepts that readers cannot
//! decode. `awa.enqueue(..., ARRAY['infinity'::timestamptz], ...)` used to
//! be accepted, and `job list` and `job dump` then panicked in chrono
//! (`NaiveDateTime + TimeDelta overflowed`, inside sqlx's decoding).
//!
//! Now the producer refuses such a time, and every reader copes with
//! whatever a table holds anyway (rows written before the bound, or by a
//! superuser): here every `timestamptz` column of schema `awa` is set to
//! each extreme PostgreSQL accepts (infinity, -infinity, 294276 AD,
//! 4714 BC, ...), then every interval column, then every integer column
//! no index uses, and each reading command runs, plain and `--json`: it
//! succeeds, a value it cannot show as a time is shown raw with a warning,
//! and nothing panics.

use crate::common;

use awa_core::{QueueName, SchemaName};
use awa_exec::{ExecPlane, Frontier, PgExecPlane};
use common::{Run, awa, migrated_db, spawn_awa, worker_run};
use sqlx::{Connection, PgConnection};
use std::time::Duration;

fn enqueue(url: &str, queue: &str, extra: &[&str]) -> i64 {
    let mut argv = vec![
        "job", "enqueue", "--queue", queue, "--kind", "k", "--args", "{}", "--json",
    ];
    argv.extend_from_slice(extra);
    awa(url, &argv).json()["ids"][0].as_i64().unwrap()
}

fn no_panic(what: &str, run: &Run) {
    assert!(
        run.ok() && !run.stderr.contains("panicked") && !run.stderr.contains("RUST_BACKTRACE"),
        "{what}: {run:#?}"
    );
}

/// Every command that reads job rows, queue state, dead letters, cron or
/// storage: each must succeed. Returns the runs of `job list --json` and
/// `job dump ID --json` for each id, for the caller to look into.
///
/// With `lost_ok`, `job dump` may also say the job is not found: integers
/// written over the columns that tie a job's rows together (a run lease,
/// an attempt) make its parts no longer match, which is not a decoding
/// failure.
fn read_everything(url: &str, ids: &[i64], when: &str, lost_ok: bool) -> Vec<(String, Run)> {
    let mut runs = Vec::new();
    let mut commands: Vec<Vec<String>> = [
        &["job", "list"][..],
        &["job", "list", "--queue", "q"],
        &["job", "list", "--state", "scheduled"],
        &["job", "list", "--state", "failed"],
        &["job", "list", "--kind", "k", "--args-contains", "{}"],
        &["queue", "stats"],
        &["dlq", "list"],
        &["cron", "list"],
        &["storage", "status"],
        &[
            "job",
            "retry",
            "--queue",
            "f",
            "--state",
            "failed",
            "--dry-run",
        ],
        &[
            "job",
            "cancel",
            "--queue",
            "q",
            "--state",
            "available",
            "--dry-run",
        ],
    ]
    .iter()
    .map(|c| c.iter().map(|s| s.to_string()).collect())
    .collect();
    for id in ids {
        commands.push(vec!["job".into(), "dump".into(), id.to_string()]);
    }
    for plain in commands {
        let mut json = plain.clone();
        json.push("--json".into());
        for argv in [plain, json] {
            let args: Vec<&str> = argv.iter().map(String::as_str).collect();
            let run = awa(url, &args);
            let what = format!("{when}: awa {}", argv.join(" "));
            let lost = run.code == Some(1) && run.stderr.contains("no job with id");
            if !(lost_ok && argv[1] == "dump" && lost) {
                no_panic(&what, &run);
            } else {
                assert!(!run.stderr.contains("panicked"), "{what}: {run:#?}");
                continue;
            }
            if argv.last().map(String::as_str) == Some("--json") {
                let _ = run.json();
            }
            runs.push((argv.join(" "), run));
        }
    }
    runs
}

#[tokio::test]
async fn every_reader_shows_every_extreme_a_table_can_hold() {
    let db = migrated_db().await;
    let url = db.url();
    // Work in every state: waiting, scheduled, running, failed, dead
    // lettered, completed; a cron schedule.
    let available = enqueue(url, "q", &[]);
    let scheduled = enqueue(url, "q", &["--run-at", "+1h"]);
    let failed = enqueue(url, "f", &["--max-attempts", "1"]);
    let dead = enqueue(url, "d", &["--max-attempts", "1"]);
    assert!(awa(url, &["queue", "configure", "d", "--dlq", "on"]).ok());
    let done = enqueue(url, "c", &[]);
    for (queue, handler) in [("f", "fail"), ("d", "fail"), ("c", "noop")] {
        let worker = spawn_awa(url, &worker_run(queue, handler, &["--exit-when-idle"]));
        assert!(worker.finish().ok());
    }
    let running = enqueue(url, "r", &[]);
    let mut conn = PgConnection::connect(url).await.unwrap();
    let exec = PgExecPlane::new(SchemaName::new("awa").unwrap());
    let mut frontier = Frontier::default();
    let r = QueueName::new("r").unwrap();
    let mut claimed = Vec::new();
    for _ in 0..200 {
        claimed.extend(
            exec.claim(&mut conn, &r, 1, &mut frontier, None)
                .await
                .unwrap(),
        );
        if !claimed.is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(claimed.len(), 1);
    assert!(
        exec.heartbeat(
            &mut conn,
            &claimed[0].token,
            &awa_exec::Progress {
                percent: Some(50),
                message: Some("half".into()),
                checkpoint: Some(serde_json::json!({"at": 1})),
            },
        )
        .await
        .unwrap()
    );
    assert!(
        awa(
            url,
            &[
                "cron",
                "add",
                "nightly",
                "--cron",
                "0 3 * * *",
                "--queue",
                "q",
                "--kind",
                "k"
            ]
        )
        .ok()
    );
    let ids = [available, scheduled, failed, dead, done, running];
    read_everything(url, &ids, "before", false);

    for value in awa_harness::extremes::TIMESTAMPTZ {
        let (written, refused) = awa_harness::extremes::write_every_column(
            &mut conn,
            &["awa"],
            "timestamp with time zone",
            value,
            false,
        )
        .await
        .unwrap();
        // The schedules' times are held by a CHECK (the runtime role may
        // write the table by SQL): only times Awa accepts go in.
        // Every extreme here is outside 1970..10000.
        for column in ["fire_from", "last_tick", "created_at"] {
            let name = format!("awa.cron_jobs.{column}");
            assert!(
                refused.iter().any(|r| r.starts_with(&name)),
                "{name} = {value} was written: {written:?}"
            );
        }
        for must in [
            "awa.ready_entries.created_at",
            "awa.ready_entries.ready_at",
            "awa.deferred_jobs.run_at",
            "awa.failure_entries.finalized_at",
            "awa.dlq_entries.dead_at",
            "awa.claim_batches.claimed_at",
        ] {
            assert!(
                written.iter().any(|w| w == must),
                "{must} not in {written:?}"
            );
        }
        let runs = read_everything(url, &ids, value, false);
        // A value chrono cannot hold is shown raw (as PostgreSQL prints
        // it), with a warning.
        let raw = (!value.ends_with("BC") && !value.starts_with("1969")).then_some(*value);
        if let Some(raw) = raw {
            let (_, list) = runs.iter().find(|(c, _)| c == "job list --json").unwrap();
            assert!(list.stdout.contains(&format!("\"{raw}\"")), "{list:#?}");
            let (_, dump) = runs
                .iter()
                .find(|(c, _)| *c == format!("job dump {available}"))
                .unwrap();
            assert!(
                dump.stdout.contains(raw) && dump.stderr.contains("warning"),
                "{dump:#?}"
            );
        }
        if value.starts_with("294276") {
            let (_, list) = runs.iter().find(|(c, _)| c == "job list").unwrap();
            assert!(
                list.stdout.contains("294276-12-31 23:59:59.999999+00"),
                "{list:#?}"
            );
        }
    }
    for value in awa_harness::extremes::INTERVAL {
        awa_harness::extremes::write_every_column(&mut conn, &["awa"], "interval", value, false)
            .await
            .unwrap();
        read_everything(url, &ids, value, false);
    }
    for (ty, max) in [
        ("smallint", "32767"),
        ("smallint", "-32768"),
        ("integer", "2147483647"),
        ("integer", "-2147483648"),
        ("bigint", "9223372036854775807"),
        ("bigint", "-9223372036854775808"),
    ] {
        awa_harness::extremes::write_every_column(&mut conn, &["awa"], ty, max, true)
            .await
            .unwrap();
        read_everything(url, &ids, &format!("{ty} {max}"), true);
    }
}

/// The producer refuses a time outside 1970..10000 with the contract's
/// SQLSTATE, a message naming the value and a hint, writing nothing; so
/// does the CLI, before connecting.
#[tokio::test]
async fn producers_refuse_a_time_readers_could_not_show() {
    let db = migrated_db().await;
    let url = db.url();
    let mut conn = PgConnection::connect(url).await.unwrap();
    for value in [
        "infinity",
        "-infinity",
        "294000-01-01 00:00:00+00",
        "10000-01-01 00:00:00+00",
        "1969-12-31 23:59:59.999999+00",
        "4714-11-24 00:00:00+00 BC",
    ] {
        let err = sqlx::query(
            "SELECT * FROM awa.enqueue(ARRAY['q'], ARRAY['k'], ARRAY['{}'::jsonb], \
             ARRAY[3::smallint], ARRAY[$1::text::timestamptz], ARRAY[NULL::int], \
             ARRAY[NULL::text], ARRAY[NULL::jsonb])",
        )
        .bind(value)
        .execute(&mut conn)
        .await
        .expect_err(value);
        let db_err = err.as_database_error().expect("a database error");
        assert_eq!(db_err.code().as_deref(), Some("23514"), "{value}: {err}");
        assert!(db_err.message().contains("run_at"), "{value}: {err}");
        let pg = db_err
            .try_downcast_ref::<sqlx::postgres::PgDatabaseError>()
            .unwrap();
        assert!(
            pg.hint().is_some_and(|h| h.contains("9999")),
            "{value}: {err}"
        );
    }
    let jobs: i64 = sqlx::query_scalar("SELECT count(*) FROM awa.jobs")
        .fetch_one(&mut conn)
        .await
        .unwrap();
    assert_eq!(jobs, 0);
    for at in ["9999-12-31T23:59:59.999999Z", "1970-01-01T00:00:00Z"] {
        enqueue(url, "q", &["--run-at", at]);
    }
    for at in [
        "9999-12-31T23:59:59-01:00",
        "1969-12-31T23:59:59Z",
        "0000-01-01T00:00:00Z",
    ] {
        awa(
            url,
            &[
                "job", "enqueue", "--queue", "q", "--kind", "k", "--run-at", at,
            ],
        )
        .usage("outside the times awa accepts");
    }
}
