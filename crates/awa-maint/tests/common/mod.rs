//! Fixtures shared by the job-path and ring tests.

#![allow(dead_code)] // each test binary uses its own subset

use awa_core::{ClaimedJob, QueueName, SchemaName};
use awa_exec::{ExecPlane, Frontier, PgExecPlane};
use sqlx::PgPool;
use std::time::Duration;

pub fn schema() -> SchemaName {
    SchemaName::default_schema()
}

/// A fresh migrated database and a pool on it.
pub async fn setup() -> (awa_harness::TestDb, PgPool) {
    let db = awa_maint::migrated_test_db().await.expect("test database");
    let pool = db.pool().await.expect("pool");
    (db, pool)
}

/// Claim until `expect` jobs are in hand (or 10 s pass), then make sure
/// nothing more comes. An empty claim can just mean "frontier not settled
/// yet": it waits for every transaction that was running on the cluster
/// when it was read, other tests' included.
pub async fn claim_all(pool: &PgPool, q: &str, limit: i32, expect: usize) -> Vec<ClaimedJob> {
    let plane = PgExecPlane::new(schema());
    let mut frontier = Frontier::default();
    let mut out = Vec::new();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    let mut empty_after = 0;
    while empty_after < 5 {
        let mut conn = pool.acquire().await.unwrap();
        let got = plane
            .claim(
                &mut conn,
                &QueueName::new(q).unwrap(),
                limit,
                &mut frontier,
                None,
            )
            .await
            .unwrap();
        let was_empty = got.is_empty();
        out.extend(got);
        if out.len() >= expect && was_empty {
            empty_after += 1;
        }
        if was_empty {
            if tokio::time::Instant::now() > deadline {
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
    out
}
