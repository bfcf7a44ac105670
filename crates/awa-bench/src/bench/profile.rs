//! `bench --explain`: where the time of the three hot calls goes.
//!
//! On a fresh database with 20,000 jobs queued and then vacuumed and
//! analyzed (as autovacuum would have), one psql session per call
//! warms the PL/pgSQL plan cache (plans are cached per session), then runs
//! `EXPLAIN (ANALYZE, BUFFERS)` of the call with auto_explain logging the
//! statements inside the function (`log_nested_statements`), since the
//! top-level plan of a function call is a single Function Scan.

use super::{Ctx, payload};
use crate::BoxError;
use crate::fleet;
use awa_core::{NewJob, QueueName};
use awa_ready::{PgReadyPlane, ReadyPlane};
use std::collections::BTreeMap;
use std::process::Stdio;

const PRELOAD: u64 = 20_000;
/// Warm-up runs per session before the profiled one.
const WARM: usize = 8;
/// Calls timed one after another in a fresh session.
const TIMED: usize = 20;
const FINISH_SIZES: [usize; 5] = [32, 64, 128, 256, 512];

const SETUP: &str = "\\set ON_ERROR_STOP on\n\
LOAD 'auto_explain';\n\
SET client_min_messages = log;\n";

const ANALYZE: &str = "SET auto_explain.log_analyze = on;\n\
SET auto_explain.log_buffers = on;\n\
SET auto_explain.log_nested_statements = on;\n\
SET auto_explain.log_min_duration = 0;\n";

const ENQUEUE_1: &str = "SELECT * FROM awa.enqueue(ARRAY['q'], ARRAY['noop'], \
ARRAY['{\"user_id\": 1, \"op\": \"noop\"}'::jsonb], ARRAY[2::smallint], \
ARRAY[NULL::timestamptz], ARRAY[NULL::integer], ARRAY[NULL::text], ARRAY[NULL::jsonb])";

const ENQUEUE_1000: &str = "SELECT * FROM awa.enqueue(\
array_fill('q'::text, ARRAY[1000]), array_fill('noop'::text, ARRAY[1000]), \
(SELECT array_agg(jsonb_build_object('user_id', g, 'op', 'noop')) FROM generate_series(1, 1000) g), \
array_fill(2::smallint, ARRAY[1000]), array_fill(NULL::timestamptz, ARRAY[1000]), \
array_fill(NULL::integer, ARRAY[1000]), array_fill(NULL::text, ARRAY[1000]), \
array_fill(NULL::jsonb, ARRAY[1000]))";

const CLAIM_128: &str = "SELECT * FROM awa.claim('q', 128, NULL, NULL, NULL)";

fn claim_into(table: &str) -> String {
    format!(
        "CREATE TEMP TABLE {table} AS SELECT job_id, run_lease, claim_slot, batch_id, item \
         FROM awa.claim('q', 128, NULL, NULL, NULL) WHERE job_id IS NOT NULL;\n"
    )
}

fn finish_from(table: &str) -> String {
    format!(
        "SELECT * FROM awa.finish(ARRAY(SELECT job_id FROM {table}), \
         ARRAY(SELECT run_lease FROM {table}), ARRAY(SELECT claim_slot FROM {table}), \
         ARRAY(SELECT batch_id FROM {table}), ARRAY(SELECT item FROM {table}), \
         ARRAY(SELECT 'complete'::text FROM {table}), ARRAY(SELECT NULL::interval FROM {table}), \
         ARRAY(SELECT NULL::text FROM {table}))"
    )
}

async fn preload(pool: &sqlx::PgPool, queue: &QueueName) -> Result<(), BoxError> {
    let plane = PgReadyPlane::new(fleet::schema());
    let mut conn = pool.acquire().await?;
    for start in (0..PRELOAD).step_by(1000) {
        let jobs: Vec<NewJob> = (start..start + 1000)
            .map(|i| NewJob::new(queue.clone(), "noop", payload(i)))
            .collect();
        plane.enqueue(&mut conn, &jobs).await?;
    }
    Ok(())
}

async fn insert_lsn(pool: &sqlx::PgPool) -> Result<String, BoxError> {
    Ok(
        sqlx::query_scalar("SELECT pg_current_wal_insert_lsn()::text")
            .fetch_one(pool)
            .await?,
    )
}

/// `pg_waldump --stats=record` between two LSNs: which WAL records a phase
/// wrote, and how much of it was full-page images.
async fn waldump(
    ctx: &Ctx,
    pool: &sqlx::PgPool,
    data_dir: &str,
    from: &str,
    to: &str,
) -> Result<String, BoxError> {
    // Make sure everything up to `to` is on disk for pg_waldump to read.
    sqlx::query("SELECT pg_switch_wal()").execute(pool).await?;
    let tool = super::enqueue::pg_tool(ctx, "pg_waldump");
    let out = tokio::process::Command::new(&tool)
        .args(["--stats=record", "-p"])
        .arg(std::path::Path::new(data_dir).join("pg_wal"))
        .args(["-s", from, "-e", to])
        .stdin(Stdio::null())
        .output()
        .await
        .map_err(|e| format!("cannot run {}: {e}", tool.display()))?;
    if !out.status.success() {
        return Err(format!(
            "pg_waldump failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        )
        .into());
    }
    Ok(format!(
        "pg_waldump --stats=record -s {from} -e {to}\n{}",
        String::from_utf8_lossy(&out.stdout)
    ))
}

pub async fn run(ctx: &Ctx) -> Result<BTreeMap<String, String>, BoxError> {
    ctx.say("\n== explain: enqueue, claim and finish with EXPLAIN (ANALYZE, BUFFERS)");
    let db = ctx.fresh_db(super::system::System::Awa).await?;
    let pool = fleet::pool(db.url(), 8).await?;
    let queue = QueueName::new("q")?;
    let mut out = BTreeMap::new();

    // WAL records of a batched enqueue and of a drain, when the WAL files
    // are readable here (a local cluster, as superuser).
    let data_dir: Option<String> = match ctx.server.kind() {
        awa_harness::ServerKind::LocalCluster => {
            sqlx::query_scalar("SELECT current_setting('data_directory')")
                .fetch_one(&pool)
                .await
                .ok()
        }
        _ => None,
    };
    if let Some(dir) = &data_dir {
        let a = insert_lsn(&pool).await?;
        preload(&pool, &queue).await?;
        let b = insert_lsn(&pool).await?;
        let fleet_ = crate::fleet::Fleet::start(
            &pool,
            &crate::fleet::FleetConfig {
                queue: queue.clone(),
                workers: 1,
                concurrency: 64,
                leader: true,
                end_to_end: None,
                job_time: std::time::Duration::ZERO,
            },
            crate::latency::LatencyRecorder::new(),
        );
        while fleet_.completed() < PRELOAD {
            tokio::time::sleep(std::time::Duration::from_millis(5)).await;
        }
        fleet_.stop().await?;
        let c = insert_lsn(&pool).await?;
        for (name, from, to) in [
            ("wal_enqueue_10000_at_1000_per_call", &a, &b),
            ("wal_drain_10000", &b, &c),
        ] {
            match waldump(ctx, &pool, dir, from, to).await {
                Ok(text) => {
                    if !ctx.json {
                        println!("\n--- {name} ---\n{text}");
                    }
                    out.insert(name.to_string(), text);
                }
                Err(err) => ctx.note(format!("{name}: {err}")),
            }
        }
    }
    preload(&pool, &queue).await?;
    pool.close().await;
    // As autovacuum would have after the enqueue (see the report's
    // conditions).
    ctx.vacuum_analyze(&db).await?;

    // PL/pgSQL plans each statement afresh for its first five runs in a
    // session, then may switch to a cached generic plan: warm up past that,
    // as a long-lived worker connection is.
    let warm = |stmt: &str| format!("SELECT count(*) FROM ({stmt}) w;\n").repeat(WARM);
    let explain = |stmt: &str| format!("EXPLAIN (ANALYZE, BUFFERS) {stmt};\n");
    let mut finish_script = SETUP.to_string();
    for i in 0..WARM {
        finish_script.push_str(&claim_into(&format!("c{i}")));
        finish_script.push_str(&format!(
            "SELECT count(*) FROM ({}) w;\n",
            finish_from(&format!("c{i}"))
        ));
    }
    finish_script.push_str(&claim_into("cx"));
    finish_script.push_str(ANALYZE);
    finish_script.push_str(&explain(&finish_from("cx")));
    let timed = |stmt: &str, mode: &str| {
        format!(
            "\\set ON_ERROR_STOP on\nSET plan_cache_mode = {mode};\n\\timing on\n{}",
            format!("SELECT count(*) FROM ({stmt}) w;\n").repeat(TIMED)
        )
    };
    // Finish cost by batch size (the worker's completer sends up to 512).
    let mut by_size = String::from("\\set ON_ERROR_STOP on\n");
    for round in 0..3 {
        for size in FINISH_SIZES {
            let t = format!("f{round}_{size}");
            by_size.push_str(&format!(
                "CREATE TEMP TABLE {t} AS SELECT job_id, run_lease, claim_slot, batch_id, item \
                 FROM awa.claim('q', {size}, NULL, NULL, NULL) WHERE job_id IS NOT NULL;\n\
                 \\echo finish {size}\n\\timing on\nSELECT count(*) FROM ({}) w;\n\\timing off\n",
                finish_from(&t)
            ));
        }
    }
    let scripts = [
        (
            "enqueue_1",
            format!("{SETUP}{}{ANALYZE}{}", warm(ENQUEUE_1), explain(ENQUEUE_1)),
        ),
        (
            "enqueue_1000",
            format!(
                "{SETUP}{}{ANALYZE}{}",
                warm(ENQUEUE_1000),
                explain(ENQUEUE_1000)
            ),
        ),
        (
            "claim_128",
            format!("{SETUP}{}{ANALYZE}{}", warm(CLAIM_128), explain(CLAIM_128)),
        ),
        ("finish_128", finish_script),
        ("finish_by_batch_size", by_size),
        ("timed_enqueue_1", timed(ENQUEUE_1, "auto")),
        (
            "timed_enqueue_1_generic_plans",
            timed(ENQUEUE_1, "force_generic_plan"),
        ),
        ("timed_enqueue_1000", timed(ENQUEUE_1000, "auto")),
        (
            "timed_enqueue_1000_generic_plans",
            timed(ENQUEUE_1000, "force_generic_plan"),
        ),
        ("timed_claim_128", timed(CLAIM_128, "auto")),
        (
            "timed_claim_128_generic_plans",
            timed(CLAIM_128, "force_generic_plan"),
        ),
    ];
    let psql = super::enqueue::psql(ctx);
    for (name, script) in scripts {
        let text = match run_psql(&psql, db.url(), &script).await {
            Ok(text) => text,
            Err(err) => {
                ctx.note(format!("explain {name}: {err}"));
                continue;
            }
        };
        if !ctx.json {
            println!("\n--- {name} ---\n{text}");
        }
        out.insert(name.to_string(), text);
    }
    Ok(out)
}

async fn run_psql(psql: &std::path::Path, url: &str, script: &str) -> Result<String, BoxError> {
    use tokio::io::AsyncWriteExt;
    let mut child = tokio::process::Command::new(psql)
        .args(["-X", "-q", "-d", url, "-f", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| format!("cannot run {}: {e}", psql.display()))?;
    let mut stdin = child.stdin.take().ok_or("no stdin")?;
    stdin.write_all(script.as_bytes()).await?;
    drop(stdin);
    let out = child.wait_with_output().await?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    if !out.status.success() {
        return Err(format!("psql failed: {}", stderr.trim()).into());
    }
    // Keep only the profiled call (warm-up rows are counts), or the timings.
    if let Some((_, plan)) = stdout.split_once("QUERY PLAN") {
        return Ok(format!(
            "EXPLAIN (ANALYZE, BUFFERS):\nQUERY PLAN{plan}\nauto_explain, statements inside:\n{stderr}"
        ));
    }
    if stdout.contains("finish ") {
        // "finish N" lines, each followed by its time.
        let mut out: BTreeMap<usize, Vec<String>> = BTreeMap::new();
        let mut size = None;
        for line in stdout.lines() {
            if let Some(n) = line.strip_prefix("finish ") {
                size = n.trim().parse().ok();
            } else if let (Some(t), Some(n)) = (line.strip_prefix("Time: "), size) {
                out.entry(n).or_default().push(t.to_string());
            }
        }
        return Ok(out
            .iter()
            .map(|(n, t)| format!("finish of {n} attempts: {}", t.join(", ")))
            .collect::<Vec<_>>()
            .join("\n"));
    }
    let times: Vec<f64> = stdout
        .lines()
        .filter_map(|l| l.strip_prefix("Time: "))
        .filter_map(|t| t.split_whitespace().next()?.parse().ok())
        .collect();
    let mut settled: Vec<f64> = times.iter().skip(times.len() / 2).copied().collect();
    settled.sort_by(f64::total_cmp);
    let median = settled.get(settled.len() / 2).copied().unwrap_or(f64::NAN);
    Ok(format!(
        "client-side ms per call, in order: {}; median of the second half {median:.3} ms",
        times
            .iter()
            .map(|t| format!("{t:.3}"))
            .collect::<Vec<_>>()
            .join(", ")
    ))
}
