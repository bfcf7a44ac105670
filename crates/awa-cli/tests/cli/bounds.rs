//! Every bounded flag at min-1, min, max and max+1 (table-driven): values
//! in range are accepted, values outside are refused with a message naming
//! the flag and exit code 2 (a bad command line, as clap's own refusals),
//! and a refusal writes nothing. The SQL side refuses the stored
//! settings too, for callers that bypass the CLI.

use crate::common;

use common::{awa, migrated_db};
use sqlx::Connection;

/// What a refusal must not have changed.
async fn written(url: &str) -> Vec<i64> {
    let mut conn = sqlx::PgConnection::connect(url).await.unwrap();
    let row: (i64, i64, i64, i64, i64, i64) = sqlx::query_as(
        "SELECT (SELECT count(*) FROM awa.queue_meta),
                (SELECT count(*) FROM awa.runtimes),
                (SELECT count(*) FROM awa.jobs),
                (SELECT count(*) FROM pg_catalog.pg_namespace),
                (SELECT count(*) FROM awa.ring_outcomes),
                (SELECT count(*) FROM awa.maintenance_leader)",
    )
    .fetch_one(&mut conn)
    .await
    .unwrap();
    vec![row.0, row.1, row.2, row.3, row.4, row.5]
}

struct Case {
    /// Arguments after `awa --database-url URL`.
    args: Vec<String>,
    /// None: accepted. Some(needle): refused, stderr mentions needle.
    refused: Option<&'static str>,
}

fn ok(args: &[&str]) -> Case {
    Case {
        args: args.iter().map(|s| s.to_string()).collect(),
        refused: None,
    }
}

fn no(needle: &'static str, args: &[&str]) -> Case {
    Case {
        args: args.iter().map(|s| s.to_string()).collect(),
        refused: Some(needle),
    }
}

async fn check(url: &str, cases: Vec<Case>) {
    for case in cases {
        let args: Vec<&str> = case.args.iter().map(String::as_str).collect();
        let before = written(url).await;
        let run = awa(url, &args);
        match case.refused {
            None => assert!(run.ok(), "{args:?} should be accepted: {run:#?}"),
            Some(needle) => {
                run.usage(needle);
                assert_eq!(
                    written(url).await,
                    before,
                    "{args:?} was refused but wrote something"
                );
            }
        }
    }
}

#[tokio::test]
async fn queue_settings_are_bounded_and_a_refusal_writes_nothing() {
    let db = migrated_db().await;
    let url = db.url();
    let mut n = 0;
    let mut cfg = |flag: &str, value: &str, refused: Option<&'static str>| {
        n += 1;
        let args = ["queue", "configure", &format!("q{n}"), flag, value];
        match refused {
            None => ok(&args),
            Some(needle) => no(needle, &args),
        }
    };
    let cases = vec![
        cfg(
            "--max-attempts",
            "0",
            Some("max attempts must be between 1 and 1000"),
        ),
        cfg("--max-attempts", "1", None),
        cfg("--max-attempts", "1000", None),
        cfg(
            "--max-attempts",
            "1001",
            Some("max attempts must be between 1 and 1000"),
        ),
        cfg(
            "--shards",
            "0",
            Some("shard count must be between 1 and 64"),
        ),
        cfg("--shards", "1", None),
        cfg("--shards", "64", None),
        cfg(
            "--shards",
            "65",
            Some("shard count must be between 1 and 64"),
        ),
        cfg(
            "--priority-aging",
            "999ms",
            Some("--priority-aging must be at least 1s and at most 30days"),
        ),
        cfg("--priority-aging", "1s", None),
        cfg("--priority-aging", "30days", None),
        cfg(
            "--priority-aging",
            "30days 1s",
            Some("--priority-aging must be at least 1s and at most 30days"),
        ),
        cfg("--priority-aging", "off", None),
        cfg(
            "--dlq-retention",
            "999ms",
            Some("--dlq-retention must be at least 1s and at most 3650days"),
        ),
        cfg("--dlq-retention", "1s", None),
        cfg("--dlq-retention", "3650days", None),
        cfg(
            "--dlq-retention",
            "3650days 1s",
            Some("--dlq-retention must be at least 1s and at most 3650days"),
        ),
        // The reported instance: it used to store a negative interval.
        cfg(
            "--dlq-retention",
            "100000000years",
            Some("--dlq-retention must be at least 1s"),
        ),
    ];
    check(url, cases).await;

    // What was accepted is stored as given.
    let max = awa(url, &["--json", "queue", "configure", "q16"]).json();
    assert_eq!(max["dlq_retention_secs"], 3650.0 * 86_400.0);
    let aging = awa(url, &["--json", "queue", "configure", "q11"]).json();
    assert_eq!(aging["priority_aging_secs"], 30.0 * 86_400.0);
}

#[tokio::test]
async fn job_and_list_flags_are_bounded_and_a_refusal_writes_nothing() {
    let db = migrated_db().await;
    let url = db.url();
    let enq = |flag: &str, value: &str, refused: Option<&'static str>| {
        let args = ["job", "enqueue", "--queue", "b", "--kind", "k", flag, value];
        match refused {
            None => ok(&args),
            Some(needle) => no(needle, &args),
        }
    };
    let cases = vec![
        enq("--priority", "0", Some("priority must be between 1 and 4")),
        enq("--priority", "1", None),
        enq("--priority", "4", None),
        enq("--priority", "5", Some("priority must be between 1 and 4")),
        enq(
            "--max-attempts",
            "0",
            Some("max attempts must be between 1 and 1000"),
        ),
        enq("--max-attempts", "1", None),
        enq("--max-attempts", "1000", None),
        enq(
            "--max-attempts",
            "1001",
            Some("max attempts must be between 1 and 1000"),
        ),
        enq("--count", "0", Some("count must be between 1 and 1000000")),
        enq("--count", "1", None),
        // The maximum itself (a million jobs) is left out: too slow for a
        // shared test machine; the bound is unit-tested in awa-core.
        enq(
            "--count",
            "1000001",
            Some("count must be between 1 and 1000000"),
        ),
        no(
            "limit must be between 1 and 10000",
            &["job", "list", "--limit", "0"],
        ),
        ok(&["job", "list", "--limit", "1"]),
        ok(&["job", "list", "--limit", "10000"]),
        no(
            "limit must be between 1 and 10000",
            &["job", "list", "--limit", "10001"],
        ),
        no(
            "limit must be between 1 and 10000",
            &["dlq", "list", "--limit", "0"],
        ),
        ok(&["dlq", "list", "--limit", "1"]),
        ok(&["dlq", "list", "--limit", "10000"]),
        no(
            "limit must be between 1 and 10000",
            &["dlq", "list", "--limit", "10001"],
        ),
    ];
    check(url, cases).await;
}

#[tokio::test]
async fn worker_and_maintenance_flags_are_bounded_and_a_refusal_writes_nothing() {
    let db = migrated_db().await;
    let url = db.url();
    let worker = |extra: &[&str], refused: Option<&'static str>| {
        let mut args = vec![
            "worker",
            "run",
            "--queue",
            "w",
            "--handler",
            "noop",
            "--exit-when-idle",
            "--no-maintenance",
        ];
        args.extend_from_slice(extra);
        match refused {
            None => ok(&args),
            Some(needle) => no(needle, &args),
        }
    };
    let maint = |flag: &str, value: &str, refused: Option<&'static str>| {
        let args = ["maint", "run", "--once", flag, value];
        match refused {
            None => ok(&args),
            Some(needle) => no(needle, &args),
        }
    };
    let cases = vec![
        worker(
            &["--concurrency", "0"],
            Some("concurrency must be between 1 and 4096"),
        ),
        worker(&["--concurrency", "1"], None),
        worker(&["--concurrency", "4096"], None),
        worker(
            &["--concurrency", "4097"],
            Some("concurrency must be between 1 and 4096"),
        ),
        worker(
            &["--rotate-interval", "9ms"],
            Some("--rotate-interval must be at least 10ms"),
        ),
        worker(
            &["--rescue-after", "999ms"],
            Some("--rescue-after must be at least 1s"),
        ),
        worker(&["--rescue-after", "1day 1s"], Some("at most 1day")),
        maint(
            "--rotate-interval",
            "9ms",
            Some("--rotate-interval must be at least 10ms"),
        ),
        maint("--rotate-interval", "10ms", None),
        maint("--rotate-interval", "1day", None),
        maint(
            "--rotate-interval",
            "1day 1ms",
            Some("--rotate-interval must be at least 10ms and at most 1day"),
        ),
        maint(
            "--rescue-after",
            "999ms",
            Some("--rescue-after must be at least 1s"),
        ),
        maint("--rescue-after", "1s", None),
        maint("--rescue-after", "1day", None),
        maint(
            "--rescue-after",
            "1day 1s",
            Some("--rescue-after must be at least 1s and at most 1day"),
        ),
    ];
    check(url, cases).await;
}

#[tokio::test]
async fn slot_counts_are_bounded_and_a_refusal_writes_nothing() {
    let db = migrated_db().await;
    let url = db.url();
    let prepare = |schema: &str, q: &str, l: &str, c: &str, refused: Option<&'static str>| {
        let args = [
            "storage",
            "prepare-queue-storage-schema",
            "--schema",
            schema,
            "--queue-slot-count",
            q,
            "--lease-slot-count",
            l,
            "--claim-slot-count",
            c,
        ];
        match refused {
            None => ok(&args),
            Some(needle) => no(needle, &args),
        }
    };
    let refusal = Some("slot count must be between 4 and 256");
    let cases = vec![
        prepare("s_q3", "3", "8", "8", refusal),
        prepare("s_l3", "16", "3", "8", refusal),
        prepare("s_c3", "16", "8", "3", refusal),
        prepare("s_min", "4", "4", "4", None),
        prepare("s_max", "256", "4", "4", None),
        prepare("s_q257", "257", "8", "8", refusal),
        prepare("s_l257", "16", "257", "8", refusal),
        prepare("s_c257", "16", "8", "257", refusal),
    ];
    check(url, cases).await;
}

/// The reported instance of item 10: an invalid cadence used to be noticed
/// only after the worker had registered itself.
#[tokio::test]
async fn worker_run_with_an_invalid_cadence_registers_nothing() {
    let db = migrated_db().await;
    let url = db.url();
    for bad in [
        ["--rotate-interval", "soon"],
        ["--rotate-interval", "0s"],
        ["--rescue-after", "0s"],
    ] {
        let before = written(url).await;
        let mut args = vec!["worker", "run", "--queue", "q", "--handler", "noop"];
        args.extend_from_slice(&bad);
        let run = awa(url, &args);
        run.usage(bad[0]);
        assert_eq!(written(url).await, before, "{bad:?} wrote something");
        let mut conn = sqlx::PgConnection::connect(url).await.unwrap();
        let runtimes: i64 = sqlx::query_scalar("SELECT count(*) FROM awa.runtimes")
            .fetch_one(&mut conn)
            .await
            .unwrap();
        assert_eq!(runtimes, 0, "{bad:?} registered a runtime");
    }
}

/// A raw-SQL caller cannot store a setting that breaks every claim or every
/// retention pass either.
#[tokio::test]
async fn the_database_refuses_out_of_range_queue_settings() {
    let db = migrated_db().await;
    let mut conn = sqlx::PgConnection::connect(db.url()).await.unwrap();
    for (label, statement) in [
        (
            "huge retention",
            "INSERT INTO awa.queue_meta (queue, dlq_retention) \
             VALUES ('raw', make_interval(secs => 3.15576e15))",
        ),
        (
            "negative retention",
            "INSERT INTO awa.queue_meta (queue, dlq_retention) VALUES ('raw', interval '-1 day')",
        ),
        (
            "retention past ten years",
            "INSERT INTO awa.queue_meta (queue, dlq_retention) \
             VALUES ('raw', interval '3650 days 1 second')",
        ),
        (
            "sub-millisecond aging",
            "INSERT INTO awa.queue_meta (queue, priority_aging_interval) \
             VALUES ('raw', interval '1 microsecond')",
        ),
        (
            "aging past 30 days",
            "INSERT INTO awa.queue_meta (queue, priority_aging_interval) \
             VALUES ('raw', interval '31 days')",
        ),
    ] {
        let err = sqlx::query(statement)
            .execute(&mut conn)
            .await
            .expect_err(label);
        let code = err
            .as_database_error()
            .and_then(|e| e.code())
            .map(|c| c.to_string());
        assert!(
            matches!(code.as_deref(), Some("23514" | "22008" | "22015")),
            "{label}: {err}"
        );
    }
    let stored: i64 = sqlx::query_scalar("SELECT count(*) FROM awa.queue_meta")
        .fetch_one(&mut conn)
        .await
        .unwrap();
    assert_eq!(stored, 0);
    // The bounds themselves are storable.
    sqlx::query(
        "INSERT INTO awa.queue_meta (queue, dlq_retention, priority_aging_interval) \
         VALUES ('raw', interval '3650 days', interval '30 days')",
    )
    .execute(&mut conn)
    .await
    .unwrap();
}

/// A raw-SQL producer calling `awa.enqueue` cannot store a job with a
/// priority or attempt budget no worker understands: the plane tables check
/// the same bounds as `awa_core::bounds`, for runnable and scheduled jobs.
#[tokio::test]
async fn the_database_refuses_out_of_range_jobs_from_raw_sql() {
    let db = migrated_db().await;
    let mut conn = sqlx::PgConnection::connect(db.url()).await.unwrap();
    for (label, priority, max_attempts, later) in [
        ("priority 0", 0_i16, Some(3), false),
        ("priority 5", 5, Some(3), false),
        ("no attempts", 2, Some(0), false),
        ("too many attempts", 2, Some(1001), false),
        ("scheduled, priority 9", 9, Some(3), true),
        ("scheduled, negative attempts", 2, Some(-1), true),
    ] {
        let err = sqlx::query(
            "SELECT * FROM awa.enqueue(ARRAY['raw'], ARRAY['k'], ARRAY['{}'::jsonb], ARRAY[$1::smallint], \
             ARRAY[CASE WHEN $3 THEN now() + interval '1 hour' END], ARRAY[$2::integer], \
             ARRAY[NULL::text], ARRAY[NULL::jsonb])",
        )
        .bind(priority)
        .bind(max_attempts)
        .bind(later)
        .fetch_all(&mut conn)
        .await
        .expect_err(label);
        let code = err
            .as_database_error()
            .and_then(|e| e.code())
            .map(|c| c.to_string());
        assert_eq!(code.as_deref(), Some("23514"), "{label}: {err}");
    }
    let stored: i64 = sqlx::query_scalar("SELECT count(*) FROM awa.jobs")
        .fetch_one(&mut conn)
        .await
        .unwrap();
    assert_eq!(stored, 0, "nothing was written");
}
