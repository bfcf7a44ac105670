//! Rate limits and global concurrency (docs/adr/0016) across real worker
//! processes that share only the database, one of them killed with
//! SIGKILL.
//!
//! Starts are counted from the attempt history (ADR 11), as an operator
//! reads it (`awa job dump`, `HistoryPlane::job`): every attempt of every
//! job the run touched, the rescued and retried ones included, each with
//! its start. Running attempts are counted from the batches and their
//! closure links, and sampled from the read view the stats show.

mod common;

use awa_core::{JobId, SchemaName};
use awa_history::{AttemptRecord, HistoryPlane, PgHistoryPlane};
use common::{awa, enqueue, migrated_db, spawn_awa};
use sqlx::{Connection, Row};
use std::time::{Duration, Instant};

fn worker(url: &str, queue: &str, handler: &str, concurrency: &str) -> common::Running {
    spawn_awa(
        url,
        &[
            "worker",
            "run",
            "--queue",
            queue,
            "--handler",
            handler,
            "--concurrency",
            concurrency,
            "--no-maintenance",
        ],
    )
}

fn configure(url: &str, args: &[&str]) -> serde_json::Value {
    let mut all = vec!["--json", "queue", "configure"];
    all.extend_from_slice(args);
    awa(url, &all).json()
}

/// Every attempt of every job of `queue` that has one, from the attempt
/// history: (job id, attempt record).
async fn attempts(conn: &mut sqlx::PgConnection, queue: &str) -> Vec<(i64, AttemptRecord)> {
    // Jobs never claimed have no attempt; a job put back (released or
    // rescued) keeps its records in its body.
    let ids: Vec<i64> = sqlx::query(
        "SELECT id FROM awa.jobs WHERE queue = $1 AND (state <> 'available' OR attempts IS NOT NULL)",
    )
    .bind(queue)
    .fetch_all(&mut *conn)
    .await
    .unwrap()
    .iter()
    .map(|r| r.get("id"))
    .collect();
    let history = PgHistoryPlane::new(SchemaName::default_schema());
    let mut all = Vec::new();
    for id in ids {
        let job = history
            .job(&mut *conn, JobId(id))
            .await
            .unwrap()
            .unwrap_or_else(|| panic!("job {id} is gone"));
        all.extend(
            job.attempts
                .expect("a one-job read has attempts")
                .into_iter()
                .map(|a| (id, a)),
        );
    }
    all
}

/// Every start, in order (microseconds since the epoch).
fn starts(attempts: &[(i64, AttemptRecord)]) -> Vec<i64> {
    let mut starts: Vec<i64> = attempts
        .iter()
        .map(|(id, a)| {
            a.started_at
                .clone()
                .and_then(|t| t.time())
                .unwrap_or_else(|| panic!("job {id}: attempt without a start: {a:?}"))
                .timestamp_micros()
        })
        .collect();
    starts.sort_unstable();
    starts
}

/// The most starts in any half-open window of `window` (sliding: every
/// window that begins at a start, which is where a maximum begins).
fn most_in_any_window(starts: &[i64], window: Duration) -> usize {
    let w = window.as_micros() as i64;
    let mut most = 0;
    let mut end = 0;
    for (i, &t) in starts.iter().enumerate() {
        while end < starts.len() && starts[end] < t + w {
            end += 1;
        }
        most = most.max(end - i);
    }
    most
}

#[test]
fn the_window_count_is_exact() {
    let s = |v: &[i64]| most_in_any_window(v, Duration::from_secs(1));
    assert_eq!(s(&[]), 0);
    assert_eq!(s(&[0, 999_999]), 2);
    assert_eq!(s(&[0, 1_000_000]), 1);
    assert_eq!(s(&[0, 500_000, 1_200_000, 1_400_000]), 3);
}

/// The runtime `awa.runtimes` registered for the process `pid`.
async fn instance_of(conn: &mut sqlx::PgConnection, pid: u32) -> uuid::Uuid {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let row =
            sqlx::query("SELECT instance_id FROM awa.runtimes WHERE pid = $1 AND role = 'worker'")
                .bind(pid as i32)
                .fetch_optional(&mut *conn)
                .await
                .unwrap();
        if let Some(row) = row {
            return row.get("instance_id");
        }
        assert!(Instant::now() < deadline, "worker {pid} never registered");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The jobs of `queue` whose handlers run under `instance` now.
async fn running_under(
    conn: &mut sqlx::PgConnection,
    queue: &str,
    instance: uuid::Uuid,
) -> Vec<i64> {
    sqlx::query("SELECT id FROM awa.jobs WHERE queue = $1 AND state = 'running' AND holder = $2")
        .bind(queue)
        .bind(instance)
        .fetch_all(conn)
        .await
        .unwrap()
        .iter()
        .map(|r| r.get("id"))
        .collect()
}

#[tokio::test]
async fn a_rate_limit_of_50_per_second_holds_across_four_workers_and_a_sigkill() {
    let db = migrated_db().await;
    let url = db.url().to_string();
    let set = configure(&url, &["lim", "--rate-limit", "50/1s"]);
    assert_eq!(set["limits"][0]["rate_limit"], 50, "{set}");
    // More than 60 s of work at 50/s: the limit, not the backlog, sets
    // the pace for the whole run.
    enqueue(&url, "lim", "k", 4000);
    let mut conn = sqlx::PgConnection::connect(&url).await.unwrap();

    // The leader rescues the killed worker's attempts. Its rings rotate
    // once at start (the template's ledger is old) and then not for an
    // hour, so no claim batch of the run is reclaimed before it is read:
    // a completed attempt's start comes from its batch while the claim
    // ring holds it (ADR 11).
    let maint = spawn_awa(
        &url,
        &[
            "maint",
            "run",
            "--rescue-after",
            "2s",
            "--rotate-interval",
            "1h",
        ],
    );
    tokio::time::sleep(Duration::from_secs(3)).await;
    let mut workers: Vec<_> = (0..4)
        .map(|_| worker(&url, "lim", "sleep:1000", "50"))
        .collect();
    let began = Instant::now();
    let victim = instance_of(&mut conn, workers[0].pid()).await;
    // Mid-run, and only while its handlers run: their attempts must be
    // rescued and run again, each start counted.
    tokio::time::sleep(Duration::from_secs(20)).await;
    let held = loop {
        let held = running_under(&mut conn, "lim", victim).await;
        if !held.is_empty() {
            workers[0].kill9();
            break held;
        }
        assert!(
            began.elapsed() < Duration::from_secs(40),
            "the first worker never held running jobs"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    };
    let killed_at = began.elapsed();
    let run: u64 = std::env::var("AWA_LIMIT_RUN_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(60);
    let rest = Duration::from_secs(run).saturating_sub(began.elapsed());
    tokio::time::sleep(rest).await;
    for w in &workers[1..] {
        w.terminate();
    }
    for w in workers.drain(1..) {
        let run = w.finish();
        assert!(run.ok(), "{run:#?}");
    }
    maint.terminate();
    let _ = maint.finish();

    let attempts = attempts(&mut conn, "lim").await;
    let starts = starts(&attempts);
    let most = most_in_any_window(&starts, Duration::from_secs(1));
    assert!(
        most <= 50,
        "{most} starts in one second ({} in all)",
        starts.len()
    );
    // The run was limited, not idle: well over half the limit on average
    // (a loose floor; the bound above is the point).
    assert!(
        starts.len() as u64 >= 25 * run,
        "only {} starts in {run} s",
        starts.len()
    );
    // The killed worker's attempts: each job it was running ended in the
    // history by rescue (or, in the instant before the kill, by its own
    // completion), at least one was rescued, and none is left open.
    let by_victim = |id: i64| {
        attempts
            .iter()
            .filter(move |(j, a)| *j == id && a.runtime.as_ref().and_then(|r| r.id) == Some(victim))
            .map(|(_, a)| a.outcome.as_str())
    };
    let mut rescued = 0;
    for &id in &held {
        let outcomes: Vec<_> = by_victim(id).collect();
        assert!(
            outcomes
                .iter()
                .all(|o| ["rescued", "completed"].contains(o))
                && !outcomes.is_empty(),
            "job {id}, running under the killed worker: {outcomes:?}"
        );
        rescued += outcomes.iter().filter(|o| **o == "rescued").count();
    }
    assert!(rescued > 0, "none of {held:?} was rescued");
    let open: Vec<_> = attempts
        .iter()
        .filter(|(_, a)| {
            a.outcome == "running" && a.runtime.as_ref().and_then(|r| r.id) == Some(victim)
        })
        .collect();
    assert!(open.is_empty(), "the killed worker still holds {open:?}");
    eprintln!(
        "rate limit: {} starts in {run} s, at most {most} in any second; killed at {killed_at:?} \
         holding {} running jobs, {rescued} rescued",
        starts.len(),
        held.len()
    );
}

/// The most attempts open at any claim of the queue, from the evidence:
/// at each batch's admission instant, the items of batches admitted no
/// later whose closing link was not yet written. A link's `closed_at` is
/// its finish's start, never after its commit, so this never counts an
/// attempt as closed before the claim could see it closed.
async fn most_open_at_any_claim(conn: &mut sqlx::PgConnection, queue: &str) -> i64 {
    sqlx::query(
        "WITH items AS (
             SELECT b.slot, b.batch_id, b.claimed_at, i.item
               FROM awa.claim_batches b
              CROSS JOIN LATERAL generate_subscripts(b.job_ids, 1) AS i(item)
              WHERE b.queue = $1),
         spans AS (
             SELECT it.claimed_at AS began,
                    (SELECT c.closed_at FROM awa.claim_closures c
                      WHERE c.slot = it.slot AND c.batch_id = it.batch_id
                        AND it.item = ANY (c.items)) AS ended
               FROM items it)
         SELECT coalesce(max((SELECT count(*) FROM spans s
                               WHERE s.began <= b.claimed_at
                                 AND (s.ended IS NULL OR s.ended > b.claimed_at))), 0) AS most
           FROM awa.claim_batches b WHERE b.queue = $1",
    )
    .bind(queue)
    .fetch_one(conn)
    .await
    .unwrap()
    .get("most")
}

#[tokio::test]
async fn a_global_concurrency_of_5_holds_across_three_workers() {
    let db = migrated_db().await;
    let url = db.url().to_string();
    let set = configure(&url, &["conc", "--global-concurrency", "5"]);
    assert_eq!(set["limits"][0]["global_concurrency"], 5, "{set}");
    enqueue(&url, "conc", "k", 150);

    // 30 permits between them; 5 may be used.
    let workers: Vec<_> = (0..3)
        .map(|_| worker(&url, "conc", "sleep:100", "10"))
        .collect();
    let mut conn = sqlx::PgConnection::connect(&url).await.unwrap();
    let mut most_seen = 0i64;
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let row = sqlx::query(
            "SELECT count(*) FILTER (WHERE state IN ('running', 'buffered')) AS open,
                    count(*) FILTER (WHERE state = 'completed') AS done
               FROM awa.jobs WHERE queue = 'conc'",
        )
        .fetch_one(&mut conn)
        .await
        .unwrap();
        let open: i64 = row.get("open");
        most_seen = most_seen.max(open);
        if row.get::<i64, _>("done") == 150 {
            break;
        }
        assert!(Instant::now() < deadline, "150 jobs not done in 2 minutes");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    for w in &workers {
        w.terminate();
    }
    for w in workers {
        let run = w.finish();
        assert!(run.ok(), "{run:#?}");
    }
    assert!(most_seen <= 5, "{most_seen} running at once");
    let most = most_open_at_any_claim(&mut conn, "conc").await;
    if most > 5 {
        let rows = sqlx::query(
            "SELECT b.batch_id, b.claimed_at::text AS c, b.job_ids::text AS ids,
                    (SELECT string_agg(c.items::text || '@' || c.closed_at::text || ':' || c.outcome, ' ')
                       FROM awa.claim_closures c WHERE c.batch_id = b.batch_id) AS links
               FROM awa.claim_batches b WHERE b.queue = 'conc' ORDER BY b.claimed_at",
        )
        .fetch_all(&mut conn)
        .await
        .unwrap();
        for r in rows {
            eprintln!(
                "{} {} {} {:?}",
                r.get::<i64, _>("batch_id"),
                r.get::<String, _>("c"),
                r.get::<String, _>("ids"),
                r.get::<Option<String>, _>("links")
            );
        }
    }
    assert!(most <= 5, "{most} open at one claim");
    assert_eq!(most, 5, "the limit, not the workers, bounded the run");
    let stats = awa(&url, &["--json", "queue", "stats", "conc"]).json();
    assert_eq!(stats["conc"]["completed"], 150, "{stats}");
}

#[tokio::test]
async fn a_killed_workers_share_of_the_global_concurrency_is_released_by_rescue() {
    let db = migrated_db().await;
    let url = db.url().to_string();
    configure(&url, &["conc", "--global-concurrency", "2"]);
    enqueue(&url, "conc", "k", 2);
    // It takes both shares and never finishes.
    let mut stuck = worker(&url, "conc", "sleep:600000", "4");
    let mut conn = sqlx::PgConnection::connect(&url).await.unwrap();
    let open = "SELECT count(*) AS n FROM awa.jobs WHERE queue = 'conc' AND state IN ('running', 'buffered')";
    let deadline = Instant::now() + Duration::from_secs(60);
    while sqlx::query(open)
        .fetch_one(&mut conn)
        .await
        .unwrap()
        .get::<i64, _>("n")
        < 2
    {
        assert!(Instant::now() < deadline, "the two jobs were not claimed");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    enqueue(&url, "conc", "k", 3);
    let fast = worker(&url, "conc", "noop", "4");
    tokio::time::sleep(Duration::from_secs(2)).await;
    let done = "SELECT count(*) AS n FROM awa.jobs WHERE queue = 'conc' AND state = 'completed'";
    let n: i64 = sqlx::query(done)
        .fetch_one(&mut conn)
        .await
        .unwrap()
        .get("n");
    assert_eq!(n, 0, "both shares are held: nothing else may start");

    stuck.kill9();
    let maint = spawn_awa(&url, &["maint", "run", "--rescue-after", "2s"]);
    while sqlx::query(done)
        .fetch_one(&mut conn)
        .await
        .unwrap()
        .get::<i64, _>("n")
        < 5
    {
        assert!(
            Instant::now() < deadline + Duration::from_secs(60),
            "the dead worker's shares were never released"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    fast.terminate();
    assert!(fast.finish().ok());
    maint.terminate();
    let _ = maint.finish();
}
