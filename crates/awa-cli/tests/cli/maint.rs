//! The maintenance leader and ring reclamation as operators run them:
//! separate `awa` processes, killed with SIGKILL where the issue says so.

use crate::common;

use common::{awa, spawn_awa, worker_run};
use std::time::{Duration, Instant};

async fn leader_pid(url: &str) -> Option<i64> {
    let status = awa(url, &["--json", "storage", "status"]).json();
    let leader = &status["maintenance"]["leader"];
    (leader["holding"] == true)
        .then(|| leader["pid"].as_i64())
        .flatten()
}

async fn wait_for<T>(what: &str, limit: Duration, mut probe: impl AsyncFnMut() -> Option<T>) -> T {
    let start = Instant::now();
    loop {
        if let Some(v) = probe().await {
            return v;
        }
        assert!(
            start.elapsed() < limit,
            "timed out after {limit:?} waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test]
async fn killing_the_leader_hands_over_within_fifteen_seconds() {
    let db = common::migrated_db().await;
    let url = db.url().to_string();
    let mut a = spawn_awa(&url, &["maint", "run", "--rotate-interval", "200ms"]);
    let mut b = spawn_awa(&url, &["maint", "run", "--rotate-interval", "200ms"]);
    let first = wait_for("a leader", Duration::from_secs(20), async || {
        leader_pid(&url).await
    })
    .await;
    let (leader, other) = if first == a.pid() as i64 {
        (&mut a, &mut b)
    } else {
        (&mut b, &mut a)
    };
    assert_eq!(first, leader.pid() as i64);

    let pool = db.pool().await.unwrap();
    let holders = async || -> i64 {
        sqlx::query_scalar(
            "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND classid = 6387553 AND objid = 2 AND granted \
               AND database = (SELECT oid FROM pg_database WHERE datname = current_database())",
        )
        .fetch_one(&pool)
        .await
        .unwrap()
    };
    assert_eq!(holders().await, 1);

    let killed_at = Instant::now();
    leader.kill9();
    let next = wait_for("a new leader", Duration::from_secs(15), async || {
        assert!(holders().await <= 1, "two processes hold the leader lock");
        leader_pid(&url).await.filter(|p| *p != first)
    })
    .await;
    assert_eq!(next, other.pid() as i64);
    eprintln!("leadership moved in {:?}", killed_at.elapsed());
    other.terminate();
    assert!(other_finish(other));
}

fn other_finish(r: &mut common::Running) -> bool {
    // Wait for the graceful exit after SIGTERM.
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(20) {
        if r.exited() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    false
}

#[tokio::test]
async fn a_worker_killed_mid_job_is_rescued_and_its_job_completed_once() {
    let db = common::migrated_db().await;
    let url = db.url().to_string();
    let ids = awa(
        &url,
        &[
            "--json", "job", "enqueue", "--queue", "k9", "--kind", "slow",
        ],
    )
    .json();
    let id = ids["ids"][0].as_i64().unwrap();

    let mut doomed = spawn_awa(
        &url,
        &worker_run("k9", "sleep:60000", &["--no-maintenance"]),
    );
    wait_for("the job to start", Duration::from_secs(20), async || {
        let job = awa(&url, &["--json", "job", "dump", &id.to_string()]).json();
        (job["state"] == "running").then_some(())
    })
    .await;
    doomed.kill9();

    // A healthy worker with maintenance: rescue after 2 s of silence, then
    // the retry runs here.
    let rescuer = awa(
        &url,
        &[
            "--json",
            "worker",
            "run",
            "--queue",
            "k9",
            "--handler",
            "noop",
            "--exit-when-idle",
            "--rescue-after",
            "2s",
        ],
    );
    assert!(rescuer.ok(), "{rescuer:#?}");
    let job = awa(&url, &["--json", "job", "dump", &id.to_string()]).json();
    assert_eq!(job["state"], "completed");
    assert_eq!(
        job["attempt"], 2,
        "the rescued attempt counted; the second completed"
    );
    let stats = awa(&url, &["--json", "queue", "stats", "k9"]).json();
    assert_eq!(stats["k9"]["completed"], 1, "completed exactly once");
}

#[tokio::test]
async fn a_hundred_thousand_jobs_through_rotation_complete_once_and_history_is_pruned() {
    const BATCHES: usize = 20;
    const PER_BATCH: usize = 5_000;
    let db = common::migrated_db().await;
    let url = db.url().to_string();
    let maint: Vec<_> = (0..2)
        .map(|_| spawn_awa(&url, &["maint", "run", "--rotate-interval", "200ms"]))
        .collect();
    let workers: Vec<_> = (0..2)
        .map(|_| {
            spawn_awa(
                &url,
                &worker_run("bulk", "noop", &["--concurrency", "64", "--no-maintenance"]),
            )
        })
        .collect();
    for _ in 0..BATCHES {
        let r = awa(
            &url,
            &[
                "job",
                "enqueue",
                "--queue",
                "bulk",
                "--kind",
                "n",
                "--count",
                &PER_BATCH.to_string(),
            ],
        );
        assert!(r.ok(), "{r:#?}");
    }
    let total = (BATCHES * PER_BATCH) as i64;
    // Polled from the exact counters `queue stats` reads its terminal
    // totals from: the whole of `queue stats` also counts the live jobs,
    // a read of seconds of CPU at this size, which every 100 ms would
    // take a core from the workers it waits for.
    let pool = db.pool().await.unwrap();
    wait_for(
        "every job to complete",
        Duration::from_secs(300),
        async || {
            let done: i64 = sqlx::query_scalar(
                "SELECT coalesce(sum(n), 0)::bigint FROM ( \
                   SELECT total AS n FROM awa.count_rollups WHERE queue = 'bulk' AND state = 'completed' \
                   UNION ALL \
                   SELECT delta FROM awa.count_deltas WHERE queue = 'bulk' AND state = 'completed') c",
            )
            .fetch_one(&pool)
            .await
            .unwrap();
            (done >= total).then_some(())
        },
    )
    .await;
    let stats = awa(&url, &["--json", "queue", "stats", "bulk"]).json();
    assert_eq!(
        stats["bulk"]["completed"], total,
        "each job completed exactly once"
    );
    for state in ["available", "running", "retryable", "failed"] {
        assert_eq!(
            stats["bulk"][state].as_i64().unwrap_or(0),
            0,
            "{state}: {stats}"
        );
    }

    // History is reclaimed down to the retention window.
    let retained = wait_for(
        "history to be pruned",
        Duration::from_secs(60),
        async || {
            let n: i64 = sqlx::query_scalar("SELECT count(*) FROM (SELECT job_id, queue, state FROM awa.done_entries UNION ALL SELECT u.job_id, b.queue, 'completed' FROM awa.done_batches b, unnest(b.job_ids) AS u(job_id)) d")
                .fetch_one(&pool)
                .await
                .unwrap();
            (n < total / 2).then_some(n)
        },
    )
    .await;
    let status = awa(&url, &["--json", "storage", "status"]).json();
    let dead: i64 = status["substrates"][0]["slot_rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["dead_rows"].as_i64().unwrap_or(0))
        .sum();
    let all_dead: i64 = sqlx::query_scalar(
        "SELECT coalesce(sum(n_dead_tup), 0)::bigint FROM pg_stat_user_tables WHERE schemaname = 'awa'",
    )
    .fetch_one(&pool)
    .await
    .unwrap();
    eprintln!(
        "retained terminal rows: {retained} of {total}; dead tuples in ring slots: {dead}, in schema awa: {all_dead} ({:.4} per job)",
        all_dead as f64 / total as f64
    );
    assert!(
        (all_dead as f64) < 0.05 * total as f64,
        "dead tuples must stay a small fraction of jobs: {all_dead}"
    );
    for mut p in maint.into_iter().chain(workers) {
        p.kill9();
    }
}
