//! The claim's limits on one connection, deterministically (ADR 16):
//! partitions, per-kind limits, the prefix rule and removal. The bounds
//! across processes and SIGKILL: `awa-cli/tests/cli_limits.rs`.

use crate::common;

use awa_control::limits::{ArgsPath, GlobalConcurrency, LimitChange, RateLimit};
use awa_core::{ClaimedJob, NewJob, QueueName};
use awa_exec::{ExecPlane, Finish, PgExecPlane};
use common::{claim_all, enqueue_jobs, schema, setup};
use std::time::Duration;

fn q(name: &str) -> QueueName {
    QueueName::new(name).unwrap()
}

fn tenants(claimed: &[ClaimedJob]) -> Vec<String> {
    claimed
        .iter()
        .map(|c| {
            format!(
                "{}:{}",
                c.kind,
                c.args["tenant"].as_str().unwrap_or_default()
            )
        })
        .collect()
}

fn job(queue: &str, kind: &str, tenant: &str) -> NewJob {
    NewJob::new(q(queue), kind, serde_json::json!({ "tenant": tenant }))
}

#[tokio::test]
async fn a_partitioned_concurrency_admits_a_prefix_and_releases_on_finish() {
    let (_db, pool) = setup().await;
    let mut conn = pool.acquire().await.unwrap();
    LimitChange {
        kind: None,
        rate: None,
        concurrency: Some(Some(GlobalConcurrency {
            jobs: 1,
            by: Some(ArgsPath::parse("args.tenant").unwrap()),
        })),
    }
    .apply(&mut conn, &q("p"))
    .await
    .unwrap();
    enqueue_jobs(
        &pool,
        &[
            job("p", "k", "a"),
            job("p", "k", "b"),
            job("p", "k", "a"),
            job("p", "k", "b"),
        ],
    )
    .await;
    // a and b each get their one share; the second a is refused, and the
    // second b behind it waits too (lane order).
    let first = claim_all(&pool, "p", 10, 2).await;
    assert_eq!(tenants(&first), ["k:a", "k:b"]);

    let exec = PgExecPlane::new(schema());
    let done: Vec<_> = first[..1]
        .iter()
        .map(|c| (c.token, Finish::Complete))
        .collect();
    assert!(exec.finish(&mut conn, &done).await.unwrap()[0].accepted);
    // a's share is free again; b's is still held by the running b.
    let second = claim_all(&pool, "p", 10, 1).await;
    assert_eq!(tenants(&second), ["k:a"]);
}

#[tokio::test]
async fn a_per_kind_rate_limit_counts_only_that_kind_and_removing_it_frees_the_lane() {
    let (_db, pool) = setup().await;
    let mut conn = pool.acquire().await.unwrap();
    let rate = |on: bool| LimitChange {
        kind: Some("x".into()),
        rate: Some(on.then(|| RateLimit {
            jobs: 2,
            period: Duration::from_secs(3600),
            by: None,
        })),
        concurrency: None,
    };
    let set = rate(true).apply(&mut conn, &q("r")).await.unwrap();
    assert_eq!(set.len(), 1);
    assert_eq!(set[0].kind.as_deref(), Some("x"));
    enqueue_jobs(
        &pool,
        &[
            job("r", "y", ""),
            job("r", "x", ""),
            job("r", "x", ""),
            job("r", "x", ""),
            job("r", "y", ""),
        ],
    )
    .await;
    let first = claim_all(&pool, "r", 10, 3).await;
    assert_eq!(tenants(&first), ["y:", "x:", "x:"]);
    // Finishing frees no rate: two starts in the hour are two starts.
    let exec = PgExecPlane::new(schema());
    let done: Vec<_> = first.iter().map(|c| (c.token, Finish::Complete)).collect();
    exec.finish(&mut conn, &done).await.unwrap();
    claim_all(&pool, "r", 10, 0).await;

    assert!(
        rate(false)
            .apply(&mut conn, &q("r"))
            .await
            .unwrap()
            .is_empty()
    );
    let rest = claim_all(&pool, "r", 10, 2).await;
    assert_eq!(tenants(&rest), ["x:", "y:"]);
}
