//! Scenario `claim-cost`: what one claim of 128 costs at a backlog of
//! 10,000 and at a backlog of 1,000,000 jobs, and the ratio of the two
//! (issue 33: a claim's cost must not grow with the backlog; target
//! <= 1.3x).
//!
//! For each backlog, on a fresh database: the backlog plus every job the
//! calls below take is enqueued in one queue (`q`, default priority, so one
//! lane) through the COPY path, 10,000 a call, so the backlog never falls
//! below its size while it is measured; the queue ring is rotated once
//! (`awa.ring_rotate('queue', ...)`, what the leader does every 30 s), so
//! the backlog is one rotation old, as a standing one is; the database is
//! vacuumed and analyzed, as autovacuum would have done after such an
//! enqueue. Then one session (Awa's connection options: `jit = off`) runs
//! `SELECT * FROM awa.claim('q', 128, NULL, NULL, NULL)` in autocommit: a
//! few calls to warm its plan cache, then rounds of calls timed on the
//! client, then `EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON)` of one more call
//! (the Function Scan's buffers count every statement inside the
//! function). No worker and no leader run meanwhile, so nothing else
//! touches the lane.
//!
//! The figure: the mean server time per call from pg_stat_statements when
//! the server preloads it (`--explain` on the private cluster; reset after
//! the warm-up, so the timed calls only), else the
//! median over the rounds of the client's wall time per call (one round
//! trip included); `pg_stat_user_functions`' mean of `awa.claim` (every
//! call of the session, warm-up included) is shown beside it.

use super::Ctx;
use super::fmt::num;
use super::pgstats;
use super::system::System;
use crate::BoxError;
use crate::fleet;
use awa_core::QueueName;
use sqlx::Row;
use std::time::Instant;

const BACKLOGS: &[u64] = &[10_000, 1_000_000];
const QUICK_BACKLOGS: &[u64] = &[2_000, 20_000];
pub const BATCH: u64 = 128;
const WARM: usize = 6;
const ROUNDS: usize = 5;
const CALLS: usize = 10;
const QUICK_ROUNDS: usize = 3;
const QUICK_CALLS: usize = 3;
const ENQUEUE_BATCH: u64 = 10_000;
const QUEUE: &str = "q";
const CLAIM: &str = "SELECT * FROM awa.claim('q', 128, NULL, NULL, NULL)";
const EXPLAIN_CLAIM: &str =
    "EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) SELECT * FROM awa.claim('q', 128, NULL, NULL, NULL)";
/// The target on the ratio (issue 33).
pub const TARGET_RATIO: f64 = 1.3;

/// Buffers of one call, from `EXPLAIN (ANALYZE, BUFFERS)`.
#[derive(Debug, Clone, Copy, Default, serde::Serialize)]
pub struct Buffers {
    pub shared_hit: i64,
    pub shared_read: i64,
    pub shared_dirtied: i64,
    pub shared_written: i64,
    pub temp_read: i64,
    pub temp_written: i64,
    /// Its execution time as EXPLAIN ANALYZE measured it (ms).
    pub execution_ms: f64,
    /// Rows the call returned (jobs taken).
    pub rows: i64,
}

impl Buffers {
    /// Shared buffers touched: hit + read.
    pub fn shared(&self) -> i64 {
        self.shared_hit + self.shared_read
    }
}

#[derive(Debug, Clone, serde::Serialize)]
pub struct ClaimCostRun {
    /// The backlog the calls never went below.
    pub backlog: u64,
    /// Jobs enqueued: the backlog plus what the calls took.
    pub enqueued: u64,
    pub enqueue_s: f64,
    /// What the rotation returned (`rotated` expected).
    pub rotation: String,
    pub vacuum_analyze_s: f64,
    pub warm_calls: usize,
    pub rounds: usize,
    pub calls_per_round: usize,
    /// Client wall time per call, each round's mean (ms).
    pub round_means_ms: Vec<f64>,
    /// The median of the rounds' means (ms).
    pub wall_ms: f64,
    /// Every timed call (ms): fastest, median, slowest.
    pub call_min_ms: f64,
    pub call_p50_ms: f64,
    pub call_max_ms: f64,
    /// Timed calls that took fewer than 128 jobs.
    pub short_calls: usize,
    /// pg_stat_statements' mean execution time of the timed calls (ms),
    /// when the server preloads it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub statements_mean_ms: Option<f64>,
    /// pg_stat_user_functions' mean total time of `awa.claim` over the
    /// session's calls (ms), warm-up and EXPLAIN included.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub function_mean_ms: Option<f64>,
    /// The figure compared: statements_mean_ms when there, else wall_ms.
    pub per_call_ms: f64,
    pub buffers: Buffers,
}

#[derive(Debug, Clone, serde::Serialize)]
pub struct ClaimCostReport {
    pub batch: u64,
    /// Where `per_call_ms` comes from: `pg_stat_statements mean` or
    /// `client wall time, median of rounds`.
    pub measured_by: &'static str,
    pub runs: Vec<ClaimCostRun>,
    /// Largest backlog's per-call figure over the smallest's.
    pub ratio: Option<f64>,
    /// The same for shared buffers touched (EXPLAIN).
    pub buffers_ratio: Option<f64>,
}

pub async fn run(ctx: &Ctx) -> Result<ClaimCostReport, BoxError> {
    let (backlogs, rounds, calls) = if ctx.quick {
        (QUICK_BACKLOGS, QUICK_ROUNDS, QUICK_CALLS)
    } else {
        (BACKLOGS, ROUNDS, CALLS)
    };
    ctx.say(format!(
        "\n== claim-cost: one claim of {BATCH} at backlogs of {}; one lane, one rotation old, \
         VACUUM ANALYZE first; {WARM} warm-up calls, then {rounds} rounds of {calls} calls in \
         one session, then EXPLAIN (ANALYZE, BUFFERS) of one",
        super::fmt::list(backlogs)
    ));
    let mut runs = Vec::new();
    for &backlog in backlogs {
        runs.push(run_backlog(ctx, backlog, rounds, calls).await?);
    }
    let measured_by = if runs.iter().all(|r| r.statements_mean_ms.is_some()) {
        "pg_stat_statements mean"
    } else {
        "client wall time, median of rounds"
    };
    let (ratio, buffers_ratio) = match (runs.first(), runs.last()) {
        (Some(small), Some(big)) if runs.len() > 1 => (
            (small.per_call_ms > 0.0).then(|| big.per_call_ms / small.per_call_ms),
            (small.buffers.shared() > 0)
                .then(|| big.buffers.shared() as f64 / small.buffers.shared() as f64),
        ),
        _ => (None, None),
    };
    if let (Some(small), Some(big), Some(r)) = (runs.first(), runs.last(), ratio) {
        ctx.say(format!(
            "   claim of {BATCH}: {} ms at {} against {} ms at {}: {r:.2}x (target <= \
             {TARGET_RATIO}x); shared buffers {} against {}",
            num(big.per_call_ms),
            num(big.backlog as f64),
            num(small.per_call_ms),
            num(small.backlog as f64),
            big.buffers.shared(),
            small.buffers.shared(),
        ));
    }
    Ok(ClaimCostReport {
        batch: BATCH,
        measured_by,
        runs,
        ratio,
        buffers_ratio,
    })
}

async fn run_backlog(
    ctx: &Ctx,
    backlog: u64,
    rounds: usize,
    calls: usize,
) -> Result<ClaimCostRun, BoxError> {
    let db = ctx.fresh_db(System::Awa).await?;
    let queue = QueueName::new(QUEUE)?;
    let taken = (WARM + rounds * calls + 1) as u64 * BATCH;
    let enqueued = backlog + taken;

    let pool = fleet::pool(db.url(), 1).await?;
    let bar = ctx.bar(enqueued, format!("enqueue {}", num(backlog as f64)));
    let started = Instant::now();
    {
        let mut conn = pool.acquire().await?;
        let mut sent = 0;
        while sent < enqueued {
            let n = ENQUEUE_BATCH.min(enqueued - sent);
            System::Awa
                .batch(&queue, sent..sent + n)
                .send_copy(&mut conn)
                .await?;
            sent += n;
            bar.inc(n);
        }
    }
    let enqueue_s = started.elapsed().as_secs_f64();
    bar.finish_and_clear();
    let rotation: String =
        sqlx::query_scalar("SELECT outcome FROM awa.ring_rotate('queue', 'bench claim-cost')")
            .fetch_one(&pool)
            .await?;
    if rotation != "rotated" {
        ctx.note(format!(
            "claim-cost at {backlog}: the queue ring did not rotate ({rotation}); the backlog \
             is in the current slot"
        ));
    }
    pool.close().await;
    let vacuum_analyze_s = ctx.vacuum_analyze(&db).await?;
    let before = pgstats::settled(ctx, &db).await?;

    let pool = fleet::pool(db.url(), 1).await?;
    let mut conn = pool.acquire().await?;
    for _ in 0..WARM {
        claim(&mut conn).await?;
    }
    // pg_stat_statements from here: the timed calls only (the EXPLAIN
    // after them is a statement of its own).
    if ctx.statements {
        pgstats::statements_reset(&db).await?;
    }
    let mut round_means_ms = Vec::with_capacity(rounds);
    let mut each = Vec::with_capacity(rounds * calls);
    let mut short_calls = 0;
    for _ in 0..rounds {
        let round = Instant::now();
        for _ in 0..calls {
            let call = Instant::now();
            let got = claim(&mut conn).await?;
            each.push(call.elapsed().as_secs_f64() * 1e3);
            if got < BATCH as usize {
                short_calls += 1;
            }
        }
        round_means_ms.push(round.elapsed().as_secs_f64() * 1e3 / calls as f64);
    }
    let plan: serde_json::Value = sqlx::query_scalar(EXPLAIN_CLAIM)
        .fetch_one(&mut *conn)
        .await?;
    drop(conn);
    pool.close().await;
    let buffers = buffers(&plan);
    let statements_mean_ms = if ctx.statements {
        statements_mean(&db).await?
    } else {
        None
    };
    let after = pgstats::settled(ctx, &db).await?;
    let function_mean_ms = pgstats::cost(&before, &after, taken)
        .functions
        .iter()
        .find(|f| f.name == "claim")
        .map(|f| f.mean_us / 1e3);

    let wall_ms = median(&mut round_means_ms.clone());
    let mut sorted = each.clone();
    sorted.sort_by(f64::total_cmp);
    let run = ClaimCostRun {
        backlog,
        enqueued,
        enqueue_s,
        rotation,
        vacuum_analyze_s,
        warm_calls: WARM,
        rounds,
        calls_per_round: calls,
        round_means_ms,
        wall_ms,
        call_min_ms: sorted.first().copied().unwrap_or(0.0),
        call_p50_ms: median(&mut sorted),
        call_max_ms: sorted.last().copied().unwrap_or(0.0),
        short_calls,
        statements_mean_ms,
        function_mean_ms,
        per_call_ms: statements_mean_ms.unwrap_or(wall_ms),
        buffers,
    };
    ctx.say(format!(
        "   backlog {:>9}: {} ms per call (wall, median of {rounds} rounds; min {} / p50 {} / \
         max {}){}{}; EXPLAIN: {} ms, shared hit {} read {} dirtied {}, {} rows{}",
        num(backlog as f64),
        num(run.wall_ms),
        num(run.call_min_ms),
        num(run.call_p50_ms),
        num(run.call_max_ms),
        run.statements_mean_ms.map_or(String::new(), |m| format!(
            ", pg_stat_statements mean {}",
            num(m)
        )),
        run.function_mean_ms
            .map_or(String::new(), |m| format!(", awa.claim mean {}", num(m))),
        num(buffers.execution_ms),
        buffers.shared_hit,
        buffers.shared_read,
        buffers.shared_dirtied,
        buffers.rows,
        if short_calls > 0 {
            format!("; {short_calls} calls took fewer than {BATCH}")
        } else {
            String::new()
        },
    ));
    Ok(run)
}

/// One claim call; how many jobs it took.
async fn claim(conn: &mut sqlx::PgConnection) -> Result<usize, BoxError> {
    let rows = sqlx::query(CLAIM).fetch_all(&mut *conn).await?;
    let mut jobs = 0;
    for row in &rows {
        if row.try_get::<Option<i64>, _>("job_id")?.is_some() {
            jobs += 1;
        }
    }
    Ok(jobs)
}

/// The top node's buffers and the execution time of an EXPLAIN (FORMAT
/// JSON) document.
fn buffers(plan: &serde_json::Value) -> Buffers {
    let top = &plan[0];
    let node = &top["Plan"];
    let int = |k: &str| node[k].as_i64().unwrap_or(0);
    Buffers {
        shared_hit: int("Shared Hit Blocks"),
        shared_read: int("Shared Read Blocks"),
        shared_dirtied: int("Shared Dirtied Blocks"),
        shared_written: int("Shared Written Blocks"),
        temp_read: int("Temp Read Blocks"),
        temp_written: int("Temp Written Blocks"),
        execution_ms: top["Execution Time"].as_f64().unwrap_or(0.0),
        rows: int("Actual Rows"),
    }
}

/// pg_stat_statements' mean for the claim statement of this database
/// (top level; the EXPLAIN is a statement of its own).
async fn statements_mean(db: &super::ScenarioDb) -> Result<Option<f64>, BoxError> {
    let mut conn = <sqlx::PgConnection as sqlx::Connection>::connect(db.url()).await?;
    let mean: Option<f64> = sqlx::query_scalar(
        "SELECT sum(s.total_exec_time) / nullif(sum(s.calls), 0) \
           FROM pg_stat_statements s \
          WHERE s.toplevel \
            AND s.dbid = (SELECT d.oid FROM pg_database d WHERE d.datname = current_database()) \
            AND s.query ILIKE 'SELECT * FROM awa.claim(%'",
    )
    .fetch_one(&mut conn)
    .await?;
    let _ = sqlx::Connection::close(conn).await;
    Ok(mean)
}

fn median(xs: &mut [f64]) -> f64 {
    if xs.is_empty() {
        return 0.0;
    }
    xs.sort_by(f64::total_cmp);
    let mid = xs.len() / 2;
    if xs.len().is_multiple_of(2) {
        (xs[mid - 1] + xs[mid]) / 2.0
    } else {
        xs[mid]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_top_nodes_buffers() {
        let plan = serde_json::json!([{
            "Plan": {
                "Node Type": "Function Scan",
                "Actual Rows": 128,
                "Shared Hit Blocks": 900,
                "Shared Read Blocks": 12,
                "Shared Dirtied Blocks": 30,
                "Shared Written Blocks": 0,
                "Temp Read Blocks": 0,
                "Temp Written Blocks": 0
            },
            "Planning": {"Shared Hit Blocks": 3},
            "Execution Time": 4.5
        }]);
        let b = buffers(&plan);
        assert_eq!((b.shared_hit, b.shared_read, b.rows), (900, 12, 128));
        assert_eq!(b.shared(), 912);
        assert_eq!(b.execution_ms, 4.5);
    }

    #[test]
    fn median_of_odd_and_even() {
        assert_eq!(median(&mut [3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&mut [4.0, 1.0, 3.0, 2.0]), 2.5);
        assert_eq!(median(&mut []), 0.0);
    }
}
