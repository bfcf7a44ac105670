//! A staged storage transition with real processes: a producer enqueues
//! continuously through the public SQL producer function, two `awa worker
//! run` processes (each a maintenance-leader candidate) work the queue, and
//! an operator moves from `awa` to a prepared substrate with the CLI, while
//! a worker and the leader are killed with SIGKILL mid-way. Every job
//! enqueued before, during and after must complete exactly once; unique
//! keys hold across the boundary; finalize is refused until the old
//! substrate has drained. The same for an abort from mixed, run by the
//! runtime role (which may do all of it except the steps, which name the
//! migrator).

use crate::common;

use common::{Running, awa, spawn_awa, worker_run};
use serde_json::Value;
use sqlx::{Connection, PgConnection, Row};
use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

const QUEUE: &str = "tr";

/// Enqueues one job per transaction, numbered in its args, until stopped;
/// returns (job id, n) of every committed job.
fn producer(url: String, stop: Arc<AtomicBool>) -> tokio::task::JoinHandle<Vec<(i64, i64)>> {
    tokio::spawn(async move {
        let mut conn = PgConnection::connect(&url)
            .await
            .expect("producer connects");
        let mut made = Vec::new();
        let mut n = 0i64;
        while !stop.load(Ordering::Relaxed) {
            let mut tx = conn.begin().await.unwrap();
            let id: i64 = sqlx::query_scalar(
                "SELECT job_id FROM awa.enqueue(ARRAY[$1], ARRAY['job'],
                        ARRAY[jsonb_build_object('n', $2::bigint, 'ms', 5)], ARRAY[2::smallint],
                        ARRAY[NULL::timestamptz], ARRAY[NULL::integer], ARRAY[NULL::text],
                        ARRAY[NULL::jsonb])",
            )
            .bind(QUEUE)
            .bind(n)
            .fetch_one(&mut *tx)
            .await
            .unwrap();
            // Every seventh transaction rolls back: it must leave nothing.
            if n % 7 == 6 {
                tx.rollback().await.unwrap();
            } else {
                tx.commit().await.unwrap();
                made.push((id, n));
            }
            n += 1;
            tokio::time::sleep(Duration::from_millis(8)).await;
        }
        made
    })
}

fn worker(url: &str, log: &std::path::Path) -> Running {
    let handler = format!("chaos:{}", log.display());
    spawn_awa(
        url,
        &worker_run(
            QUEUE,
            &handler,
            &["--concurrency", "6", "--rescue-after", "3s"],
        ),
    )
}

/// Jobs of the queue by id, with their state, over both substrates.
async fn states(conn: &mut PgConnection) -> HashMap<i64, Vec<(String, String)>> {
    let mut out: HashMap<i64, Vec<(String, String)>> = HashMap::new();
    for schema in ["awa", "next"] {
        let q = format!("SELECT id, state FROM {schema}.jobs WHERE queue = $1");
        for row in sqlx::query(sqlx::AssertSqlSafe(q))
            .bind(QUEUE)
            .fetch_all(&mut *conn)
            .await
            .unwrap()
        {
            out.entry(row.get("id"))
                .or_default()
                .push((schema.to_string(), row.get("state")));
        }
    }
    out
}

/// Wait until every job of `made` is completed, exactly once, somewhere.
async fn all_completed(conn: &mut PgConnection, made: &[(i64, i64)], also: &[i64]) {
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let now = states(conn).await;
        let done = made
            .iter()
            .map(|(id, _)| *id)
            .chain(also.iter().copied())
            .all(|id| {
                now.get(&id)
                    .is_some_and(|s| s.iter().any(|(_, st)| st == "completed"))
            });
        if done {
            for (id, places) in &now {
                assert_eq!(
                    places.len(),
                    1,
                    "job {id} is known to more than one substrate: {places:?}"
                );
                assert_eq!(places[0].1, "completed", "job {id}: {places:?}");
            }
            let expected = made.len() + also.len();
            assert_eq!(
                now.len(),
                expected,
                "no job lost, none created twice, no rolled-back one"
            );
            return;
        }
        assert!(
            Instant::now() < deadline,
            "not every job completed: {:?}",
            made.iter()
                .filter(|(id, _)| now.get(id).is_none_or(|s| s[0].1 != "completed"))
                .take(10)
                .map(|(id, _)| (id, now.get(id)))
                .collect::<Vec<_>>()
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// Executions per job id in the chaos log.
fn executions(log: &std::path::Path) -> HashMap<i64, usize> {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    let mut out = HashMap::new();
    for line in text.lines() {
        if let Some(id) = line.split(' ').next().and_then(|x| x.parse().ok()) {
            *out.entry(id).or_insert(0) += 1;
        }
    }
    out
}

/// `awa job enqueue` of one job of the queue with a unique key.
fn enqueue_keyed(url: &str, args: &str, key: &str) -> common::Run {
    awa(
        url,
        &[
            "job",
            "enqueue",
            "--queue",
            QUEUE,
            "--kind",
            "job",
            "--args",
            args,
            "--unique-key",
            key,
            "--json",
        ],
    )
}

fn step(url: &str, args: &[&str]) -> Value {
    awa(url, &[args, &["--json"]].concat()).json()
}

async fn leader_pid(conn: &mut PgConnection) -> Option<i32> {
    sqlx::query_scalar(
        "SELECT l.pid FROM awa.maintenance_leader l
          WHERE EXISTS (SELECT 1 FROM pg_stat_activity a WHERE a.pid = l.backend_pid)",
    )
    .fetch_optional(conn)
    .await
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 3)]
async fn a_transition_under_load_with_kills_completes_every_job_exactly_once() {
    let db = common::migrated_db().await;
    let url = db.url().to_string();
    let tmp = tempfile::tempdir().unwrap();
    let log = tmp.path().join("executions.log");
    let mut conn = PgConnection::connect(&url).await.unwrap();
    let prepared = step(
        &url,
        &[
            "--schema",
            "next",
            "storage",
            "prepare-queue-storage-schema",
            "--queue-slot-count",
            "32",
            "--lease-slot-count",
            "16",
        ],
    );
    assert_eq!(prepared["slots"]["queue"], 32, "{prepared}");

    let mut workers = vec![worker(&url, &log), worker(&url, &log)];
    let stop = Arc::new(AtomicBool::new(false));
    let produced = producer(url.clone(), stop.clone());
    // A long job holding a unique key, in the old substrate.
    let hold = enqueue_keyed(&url, r#"{"n": -1, "ms": 6000}"#, "hold").json();
    let hold_id = hold["ids"][0].as_i64().unwrap();
    tokio::time::sleep(Duration::from_secs(2)).await;

    let p = step(&url, &["storage", "prepare", "--target-schema", "next"]);
    assert_eq!(p["state"], "prepared", "{p}");
    // Runtimes register the target within a second (routing::REFRESH).
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let m = step(&url, &["storage", "enter-mixed-transition"]);
    assert_eq!(m["state"], "mixed", "{m}");

    // The key held in the old substrate blocks a duplicate, now routed to
    // the target.
    let dup = enqueue_keyed(&url, r#"{"n": -2}"#, "hold");
    assert_eq!(dup.code, Some(3), "{dup:#?}");
    assert!(dup.stderr.contains(&hold_id.to_string()), "{dup:#?}");

    // Finalize is refused while the old substrate still holds work.
    let early = awa(&url, &["storage", "finalize"]);
    early.refused("still holds");

    // kill -9 the leader, then another worker, mid-way through mixed.
    tokio::time::sleep(Duration::from_secs(1)).await;
    let pid = leader_pid(&mut conn).await.expect("a leader");
    let at = workers
        .iter()
        .position(|w| w.pid() as i32 == pid)
        .expect("the leader is one of the workers");
    workers[at].kill9();
    workers.push(worker(&url, &log));
    tokio::time::sleep(Duration::from_secs(2)).await;
    let other = workers.iter().position(|w| w.pid() as i32 != pid).unwrap();
    workers[other].kill9();
    workers.push(worker(&url, &log));

    // Finalize once the old substrate has drained (the rescued attempts of
    // the killed workers land in the target).
    let deadline = Instant::now() + Duration::from_secs(120);
    let finalized = loop {
        let run = awa(&url, &["storage", "finalize", "--json"]);
        if run.ok() {
            break run.json();
        }
        assert!(
            run.stderr.contains("still holds") || run.stderr.contains("has not registered"),
            "{run:#?}"
        );
        assert!(
            Instant::now() < deadline,
            "the old substrate never drained: {run:#?}"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    };
    assert_eq!(finalized["active_schema"], "next", "{finalized}");
    tokio::time::sleep(Duration::from_secs(2)).await;
    stop.store(true, Ordering::Relaxed);
    let made = produced.await.unwrap();
    assert!(made.len() > 200, "the producer kept going: {}", made.len());

    all_completed(&mut conn, &made, &[hold_id]).await;
    let now = states(&mut conn).await;
    let in_old = made.iter().filter(|(id, _)| now[id][0].0 == "awa").count();
    let in_new = made.iter().filter(|(id, _)| now[id][0].0 == "next").count();
    assert!(
        in_old > 0 && in_new > 0,
        "work on both sides: {in_old} / {in_new}"
    );
    // At least once: every job ran; only attempts of the killed workers
    // may have run twice.
    let runs = executions(&log);
    for (id, _) in &made {
        assert!(
            runs.get(id).copied().unwrap_or(0) >= 1,
            "job {id} never ran"
        );
    }
    let twice = made.iter().filter(|(id, _)| runs[id] > 1).count();
    assert!(
        twice <= 2 * 6 * 2,
        "re-runs only of the killed workers' jobs: {twice}"
    );

    // The old substrate drains out of the routing; status says so.
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let status = step(&url, &["storage", "status"]);
        let t = &status["transition"];
        if t["draining"].as_array().is_some_and(|d| d.is_empty()) {
            assert_eq!(t["state"], "steady");
            let subs = status["substrates"].as_array().unwrap();
            let next = subs.iter().find(|s| s["schema"] == "next").unwrap();
            assert_eq!(next["routing"], "active", "{status}");
            break;
        }
        assert!(
            Instant::now() < deadline,
            "awa never left the routing: {status}"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    for w in &workers {
        if w.pid() as i32 != pid {
            let _ = std::process::Command::new("kill")
                .args(["-TERM", &w.pid().to_string()])
                .status();
        }
    }
    for w in workers {
        let _ = w.finish();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 3)]
async fn an_abort_from_mixed_by_the_runtime_role_loses_nothing() {
    let db = common::migrated_db().await;
    let url = db.url().to_string();
    let tmp = tempfile::tempdir().unwrap();
    let log = tmp.path().join("executions.log");
    let mut conn = PgConnection::connect(&url).await.unwrap();
    step(
        &url,
        &[
            "--schema",
            "next",
            "storage",
            "prepare-queue-storage-schema",
        ],
    );

    // The runtime role, granted on both substrates.
    let role = format!("{}_rt", db.name());
    sqlx::raw_sql(sqlx::AssertSqlSafe(format!(
        "CREATE ROLE {role} LOGIN PASSWORD 'pw'"
    )))
    .execute(&mut conn)
    .await
    .unwrap();
    for schema in ["awa", "next"] {
        step(
            &url,
            &[
                "--schema",
                schema,
                "storage",
                "grant-runtime-role",
                "--role",
                &role,
            ],
        );
    }
    let rt = common::as_role(&url, &role);

    // Workers and the producer as the runtime role.
    let mut workers = vec![worker(&rt, &log), worker(&rt, &log)];
    let stop = Arc::new(AtomicBool::new(false));
    let produced = producer(rt.clone(), stop.clone());
    tokio::time::sleep(Duration::from_secs(2)).await;

    // The steps need the migrator: the runtime role is told so, and the
    // state does not change.
    awa(&rt, &["storage", "prepare", "--target-schema", "next"]).refused("migrator");
    assert_eq!(
        step(&url, &["storage", "status"])["transition"]["state"],
        "steady"
    );
    step(&url, &["storage", "prepare", "--target-schema", "next"]);
    tokio::time::sleep(Duration::from_millis(1500)).await;
    awa(&rt, &["storage", "enter-mixed-transition"]).refused("migrator");
    step(&url, &["storage", "enter-mixed-transition"]);
    tokio::time::sleep(Duration::from_secs(2)).await;
    awa(&rt, &["storage", "abort"]).refused("migrator");
    let a = step(&url, &["storage", "abort"]);
    assert_eq!(
        (a["state"].as_str(), a["active_schema"].as_str()),
        (Some("steady"), Some("awa"))
    );
    // Operator reads by the runtime role follow the routing.
    let status = step(&rt, &["storage", "status"]);
    assert_eq!(status["transition"]["state"], "steady", "{status}");
    step(&rt, &["queue", "stats"]);
    step(&rt, &["job", "list", "--queue", QUEUE]);

    tokio::time::sleep(Duration::from_secs(2)).await;
    stop.store(true, Ordering::Relaxed);
    let made = produced.await.unwrap();
    all_completed(&mut conn, &made, &[]).await;
    let now = states(&mut conn).await;
    assert!(
        made.iter().any(|(id, _)| now[id][0].0 == "next"),
        "some work ran in the target before the abort"
    );
    let runs = executions(&log);
    for (id, _) in &made {
        assert_eq!(
            runs.get(id).copied(),
            Some(1),
            "job {id} ran exactly once (no kills here)"
        );
    }
    // The aborted target drains out of the routing.
    let deadline = Instant::now() + Duration::from_secs(60);
    while !step(&url, &["storage", "status"])["transition"]["draining"]
        .as_array()
        .is_some_and(|d| d.is_empty())
    {
        assert!(
            Instant::now() < deadline,
            "the aborted target never drained"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    for w in &workers {
        w.terminate();
    }
    for w in workers.drain(..) {
        assert!(w.finish().ok());
    }
    sqlx::raw_sql(sqlx::AssertSqlSafe(format!(
        "DROP OWNED BY {role}; DROP ROLE {role}"
    )))
    .execute(&mut conn)
    .await
    .unwrap();
}

#[tokio::test]
async fn bad_transition_input_gets_a_clear_refusal_and_changes_nothing() {
    let db = common::migrated_db().await;
    let url = db.url().to_string();
    let status = || step(&url, &["storage", "status"])["transition"].clone();
    let before = status();
    awa(&url, &["storage", "prepare", "--target-schema", "nosuch"])
        .refused("not a prepared substrate");
    awa(&url, &["storage", "prepare", "--target-schema", "awa"]).refused("already the active");
    awa(
        &url,
        &["storage", "prepare", "--target-schema", "Bad-Name!"],
    )
    .refused("invalid");
    awa(&url, &["storage", "abort"]).refused("nothing to abort");
    awa(&url, &["storage", "finalize"]).refused("no transition is in progress");
    awa(&url, &["storage", "enter-mixed-transition"]).refused("no transition is prepared");
    // --schema must name a prepared substrate.
    awa(&url, &["--schema", "nosuch", "job", "list"]).refused("not a prepared substrate");
    awa(&url, &["--schema", "Bad!", "queue", "stats"]).refused("invalid");
    let pinned = common::awa_env(
        &[("DATABASE_URL", url.as_str()), ("AWA_SCHEMA", "nosuch")],
        &["job", "enqueue", "--queue", QUEUE, "--kind", "k"],
    );
    pinned.refused("not a prepared substrate");
    // Dropping: never awa, never one in use, never one with work.
    awa(
        &url,
        &["--schema", "awa", "storage", "drop-substrate", "--yes"],
    )
    .refused("awa");
    step(
        &url,
        &[
            "--schema",
            "next",
            "storage",
            "prepare-queue-storage-schema",
        ],
    );
    awa(&url, &["--schema", "next", "storage", "drop-substrate"]).refused("--yes");
    step(
        &url,
        &[
            "--schema", "next", "job", "enqueue", "--queue", QUEUE, "--kind", "k",
        ],
    );
    awa(
        &url,
        &["--schema", "next", "storage", "drop-substrate", "--yes"],
    )
    .refused("still holds");
    step(&url, &["storage", "prepare", "--target-schema", "next"]);
    awa(
        &url,
        &["--schema", "next", "storage", "drop-substrate", "--yes"],
    )
    .refused("in use");
    step(&url, &["storage", "abort"]);
    assert_eq!(status()["state"], before["state"]);
    assert_eq!(status()["active_schema"], "awa");
    // A pinned enqueue went exactly where it was told.
    let listed = step(&url, &["--schema", "next", "job", "list"]);
    assert_eq!(listed.as_array().map(Vec::len), Some(1), "{listed}");
}
