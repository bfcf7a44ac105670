//! The table of scenario `claim-cost`: one claim of 128 at each backlog.

use super::table::table;
use crate::bench::claim_cost::{ClaimCostReport, TARGET_RATIO};
use crate::bench::fmt::num;

pub fn print_claim_cost(c: &ClaimCostReport) {
    println!(
        "\nclaim-cost (one `SELECT * FROM awa.claim('q', {}, NULL, NULL, NULL)` in autocommit, one \
         session, one lane; backlog one rotation old, VACUUM ANALYZE first, no worker or leader \
         meanwhile; compared: {})",
        c.batch, c.measured_by
    );
    let opt = |v: Option<f64>| v.map_or("-".to_string(), num);
    let rows: Vec<Vec<String>> = c
        .runs
        .iter()
        .map(|r| {
            vec![
                num(r.backlog as f64),
                format!("{} x {}", r.rounds, r.calls_per_round),
                num(r.wall_ms),
                format!(
                    "{} / {} / {}",
                    num(r.call_min_ms),
                    num(r.call_p50_ms),
                    num(r.call_max_ms)
                ),
                opt(r.statements_mean_ms),
                opt(r.function_mean_ms),
                num(r.buffers.execution_ms),
                format!(
                    "{} / {} / {}",
                    r.buffers.shared_hit, r.buffers.shared_read, r.buffers.shared_dirtied
                ),
                r.buffers.rows.to_string(),
                r.rotation.clone(),
            ]
        })
        .collect();
    table(
        &[
            "backlog",
            "rounds x calls",
            "wall ms/call (median)",
            "call min / p50 / max ms",
            "pg_stat_statements ms",
            "awa.claim fn ms",
            "EXPLAIN ms",
            "shared hit / read / dirtied",
            "rows",
            "rotation",
        ],
        &rows,
    );
    if let Some(x) = c.ratio {
        println!(
            "  largest / smallest backlog: {x:.2}x per call (target <= {TARGET_RATIO}x), {} shared \
             buffers",
            c.buffers_ratio
                .map_or("-".to_string(), |b| format!("{b:.2}x"))
        );
    }
}
