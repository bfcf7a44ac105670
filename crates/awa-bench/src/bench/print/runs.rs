//! The rows of the runs both sides make (steady, drain, procs): one shape
//! for ours and the baseline's.

use super::table::{costed, functions, table, with_cost};
use crate::bench::climb::at;
use crate::bench::drain::DrainReport;
use crate::bench::fmt::{num, rate};
use crate::bench::procs::{ProcsReport, ProcsRun};
use crate::bench::steady::SteadyRun;

/// Whether a run kept up with its offered rate, and if not, whether it
/// still drained its backlog afterwards.
fn kept_up(kept_up: bool, drained: bool) -> String {
    match (kept_up, drained) {
        (true, _) => "yes",
        (false, true) => "no",
        (false, false) => "no, backlog left",
    }
    .to_string()
}

pub fn steady_row(label: String, r: &SteadyRun) -> Vec<String> {
    let row = vec![
        label,
        num(r.enqueued_per_s),
        num(r.completions_per_s),
        num(r.latency.p50),
        num(r.latency.p95),
        num(r.latency.p99),
        num(r.enqueue_call.p50),
        r.max_depth.to_string(),
        kept_up(r.sustained, r.drained),
    ];
    costed(row, &r.cost)
}

pub const STEADY_HEAD: &[&str] = &[
    "offered",
    "enqueued/s",
    "completed/s",
    "p50 ms",
    "p95 ms",
    "p99 ms",
    "enqueue call p50 ms",
    "max depth",
    "sustained",
];
/// The drain's rows: the preload's (ours only), the drain's, and the two
/// phases' together.
pub fn drain_rows(d: &DrainReport, preload: bool) -> Vec<Vec<String>> {
    let mut rows = Vec::new();
    if preload {
        rows.push(costed(
            vec![
                "preload (1,000/call)".to_string(),
                num(d.preload_jobs_per_s),
            ],
            &d.enqueue_cost,
        ));
    }
    rows.push(costed(
        vec!["drain".to_string(), num(d.jobs_per_s)],
        &d.drain_cost,
    ));
    rows.push(costed(
        vec!["enqueue + drain".to_string(), String::new()],
        &d.total_cost,
    ));
    rows
}

const PROCS_HEAD: &[&str] = &[
    "offered",
    "conns",
    "enqueued/s",
    "completed/s",
    "achieved",
    "p50 ms",
    "p95 ms",
    "p99 ms",
    "tx p50 / p95 ms",
    "start lag p95 ms",
    "max depth",
    "kept up",
];

fn procs_row(r: &ProcsRun) -> Vec<String> {
    let row = vec![
        format!("{}/s", rate(r.offered_rate)),
        r.producer_connections.to_string(),
        num(r.enqueued_per_s),
        num(r.completions_per_s),
        format!("{:.0}%", r.achieved_vs_offered * 100.0),
        num(r.latency.p50),
        num(r.latency.p95),
        num(r.latency.p99),
        format!("{} / {}", num(r.transaction.p50), num(r.transaction.p95)),
        num(r.start_lag.p95),
        r.max_depth.to_string(),
        kept_up(r.kept_up, r.drained),
    ];
    costed(row, &r.cost)
}

pub fn print_procs(who: &str, p: &ProcsReport) {
    println!(
        "\n{who}procs (producer process: connections {}, 1 job per BEGIN..COMMIT; worker process: \
         1 x {}{}; latency = ready_at -> handler start; client CPU = both processes)",
        p.producer_connections
            .map_or("1 per 50 jobs/s offered, 4 to 32".to_string(), |n| n
                .to_string()),
        p.worker_concurrency,
        if who.is_empty() { " + leader" } else { "" }
    );
    let rows: Vec<Vec<String>> = p.runs.iter().map(procs_row).collect();
    let head = with_cost(PROCS_HEAD);
    let head: Vec<&str> = head
        .into_iter()
        .map(|h| match h {
            "awa MB" if !who.is_empty() => "schema MB",
            "client CPU us/job" => "procs' CPU us/job",
            h => h,
        })
        .collect();
    table(&head, &rows);
    println!(
        "  {who}headline: highest one-job-per-transaction rate kept up with p95 < 50 ms: {}; \
         1,000/s kept up with p95 < 5 ms: {}",
        p.highest_kept_up
            .map_or("none".to_string(), |x| format!("{}/s", rate(x))),
        match p.p95_under_5ms_at_1000 {
            Some(true) => "yes",
            Some(false) => "no",
            None => "not run",
        }
    );
    if who.is_empty()
        && let Some(run) = at(&p.runs, 1_000)
    {
        functions("procs 1,000/s, server-side functions", &run.cost);
    }
}
