//! Fixtures shared by the job-path and ring tests.

#![allow(dead_code)] // each test binary uses its own subset

use awa_core::{AttemptToken, ClaimedJob, JobId, NewJob, QueueName, SchemaName};
use awa_exec::{ExecPlane, Finish, Finished, Frontier, PgExecPlane};
use awa_ready::{PgReadyPlane, ReadyError, ReadyPlane};
use sqlx::{Connection, PgPool};
use std::time::Duration;

/// Every terminal fact still stored (kept failures included), one row per job `(job_id, queue,
/// state)`, whichever shape it has (done batches list several jobs), and
/// including slots already retired but not yet truncated (unlike
/// `terminal_jobs`). Use as `SELECT ... FROM {TERMINAL_FACTS}`.
pub const TERMINAL_FACTS: &str = "(SELECT job_id, queue, state FROM awa.done_entries UNION ALL SELECT job_id, queue, state FROM awa.failure_entries UNION ALL SELECT u.job_id, b.queue, 'completed' FROM awa.done_batches b, unnest(b.job_ids) AS u(job_id)) d";

pub fn schema() -> SchemaName {
    SchemaName::default_schema()
}

/// Enqueue `jobs` in one call on a pooled connection; their ids (the owner's
/// id where a unique key was taken), in input order.
pub async fn enqueue_jobs(pool: &PgPool, jobs: &[NewJob]) -> Vec<JobId> {
    let mut conn = pool.acquire().await.unwrap();
    PgReadyPlane::new(schema())
        .enqueue(&mut conn, jobs)
        .await
        .unwrap()
        .into_iter()
        .map(|e| e.job_id)
        .collect()
}

/// Finish a batch in one guarded call on a pooled connection.
pub async fn finish_batch(pool: &PgPool, batch: &[(AttemptToken, Finish)]) -> Vec<Finished> {
    let mut conn = pool.acquire().await.unwrap();
    PgExecPlane::new(schema())
        .finish(&mut conn, batch)
        .await
        .unwrap()
}

/// A fresh migrated database and a pool on it.
/// The shortest rotate interval a prune step accepts
/// (`awa_core::bounds::ROTATE_INTERVAL`). Tests that prune a slot as soon
/// as it is sealed also set the history retention to 0 (`keep_no_history`).
pub const ROTATE: Duration = awa_core::bounds::ROTATE_INTERVAL.min;

/// `n` keyless runnable jobs of queue `q` at `priority`, due at `run_at`
/// (a SQL expression; NULL: now), in one call of the SQL producer
/// function: the fastest way to a large backlog. The newest job's id.
pub async fn enqueue_sql(pool: &PgPool, q: &str, n: i64, priority: i16, run_at: &str) -> i64 {
    // Test-made SQL: `run_at` is a literal of the calling test.
    sqlx::query_scalar(sqlx::AssertSqlSafe(format!(
        "SELECT max(job_id) FROM awa.enqueue(
             array_fill($1::text, ARRAY[$2::int]), array_fill('k'::text, ARRAY[$2::int]),
             array_fill('{{\"n\": 1}}'::jsonb, ARRAY[$2::int]), array_fill($3::smallint, ARRAY[$2::int]),
             array_fill(({run_at})::timestamptz, ARRAY[$2::int]), array_fill(NULL::int, ARRAY[$2::int]),
             array_fill(NULL::text, ARRAY[$2::int]), array_fill(NULL::jsonb, ARRAY[$2::int]))"
    )))
    .bind(q)
    .bind(n)
    .bind(priority)
    .fetch_one(pool)
    .await
    .unwrap()
}

/// Keep no terminal history in substrate `awa`: a sealed queue slot may be
/// retired at once, whatever rotate interval prune is given.
pub async fn keep_no_history(pool: &PgPool) {
    sqlx::query("UPDATE awa.substrate_info SET history_retention = interval '0'")
        .execute(pool)
        .await
        .unwrap();
}

/// Make every open attempt of substrate `awa` look abandoned: claimed and
/// last heartbeated a day ago, so `rescue_stale` at the shortest bound it
/// accepts (`awa_core::bounds::RESCUE_AFTER`, 1 s) rescues them all now.
pub async fn make_attempts_stale(pool: &PgPool) {
    sqlx::raw_sql(
        "UPDATE awa.claim_batches SET claimed_at = claimed_at - interval '1 day';
         UPDATE awa.leases SET heartbeat_at = heartbeat_at - interval '1 day';
         UPDATE awa.parked_attempts SET claimed_at = claimed_at - interval '1 day',
                                        heartbeat_at = heartbeat_at - interval '1 day'",
    )
    .execute(pool)
    .await
    .unwrap();
}

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

/// One claim call of `limit` from `q` that takes something, on a frontier
/// of its own. An empty claim can mean the frontier has not settled (see
/// `claim_all`): look again, for up to 10 s.
pub async fn claim_some(pool: &PgPool, q: &str, limit: i32) -> Vec<ClaimedJob> {
    let plane = PgExecPlane::new(schema());
    let queue = QueueName::new(q).unwrap();
    let mut frontier = Frontier::default();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        let mut conn = pool.acquire().await.unwrap();
        let got = plane
            .claim(&mut conn, &queue, limit, &mut frontier, None)
            .await
            .unwrap();
        if !got.is_empty() {
            return got;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "no claim of {q} took anything in 10 s"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// One leader pass over the queue ring: a job so the ring has something
/// new to seal, a rotation, and prune passes until the seal has caught up
/// (it waits for every transaction on the cluster that was running when it
/// was proposed, other tests' included: a hang guard, not a timing).
pub async fn rotate_and_seal(pool: &PgPool) {
    enqueue_sql(pool, "other", 1, 3, "NULL").await;
    let rings = awa_control::rings::PgRings::new(schema());
    let mut conn = pool.acquire().await.unwrap();
    rings
        .rotate(&mut conn, awa_control::rings::Ring::Queue, "test")
        .await
        .unwrap();
    let generation: i64 =
        sqlx::query_scalar("SELECT max(generation) FROM awa.ring_ledger WHERE ring = 'queue'")
            .fetch_one(&mut *conn)
            .await
            .unwrap();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    loop {
        let sealed: i64 = sqlx::query_scalar("SELECT generation FROM awa.ready_sealed")
            .fetch_one(&mut *conn)
            .await
            .unwrap();
        if sealed >= generation - 1 {
            return;
        }
        if tokio::time::Instant::now() > deadline {
            let seal: (i64, Option<i64>, Option<String>) = sqlx::query_as(
                "SELECT generation, pending_generation, pending_xid::text FROM awa.ready_sealed",
            )
            .fetch_one(&mut *conn)
            .await
            .unwrap();
            let ledger: Vec<(i64, String)> = sqlx::query_as(
                "SELECT generation, xmin::text FROM awa.ring_ledger WHERE ring = 'queue' ORDER BY generation",
            )
            .fetch_all(&mut *conn)
            .await
            .unwrap();
            panic!(
                "the seal did not catch up in 60 s: generation {generation}, seal {seal:?}, ledger {ledger:?}"
            );
        }
        rings
            .prune(
                &mut conn,
                awa_control::rings::Ring::Queue,
                Duration::from_millis(100),
                ROTATE,
            )
            .await
            .unwrap();
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// What one `EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON)` of a statement did:
/// the top node's rows and every shared buffer it touched, its estimated
/// cost, and the run's planning and execution time and whether it was
/// JIT-compiled.
#[derive(Debug)]
pub struct Explained {
    pub rows: i64,
    pub buffers: i64,
    pub total_cost: f64,
    pub planning_ms: f64,
    pub execution_ms: f64,
    pub jit: bool,
}

/// Run `sql` under `EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON)` on `conn`.
pub async fn explain(conn: &mut sqlx::PgConnection, sql: &str) -> Explained {
    let plan: serde_json::Value = sqlx::query_scalar(sqlx::AssertSqlSafe(format!(
        "EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) {sql}"
    )))
    .fetch_one(&mut *conn)
    .await
    .unwrap_or_else(|e| panic!("EXPLAIN {sql}: {e}"));
    let top = &plan[0]["Plan"];
    let n = |k: &str| top[k].as_i64().unwrap_or(0);
    Explained {
        rows: n("Actual Rows"),
        buffers: n("Shared Hit Blocks") + n("Shared Read Blocks"),
        total_cost: top["Total Cost"].as_f64().unwrap_or(0.0),
        planning_ms: plan[0]["Planning Time"].as_f64().unwrap_or(0.0),
        execution_ms: plan[0]["Execution Time"].as_f64().unwrap_or(0.0),
        jit: plan[0].get("JIT").is_some(),
    }
}

/// The SQLSTATE of the database error under a ready-plane error, if any
/// (40001 tells a producer to retry its transaction).
pub fn sqlstate(err: &ReadyError) -> Option<String> {
    let mut source: Option<&(dyn std::error::Error + 'static)> = Some(err);
    while let Some(e) = source {
        if let Some(sqlx::Error::Database(db)) = e.downcast_ref::<sqlx::Error>() {
            return db.code().map(|c| c.into_owned());
        }
        source = e.source();
    }
    None
}

/// Every row of every table and every sequence of `schemas`, digested: what
/// a refused call must leave as it was.
pub async fn fingerprint(
    admin: &mut sqlx::PgConnection,
    schemas: &[&str],
) -> Vec<(String, String)> {
    sqlx::query_as(
        "SELECT format('%I.%I', n.nspname, c.relname),
                (xpath('/row/v/text()', query_to_xml(
                    CASE c.relkind
                    WHEN 'S' THEN format('SELECT last_value::text || ''/'' || is_called::text AS v FROM %I.%I',
                                         n.nspname, c.relname)
                    ELSE format('SELECT count(*)::text || ''/'' || coalesce(md5(string_agg(t::text, '','' ORDER BY t::text)), '''') AS v FROM %I.%I t',
                                n.nspname, c.relname)
                    END, false, true, '')))[1]::text
           FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
          WHERE c.relkind IN ('r', 'S') AND n.nspname = ANY($1)
          ORDER BY 1",
    )
    .bind(schemas)
    .fetch_all(admin)
    .await
    .unwrap()
}

/// A login role for the test database, and connect options for it.
pub async fn login_role(
    db: &awa_harness::TestDb,
    suffix: &str,
) -> (String, sqlx::postgres::PgConnectOptions) {
    let role = format!("{}_{suffix}", db.name());
    let mut admin = sqlx::PgConnection::connect(db.url()).await.unwrap();
    sqlx::raw_sql(sqlx::AssertSqlSafe(format!(
        "CREATE ROLE {role} LOGIN PASSWORD 'runtime'"
    )))
    .execute(&mut admin)
    .await
    .unwrap();
    let options = <sqlx::postgres::PgConnectOptions as std::str::FromStr>::from_str(db.url())
        .unwrap()
        .username(&role)
        .password("runtime");
    (role, options)
}
