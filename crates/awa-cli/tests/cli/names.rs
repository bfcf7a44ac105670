//! Every flag of every command that names a database object (`--schema` /
//! `AWA_SCHEMA`, `--target-schema`, `--role`, a queue, a cron schedule, a
//! job id), given one that does not exist or cannot be used: the command
//! is refused (non-zero exit, the message naming what was wrong) and the
//! database is exactly as before, by a fingerprint of every row of every
//! table and sequence in every schema, the schemas, the roles and the
//! privileges. Commands that otherwise run until stopped (`worker run`,
//! `maint run`, `serve`) must be refused too, not start.
//!
//! The reported instance: `awa worker run --schema nosuch` exited 1 but
//! left a `runtimes` row, which held `storage finalize` back.

use crate::common;

use common::{migrated_db, spawn_awa};
use sqlx::Connection;
use std::time::{Duration, Instant};

/// Everything a refused command must not have changed: every row of every
/// table (partitions included) and every sequence outside the system
/// schemas, the schemas, the roles, and the privileges on every relation,
/// function and schema.
async fn fingerprint(url: &str) -> Vec<(String, String)> {
    let mut conn = sqlx::PgConnection::connect(url).await.unwrap();
    // One round trip: query_to_xml runs each table's digest query.
    let mut out: Vec<(String, String)> = sqlx::query_as(
        "SELECT format('%I.%I', n.nspname, c.relname),
                (xpath('/row/v/text()', query_to_xml(
                    CASE c.relkind
                    WHEN 'S' THEN format('SELECT last_value::text || ''/'' || is_called::text AS v FROM %I.%I',
                                         n.nspname, c.relname)
                    ELSE format('SELECT count(*)::text || ''/'' || coalesce(md5(string_agg(t::text, '','' ORDER BY t::text)), '''') AS v FROM %I.%I t',
                                n.nspname, c.relname)
                    END, false, true, '')))[1]::text
           FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
          WHERE c.relkind IN ('r', 'S')
            AND n.nspname NOT IN ('pg_catalog', 'information_schema', 'pg_toast')
            AND n.nspname NOT LIKE 'pg_temp%' AND n.nspname NOT LIKE 'pg_toast_temp%'
          ORDER BY 1",
    )
    .fetch_all(&mut conn)
    .await
    .unwrap();
    let catalog: Vec<(String, String)> = sqlx::query_as(
        "SELECT 'schemas', string_agg(nspname || ':' || coalesce(nspacl::text, ''), ',' ORDER BY nspname)
           FROM pg_namespace
         UNION ALL
         SELECT 'roles', string_agg(rolname, ',' ORDER BY rolname) FROM pg_roles
         UNION ALL
         SELECT 'relation privileges',
                md5(string_agg(c.oid::text || coalesce(c.relacl::text, ''), ',' ORDER BY c.oid))
           FROM pg_class c
         UNION ALL
         SELECT 'function privileges',
                md5(string_agg(p.oid::text || coalesce(p.proacl::text, ''), ',' ORDER BY p.oid))
           FROM pg_proc p",
    )
    .fetch_all(&mut conn)
    .await
    .unwrap();
    out.extend(catalog);
    out
}

/// `awa ARGS...` (with `env` set), which must exit non-zero within 60 s
/// mentioning `needle` on stderr. A command that would run until stopped
/// and was not refused is killed and fails the test.
fn refused(url: &str, env: &[(&str, &str)], args: &[&str], needle: &str) {
    let mut full = vec!["--database-url", url];
    full.extend_from_slice(args);
    let mut running = if env.is_empty() {
        spawn_awa(url, args)
    } else {
        common::spawn_awa_env(env, &full)
    };
    let deadline = Instant::now() + Duration::from_secs(60);
    while !running.exited() {
        if Instant::now() > deadline {
            running.kill9();
            panic!("{env:?} {args:?} was not refused: it was still running after 60 s");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    running.finish().refused(needle);
}

/// One case: environment, arguments, what the refusal must mention.
type Case = (Vec<(&'static str, &'static str)>, Vec<String>, &'static str);

fn cases(role: &str) -> Vec<Case> {
    let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
    let not_substrate = "not a prepared substrate";
    let mut out = Vec::new();
    // --schema with every command that takes it, and AWA_SCHEMA likewise.
    let pinned: Vec<Vec<&str>> = vec![
        vec!["job", "enqueue", "--queue", "q", "--kind", "k"],
        vec!["job", "dump", "1"],
        vec!["job", "cancel", "1"],
        vec!["job", "list"],
        vec!["queue", "stats"],
        vec!["queue", "configure", "q", "--max-attempts", "3"],
        vec!["queue", "configure", "q", "--pause"],
        vec!["dlq", "list"],
        vec!["dlq", "retry", "--all"],
        vec!["dlq", "purge", "--all"],
        vec!["worker", "run", "--queue", "q", "--handler", "noop"],
        vec![
            "worker",
            "run",
            "--queue",
            "q",
            "--handler",
            "noop",
            "--exit-when-idle",
            "--no-maintenance",
        ],
        vec!["maint", "run"],
        vec!["maint", "run", "--once"],
        vec!["cron", "list"],
        vec![
            "cron",
            "add",
            "new",
            "--cron",
            "* * * * *",
            "--queue",
            "q",
            "--kind",
            "k",
        ],
        vec!["cron", "remove", "nightly"],
        vec!["cron", "pause", "nightly"],
        vec!["cron", "resume", "nightly"],
        vec!["cron", "run-now", "nightly"],
        vec!["serve", "--listen", "127.0.0.1:0"],
        vec!["storage", "status"],
        vec!["storage", "configure", "--max-job-bytes", "4096"],
        vec!["storage", "grant-runtime-role", "--role", role],
        vec!["storage", "prepare", "--target-schema", "side"],
        vec!["storage", "enter-mixed-transition"],
        vec!["storage", "finalize"],
        vec!["storage", "abort"],
        vec!["storage", "drop-substrate", "--yes"],
    ];
    for args in &pinned {
        let mut with = vec!["--schema", "nosuch"];
        with.extend_from_slice(args);
        out.push((vec![], s(&with), not_substrate));
        out.push((vec![("AWA_SCHEMA", "nosuch")], s(args), not_substrate));
        // A schema that exists but is not a substrate.
        let mut plain = vec!["--schema", "plain"];
        plain.extend_from_slice(args);
        out.push((vec![], s(&plain), not_substrate));
    }
    // The other flags that name an object.
    out.extend([
        (
            vec![],
            s(&["storage", "prepare", "--target-schema", "nosuch"]),
            not_substrate,
        ),
        (
            vec![],
            s(&["storage", "grant-runtime-role", "--role", "no_such_role"]),
            "does not exist",
        ),
        (
            vec![],
            s(&[
                "--schema",
                "side",
                "storage",
                "grant-runtime-role",
                "--role",
                "no_such_role",
            ]),
            "does not exist",
        ),
        // A schema of someone else's is never made a substrate (it holds
        // a table of its own here).
        (
            vec![],
            s(&[
                "--schema",
                "plain",
                "storage",
                "prepare-queue-storage-schema",
            ]),
            "not an Awa substrate",
        ),
        (vec![], s(&["cron", "remove", "nosuch"]), "no schedule"),
        (vec![], s(&["cron", "pause", "nosuch"]), "no schedule"),
        (vec![], s(&["cron", "resume", "nosuch"]), "no schedule"),
        (vec![], s(&["cron", "run-now", "nosuch"]), "no schedule"),
        (vec![], s(&["job", "cancel", "999999"]), "999999"),
        (vec![], s(&["job", "dump", "999999"]), "999999"),
        (vec![], s(&["dlq", "retry", "--id", "999999"]), "999999"),
        (vec![], s(&["dlq", "purge", "--id", "999999"]), "999999"),
        // Names that cannot be valid are refused before connecting.
        (
            vec![],
            s(&[
                "--schema",
                "Bad!",
                "worker",
                "run",
                "--queue",
                "q",
                "--handler",
                "noop",
            ]),
            "invalid",
        ),
        (
            vec![],
            s(&["worker", "run", "--queue", "Bad Queue", "--handler", "noop"]),
            "Bad Queue",
        ),
        (
            vec![],
            s(&["queue", "configure", "Bad Queue", "--pause"]),
            "Bad Queue",
        ),
        (
            vec![],
            s(&["dlq", "retry", "--all", "--queue", "Bad Queue"]),
            "Bad Queue",
        ),
        (vec![], s(&["cron", "run-now", "bad name!"]), "bad name!"),
        (
            vec![],
            s(&["storage", "prepare", "--target-schema", "Bad!"]),
            "invalid",
        ),
    ]);
    out
}

#[tokio::test]
async fn every_flag_naming_a_missing_object_is_refused_and_changes_nothing() {
    let db = migrated_db().await;
    let url = db.url();
    // Something of everything: a second substrate, a role, a schedule, a
    // dead letter, a queue setting, a schema that is no substrate.
    let role = format!("{}_rt", db.name());
    let mut admin = sqlx::PgConnection::connect(url).await.unwrap();
    sqlx::raw_sql(sqlx::AssertSqlSafe(format!(
        "CREATE ROLE {role} LOGIN PASSWORD 'pw'; CREATE SCHEMA plain; CREATE TABLE plain.mine (x int)"
    )))
    .execute(&mut admin)
    .await
    .unwrap();
    for args in [
        vec![
            "--schema",
            "side",
            "storage",
            "prepare-queue-storage-schema",
        ],
        vec![
            "cron",
            "add",
            "nightly",
            "--cron",
            "0 3 * * *",
            "--queue",
            "q",
            "--kind",
            "k",
        ],
        vec![
            "queue",
            "configure",
            "dead",
            "--dlq",
            "on",
            "--max-attempts",
            "1",
        ],
        vec!["job", "enqueue", "--queue", "dead", "--kind", "k"],
        vec!["job", "enqueue", "--queue", "q", "--kind", "k"],
        vec![
            "worker",
            "run",
            "--queue",
            "dead",
            "--handler",
            "fail",
            "--exit-when-idle",
            "--no-maintenance",
        ],
    ] {
        let run = common::awa(url, &args);
        assert!(run.ok(), "{args:?}: {run:#?}");
    }
    let mut before = fingerprint(url).await;
    assert!(
        before.iter().any(|(t, _)| t == "awa.runtimes")
            && before.iter().any(|(t, _)| t.starts_with("side.")),
        "{before:?}"
    );
    let mut failures = Vec::new();
    for (env, args, needle) in cases(&role) {
        let argv: Vec<&str> = args.iter().map(String::as_str).collect();
        let outcome = std::panic::catch_unwind(|| refused(url, &env, &argv, needle));
        if let Err(panic) = outcome {
            // Whatever it did, judge each later case against what it left.
            before = fingerprint(url).await;
            let why = panic
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_default();
            failures.push(format!("{env:?} {argv:?}: {why}"));
            continue;
        }
        let after = fingerprint(url).await;
        if after != before {
            let changed: Vec<_> = after
                .iter()
                .zip(&before)
                .filter(|(a, b)| a != b)
                .map(|(a, _)| a.0.clone())
                .collect();
            failures.push(format!(
                "{env:?} {argv:?} was refused but changed {changed:?}"
            ));
            // Judge each later case against what it found.
            before = after;
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
    sqlx::raw_sql(sqlx::AssertSqlSafe(format!("DROP ROLE {role}")))
        .execute(&mut admin)
        .await
        .unwrap();
}
