//! Rate limits and global concurrency (docs/adr/0015) across real worker
//! processes that share only the database, one of them killed with
//! SIGKILL.
//!
//! Starts are counted from the claim batches: every attempt starts as an
//! item of one (rescued and retried attempts too), and its `claimed_at`
//! is the attempt's start in the attempt history (ADR 11: a completed
//! attempt's start is read from its batch; the records of the others copy
//! it). Running attempts are counted from the batches and their closure
//! links, and sampled from the read view the stats show.

mod common;

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

/// Every attempt start of the queue, in order (microseconds since epoch).
async fn starts(conn: &mut sqlx::PgConnection, queue: &str) -> Vec<i64> {
    sqlx::query(
        "SELECT (extract(epoch FROM b.claimed_at) * 1000000)::bigint AS at
           FROM awa.claim_batches b CROSS JOIN LATERAL unnest(b.job_ids) AS j(id)
          WHERE b.queue = $1 ORDER BY 1",
    )
    .bind(queue)
    .fetch_all(conn)
    .await
    .unwrap()
    .iter()
    .map(|r| r.get::<i64, _>("at"))
    .collect()
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

#[tokio::test]
async fn a_rate_limit_of_50_per_second_holds_across_four_workers_and_a_sigkill() {
    let db = migrated_db().await;
    let url = db.url().to_string();
    let set = configure(&url, &["lim", "--rate-limit", "50/1s"]);
    assert_eq!(set["limits"][0]["rate_limit"], 50, "{set}");
    // More than 60 s of work at 50/s: the limit, not the backlog, sets
    // the pace for the whole run.
    enqueue(&url, "lim", "k", 4000);

    // The leader rescues the killed worker's attempts. Its rings rotate
    // once at start (the template's ledger is old) and then not for an
    // hour, so no claim batch of the run is reclaimed before it is
    // counted: a completed attempt's start is its batch's claimed_at,
    // kept while the claim ring holds the batch (ADR 11).
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
    std::thread::sleep(Duration::from_secs(3));
    let mut workers: Vec<_> = (0..4)
        .map(|_| worker(&url, "lim", "sleep:1000", "50"))
        .collect();
    let began = Instant::now();
    std::thread::sleep(Duration::from_secs(20));
    // Mid-run, with claimed jobs in hand: its attempts are rescued and run
    // again, each start counted.
    workers[0].kill9();
    let run: u64 = std::env::var("AWA_LIMIT_RUN_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(60);
    eprintln!("killed at {:?}", chrono::Utc::now());
    let mut dbg = sqlx::PgConnection::connect(&url).await.unwrap();
    while began.elapsed() < Duration::from_secs(run) {
        std::thread::sleep(Duration::from_millis(1000));
        let rows = sqlx::query("SELECT pid, state, wait_event_type || ':' || coalesce(wait_event, '') AS w, left(query, 60) AS q, (now() - xact_start)::text AS x FROM pg_stat_activity WHERE datname = current_database() AND state <> 'idle' AND pid <> pg_backend_pid()")
            .fetch_all(&mut dbg).await.unwrap();
        for r in rows {
            eprintln!(
                "{:?} {:?} {:?} {:?} {:?} {:?}",
                chrono::Utc::now(),
                r.get::<i32, _>("pid"),
                r.get::<Option<String>, _>("state"),
                r.get::<Option<String>, _>("w"),
                r.get::<Option<String>, _>("q"),
                r.get::<Option<String>, _>("x")
            );
        }
    }
    for w in &workers[1..] {
        w.terminate();
    }
    for w in workers.drain(1..) {
        let run = w.finish();
        eprintln!(
            "worker stderr: {}",
            &run.stderr[..run.stderr.len().min(3000)]
        );
        assert!(run.ok(), "{run:#?}");
    }
    maint.terminate();
    let _ = maint.finish();

    let mut conn = sqlx::PgConnection::connect(&url).await.unwrap();
    let starts = starts(&mut conn, "lim").await;
    let most = most_in_any_window(&starts, Duration::from_secs(1));
    assert!(
        most <= 50,
        "{most} starts in one second ({} in all)",
        starts.len()
    );
    let shape: Vec<String> = sqlx::query(
        "SELECT to_char(date_trunc('second', claimed_at), 'SS') || ':' || string_agg(cardinality(job_ids)::text, ',' ORDER BY claimed_at) AS s
           FROM awa.claim_batches WHERE queue = 'lim' GROUP BY date_trunc('second', claimed_at) ORDER BY 1",
    )
    .fetch_all(&mut conn)
    .await
    .unwrap()
    .iter()
    .map(|r| r.get::<String, _>("s"))
    .collect();
    eprintln!("batches per second: {shape:#?}");
    // The run was limited, not idle: well over half the limit on average
    // (a loose floor; the bound above is the point).
    assert!(
        starts.len() as u64 >= 25 * run,
        "only {} starts in {run} s",
        starts.len()
    );
    let rescued: i64 = sqlx::query(
        "SELECT count(*) AS n
           FROM awa.claim_closures c
           JOIN awa.claim_batches b ON b.slot = c.slot AND b.batch_id = c.batch_id
          CROSS JOIN LATERAL generate_subscripts(c.items, 1) AS i(k)
          WHERE b.queue = 'lim' AND coalesce(c.outcomes[i.k], c.outcome) = 'rescued'",
    )
    .fetch_one(&mut conn)
    .await
    .unwrap()
    .get("n");
    let outcomes: Option<String> = sqlx::query(
        "SELECT string_agg(DISTINCT coalesce(c.outcomes::text, c.outcome), ' ') AS o FROM awa.claim_closures c",
    )
    .fetch_one(&mut conn)
    .await
    .unwrap()
    .get("o");
    let states: Option<String> = sqlx::query(
        "SELECT string_agg(state || '=' || n, ' ') AS o FROM (SELECT state, count(*) AS n FROM awa.jobs WHERE queue = 'lim' GROUP BY 1) s",
    )
    .fetch_one(&mut conn)
    .await
    .unwrap()
    .get("o");
    eprintln!("closure outcomes: {outcomes:?}; states: {states:?}");
    // Whether the killed worker held attempts at that instant depends on
    // which workers won the window's claims just before; when it did,
    // rescue closed them (counted here) and their next runs are starts
    // like any other. The bound above holds either way.
    eprintln!(
        "rate limit: {} starts in {run} s, at most {most} in any second, {rescued} rescued",
        starts.len()
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
