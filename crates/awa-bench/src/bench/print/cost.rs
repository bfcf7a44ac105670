//! The table of scenario `cost`: each rate's systems beside the plain insert.

use super::table::{functions, statements, table};
use crate::bench::cost::{CostReport, CostRun};
use crate::bench::fmt::{num, rate};
use crate::bench::procs::ProcsRun;

pub fn print_cost(c: &CostReport) {
    println!(
        "\ncost (one job per BEGIN..COMMIT from a producer process; ours and the baseline run \
         by a worker process at {}; plain = INSERT + COMMIT of the same payload, nothing runs \
         it; server CPU = the cluster's processes, /proc; pickup = ready_at -> handler start, \
         e2e = ready_at -> result committed)",
        c.worker_concurrency
    );
    let cpu = |r: &ProcsRun| CostRun::cpu_us(r).map_or("-".to_string(), num);
    let x = |v: Option<f64>| v.map_or("-".to_string(), |v| format!("{v:.2}x"));
    let mut rows = Vec::new();
    for run in &c.runs {
        let mut sides = vec![("ours", &run.ours, run.ours_vs_plain)];
        if let Some(b) = &run.baseline {
            sides.push(("baseline", b, run.baseline_vs_plain));
        }
        sides.push(("plain insert", &run.plain, Some(1.0)));
        for (who, r, vs_plain) in sides {
            let lat = |p: &crate::latency::Percentiles| {
                if p.count == 0 {
                    "-".to_string()
                } else {
                    format!("{} / {} / {}", num(p.p50), num(p.p95), num(p.p99))
                }
            };
            rows.push(vec![
                format!("{}/s {who}", rate(run.offered_rate)),
                num(r.completions_per_s),
                cpu(r),
                x(vs_plain),
                lat(&r.latency),
                lat(&r.end_to_end),
                format!("{} / {}", num(r.transaction.p50), num(r.transaction.p95)),
                num(r.cost.commits_per_job),
                num(r.cost.wal_bytes_per_job),
                num(r.cost.dead_tuples_per_job),
            ]);
        }
    }
    table(
        &[
            "rate, system",
            "done/s",
            "server CPU us/job",
            "x plain",
            "pickup p50/p95/p99 ms",
            "e2e p50/p95/p99 ms",
            "tx p50/p95 ms",
            "commits/job",
            "WAL B/job",
            "dead tup/job",
        ],
        &rows,
    );
    for run in &c.runs {
        if let Some(x) = run.ours_vs_baseline {
            println!(
                "  {}/s: ours / baseline server CPU per job {x:.2}x",
                rate(run.offered_rate)
            );
        }
        functions(
            &format!("cost {}/s, server-side functions", rate(run.offered_rate)),
            &run.ours.cost,
        );
        statements(
            &format!(
                "cost {}/s, top statements by server time",
                rate(run.offered_rate)
            ),
            &run.ours.statements,
        );
    }
}
