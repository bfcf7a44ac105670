//! `awa storage ...` and `awa migrate` refusals, run as the binary.

use crate::common;

use common::{awa, awa_bare, migrated_db, worker_run};
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

    let newer = format!(
        "newer than the {} this binary knows",
        awa_maint::LATEST_VERSION
    );
    let newer = newer.as_str();
    awa(url, &["storage", "status"]).refused(newer);
    awa(url, &["migrate"]).refused(newer);
    awa(url, &prepare("custom_c", &[])).refused(newer);
    awa(url, &["job", "enqueue", "--queue", "q", "--kind", "k"]).refused(newer);
    awa(url, &["job", "list"]).refused(newer);
    awa(url, &["queue", "configure", "q", "--dlq", "on"]).refused(newer);
    awa(url, &worker_run("q", "noop", &["--exit-when-idle"])).refused(newer);
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
async fn an_older_schema_is_refused_by_job_commands_and_shown_by_status() {
    let db = migrated_db().await;
    let url = db.url();
    let mut conn = sqlx::PgConnection::connect(url).await.expect("connect");
    // As if migrated by an older release: its newest version is below ours.
    sqlx::query("update awa.schema_version set version = version - 1")
        .execute(&mut conn)
        .await
        .expect("pretend an older binary migrated");
    conn.close().await.ok();
    let older = format!(
        "older than the {} this binary needs; run `awa migrate`",
        awa_maint::LATEST_VERSION
    );
    awa(url, &["job", "list"]).refused(&older);
    awa(url, &["job", "enqueue", "--queue", "q", "--kind", "k"]).refused(&older);
    awa(url, &["queue", "stats"]).refused(&older);
    let s = status(url);
    assert_eq!(s["schema_version"], awa_maint::LATEST_VERSION - 1);
}

#[tokio::test]
async fn migrate_prints_the_fresh_install_or_the_steps_asked_for() {
    let latest = awa_maint::LATEST_VERSION.to_string();
    let fresh = awa_bare(&["migrate", "--sql"]);
    assert!(fresh.ok(), "{fresh:#?}");
    assert_eq!(fresh.stdout.matches("BEGIN;").count(), 1, "one transaction");
    assert!(fresh.stdout.contains("'fresh install'"));
    let steps = awa_bare(&["migrate", "--sql", "--from", "0", "--to", &latest]);
    assert!(steps.ok(), "{steps:#?}");
    assert_eq!(
        steps
            .stdout
            .matches("INSERT INTO awa.schema_version")
            .count(),
        awa_maint::LATEST_VERSION as usize,
        "one record per step"
    );
    for bad in [["--from", &latest], ["--to", "0"]] {
        let mut args = vec!["migrate", "--sql"];
        args.extend(bad);
        let run = awa_bare(&args);
        assert_eq!(
            run.code,
            Some(2),
            "{args:?} is a bad command line: {run:#?}"
        );
        assert!(run.stderr.contains("forward only"), "{run:#?}");
    }

    // Applying up to a version goes through the steps, also from empty.
    let db = awa_harness::TestDb::empty()
        .await
        .expect("an empty database");
    let run = awa(db.url(), &["migrate", "--to", "1", "--json"]);
    assert_eq!(run.json()["applied"], serde_json::json!([1]));
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

/// Every way a password can be written into a connection string, each
/// tried against a server that is not there: no output (stderr, stdout,
/// text or `--json`, flag or `DATABASE_URL`) may contain it, in any of the
/// forms it was written in. Every password here contains "s3cret".
#[test]
fn regression_no_form_of_password_is_ever_printed() {
    const HOST: &str = "127.0.0.1:1";
    let cases: Vec<(String, &str)> = vec![
        // URL user info.
        (format!("postgres://u:s3cretPW@{HOST}/db"), "s3cretPW"),
        (format!("postgresql://u:s3cretPW@{HOST}/db"), "s3cretPW"),
        (format!("postgres://u:s3cretPW@{HOST}"), "s3cretPW"),
        (format!("postgres://:s3cretPW@{HOST}/db"), "s3cretPW"),
        (format!("postgres://u:s3cret%50W@{HOST}/db"), "s3cret%50W"),
        (
            format!("postgres://u:%73%33%63%72%65%74PW@{HOST}/db"),
            "%73%33%63%72%65%74PW",
        ),
        (
            format!("postgres://u:s3cretPW@{HOST}/db?sslmode=disable"),
            "s3cretPW",
        ),
        (
            format!("postgres://u:p@ss:s3cretPW@{HOST}/db"),
            "p@ss:s3cretPW",
        ),
        (format!("postgres://u:s3cret/PW@{HOST}/db"), "s3cret/PW"),
        (format!("postgres://u:s3cret?PW@{HOST}/db"), "s3cret?PW"),
        (format!("postgres://u:s3cret#PW@{HOST}/db"), "s3cret#PW"),
        (
            format!("postgres://u:s3cretPW@{HOST}/db?application_name=a@b"),
            "s3cretPW",
        ),
        (
            "postgres://u:s3cretPW@127.0.0.1:99999/db".to_string(),
            "s3cretPW",
        ),
        ("postgres://u:s3cretPW@[::1:1/db".to_string(), "s3cretPW"),
        (
            format!("postgres://u:s3cretPW@{HOST}/db?sslmode=bogus"),
            "s3cretPW",
        ),
        (
            format!("postgres://u:s3cretPW@{HOST}/db?port=abc"),
            "s3cretPW",
        ),
        (
            format!("postgres://u:s3cretPW@{HOST}/db?statement-cache-capacity=x"),
            "s3cretPW",
        ),
        ("postgres://u:s3cretPW@".to_string(), "s3cretPW"),
        (
            format!("postgres://u:s3cretPW@{HOST}/db?host=/nonexistent"),
            "s3cretPW",
        ),
        (format!("postgres://u:s3cretPW@{HOST}/db\n"), "s3cretPW"),
        (format!(" postgres://u:s3cretPW@{HOST}/db "), "s3cretPW"),
        (format!("mysql://u:s3cretPW@{HOST}/db"), "s3cretPW"),
        (format!("http://u:s3cretPW@{HOST}/"), "s3cretPW"),
        // Query parameters.
        (
            format!("postgres://{HOST}/db?password=s3cretPW"),
            "s3cretPW",
        ),
        (
            format!("postgres://u@{HOST}/db?password=s3cretPW"),
            "s3cretPW",
        ),
        (
            format!("postgres://{HOST}/db?user=u&password=s3cretPW&sslmode=disable"),
            "s3cretPW",
        ),
        (
            format!("postgres://{HOST}/db?PASSWORD=s3cretPW"),
            "s3cretPW",
        ),
        (
            format!("postgres://{HOST}/db?Password=s3cretPW"),
            "s3cretPW",
        ),
        (
            format!("postgres://{HOST}/db?pass%77ord=s3cretPW"),
            "s3cretPW",
        ),
        (
            format!("postgres://{HOST}/db?password=s3cret%50W"),
            "s3cret%50W",
        ),
        (format!("postgres://{HOST}/db?passwd=s3cretPW"), "s3cretPW"),
        (
            format!("postgres://{HOST}/db?sslpassword=s3cretPW"),
            "s3cretPW",
        ),
        (
            format!("postgres://{HOST}/db?password=s3cretPW#frag"),
            "s3cretPW",
        ),
        (
            format!("postgres://{HOST}/db?application_name=a@b&password=s3cretPW"),
            "s3cretPW",
        ),
        (
            format!("postgres://u:other@{HOST}/db?password=s3cretPW"),
            "s3cretPW",
        ),
        (
            format!("postgres://{HOST}/db?a=b?password=s3cretPW"),
            "s3cretPW",
        ),
        // Keyword/value strings.
        (
            "host=127.0.0.1 port=1 password=s3cretPW".to_string(),
            "s3cretPW",
        ),
        (
            "host=127.0.0.1 port=1 password='s3cretPW'".to_string(),
            "s3cretPW",
        ),
        (
            "host=127.0.0.1 port=1 password = s3cretPW".to_string(),
            "s3cretPW",
        ),
        (
            "password=s3cretPW host=127.0.0.1 port=1".to_string(),
            "s3cretPW",
        ),
        (
            "host=127.0.0.1 password='a b s3cretPW'".to_string(),
            "a b s3cretPW",
        ),
        (
            r"host=127.0.0.1 password='a\'b s3cretPW'".to_string(),
            r"a\'b s3cretPW",
        ),
        ("host=127.0.0.1 password='s3cretPW".to_string(), "s3cretPW"),
        ("host=127.0.0.1 PASSWORD=s3cretPW".to_string(), "s3cretPW"),
        (
            r"host=127.0.0.1 password=s3cret\ PW".to_string(),
            r"s3cret\ PW",
        ),
        (
            "user=u password=s3cretPW dbname=db sslmode=require".to_string(),
            "s3cretPW",
        ),
        ("  password=s3cretPW  ".to_string(), "s3cretPW"),
        // Neither: shown not at all.
        (format!("u:s3cretPW@{HOST}/db"), "s3cretPW"),
        (format!("postgres:/u:s3cretPW@{HOST}/db"), "s3cretPW"),
        ("s3cretPW".to_string(), "s3cretPW"),
    ];
    let mut leaks = Vec::new();
    let check = |label: String, run: &common::Run, raw: &str, leaks: &mut Vec<String>| {
        assert!(!run.ok(), "{label}: expected a refusal, got {run:#?}");
        for out in [&run.stdout, &run.stderr] {
            if out.contains("s3cret") || out.contains(raw) {
                leaks.push(format!("{label}: {out}"));
            }
        }
    };
    for (url, raw) in &cases {
        for json in [false, true] {
            let mut args = vec!["storage", "status"];
            if json {
                args.push("--json");
            }
            let run = awa(url, &args);
            check(format!("{url:?} {args:?}"), &run, raw, &mut leaks);
            if json {
                // --json puts the error on stdout too.
                assert!(run.stdout.contains("\"error\""), "{url:?}: {run:#?}");
            }
        }
        let run = common::awa_env(&[("DATABASE_URL", url.as_str())], &["job", "list"]);
        check(
            format!("DATABASE_URL={url:?} job list"),
            &run,
            raw,
            &mut leaks,
        );
    }
    // A password from the environment is not in the string at all.
    let run = common::awa_env(
        &[
            ("PGPASSWORD", "s3cretPW"),
            ("DATABASE_URL", &format!("postgres://u@{HOST}/db")),
        ],
        &["migrate"],
    );
    check("PGPASSWORD".to_string(), &run, "s3cretPW", &mut leaks);
    assert!(
        leaks.is_empty(),
        "{} of {} runs printed a password:\n{}",
        leaks.len(),
        cases.len() * 3 + 1,
        leaks.join("\n")
    );
}

/// A database error reaches the user as PostgreSQL's message, detail and
/// hint (and its SQLSTATE in --json), never sqlx's "at line NNNN" (a line
/// of PostgreSQL's C source).
#[tokio::test]
async fn regression_database_errors_show_message_and_hint_not_a_source_line() {
    let db = migrated_db().await;
    let url = db.url();
    let mut conn = sqlx::PgConnection::connect(url).await.expect("connect");
    let role = format!("{}_rt", db.name());
    sqlx::raw_sql(sqlx::AssertSqlSafe(format!(
        "CREATE ROLE {role} NOLOGIN; CREATE TABLE awa.unclassified_thing (x int)"
    )))
    .execute(&mut conn)
    .await
    .expect("setup");

    // A refusal raised by our SQL with a hint (the privileges matrix does
    // not classify a table), through awa-maint.
    let args = ["storage", "grant-runtime-role", "--role", role.as_str()];
    let run = awa(url, &args);
    run.refused("not classified in the runtime privileges matrix");
    assert!(
        run.stderr.contains("hint: Add each to the matrix"),
        "{run:#?}"
    );
    assert!(!run.stderr.contains("at line"), "{run:#?}");
    let json_args = [&args[..], &["--json"]].concat();
    let run = awa(url, &json_args);
    let out: Value = serde_json::from_str(&run.stdout).expect("JSON error");
    assert_eq!(out["sqlstate"], "55000", "{out}");
    assert!(
        out["hint"].as_str().is_some_and(|h| h.contains("Add each")),
        "{out}"
    );
    assert!(!out["error"].as_str().unwrap().contains("at line"), "{out}");

    // An error PostgreSQL raises itself, through a plane (history): a
    // role without grants lists jobs.
    sqlx::raw_sql(sqlx::AssertSqlSafe(format!(
        "ALTER ROLE {role} LOGIN PASSWORD 'pw'; GRANT USAGE ON SCHEMA awa TO {role}; \
         GRANT SELECT ON awa.schema_version TO {role}"
    )))
    .execute(&mut conn)
    .await
    .expect("login");
    let role_url = common::as_role(url, &role);
    let run = awa(&role_url, &["job", "list", "--json"]);
    assert!(!run.ok(), "{run:#?}");
    assert!(run.stderr.contains("permission denied"), "{run:#?}");
    assert!(!run.stderr.contains("at line"), "{run:#?}");
    let out: Value = serde_json::from_str(&run.stdout).expect("JSON error");
    assert_eq!(out["sqlstate"], "42501", "{out}");

    // A refusal while connecting: the server says the database is not there.
    let (base, _) = url.rsplit_once('/').unwrap();
    let run = awa(
        &format!("{base}/no_such_database_here"),
        &["storage", "status"],
    );
    run.refused("does not exist");
    assert!(!run.stderr.contains("at line"), "{run:#?}");

    sqlx::raw_sql(sqlx::AssertSqlSafe(format!(
        "DROP TABLE awa.unclassified_thing; DROP OWNED BY {role}; DROP ROLE {role}"
    )))
    .execute(&mut conn)
    .await
    .expect("cleanup");
}

/// The binary's own paths (enqueue, worker with its registry, listener and
/// completer, maintenance, reads, dlq) work as a role given only
/// `awa storage grant-runtime-role`; changing queue settings stays the
/// owner's.
#[tokio::test]
async fn the_binary_works_as_the_runtime_role() {
    let db = migrated_db().await;
    let url = db.url();
    let mut conn = sqlx::PgConnection::connect(url).await.expect("connect");
    let role = format!("{}_rt", db.name());
    sqlx::raw_sql(sqlx::AssertSqlSafe(format!(
        "CREATE ROLE {role} LOGIN PASSWORD 'pw'"
    )))
    .execute(&mut conn)
    .await
    .expect("role");
    let granted = awa(url, &["storage", "grant-runtime-role", "--role", &role]);
    assert!(granted.ok(), "{granted:#?}");
    let rt = common::as_role(url, &role);

    common::enqueue(&rt, "rq", "k", 30);
    let run = awa(
        &rt,
        &worker_run("rq", "fail-first:1", &["--exit-when-idle", "--json"]),
    )
    .json();
    assert_eq!(run["completed"], 30, "{run}");
    let maint = awa(&rt, &["maint", "run", "--once", "--json"]);
    assert!(maint.ok(), "{maint:#?}");
    for args in [
        vec!["job", "list", "--json"],
        vec!["queue", "stats", "--json"],
        vec!["storage", "status", "--json"],
        vec!["dlq", "list", "--json"],
    ] {
        let run = awa(&rt, &args);
        assert!(run.ok(), "{args:?}: {run:#?}");
    }
    awa(&rt, &["queue", "configure", "rq", "--dlq", "on"]).refused("permission denied");

    sqlx::raw_sql(sqlx::AssertSqlSafe(format!(
        "DROP OWNED BY {role}; DROP ROLE {role}"
    )))
    .execute(&mut conn)
    .await
    .expect("cleanup");
}

/// `awa --version` names this build and the schema version it expects,
/// and that is the version `awa migrate` leaves a fresh database at.
#[tokio::test]
async fn version_names_the_build_and_the_schema_it_migrates_to() {
    let long = awa_bare(&["--version"]);
    assert!(long.ok(), "{long:#?}");
    let short = awa_bare(&["-V"]);
    assert_eq!(short.stdout, long.stdout, "-V and --version agree");
    let line = long.stdout.trim();
    let expected_prefix = format!("awa {} (schema version ", env!("CARGO_PKG_VERSION"));
    let schema: i64 = line
        .strip_prefix(&expected_prefix)
        .and_then(|rest| rest.strip_suffix(')'))
        .unwrap_or_else(|| panic!("`awa --version` printed {line:?}"))
        .parse()
        .unwrap_or_else(|e| panic!("schema version in {line:?}: {e}"));

    let db = awa_harness::TestDb::empty()
        .await
        .expect("an empty database");
    let migrated = awa(db.url(), &["migrate", "--json"]).json();
    assert_eq!(migrated["to"], schema, "{migrated}");
    assert_eq!(status(db.url())["schema_version"], schema);
}
