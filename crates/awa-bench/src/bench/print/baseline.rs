//! The baseline's tables and the comparison of ours with it.

use super::runs::{STEADY_HEAD, drain_rows, print_procs, steady_row};
use super::table::{baseline_cost, costed, table};
use crate::bench::baseline::Completion;
use crate::bench::fmt::num;
use crate::bench::report::{BaselineReport, Report};

pub fn print_baseline(b: &BaselineReport) {
    println!(
        "\nbaseline: {} (completed by {})",
        b.model,
        match b.completion {
            Completion::Update => "UPDATE",
            Completion::Delete => "DELETE",
        }
    );
    if let Some(e) = &b.runs.enqueue {
        let rows: Vec<Vec<String>> = e
            .runs
            .iter()
            .map(|run| {
                costed(
                    vec![format!("enqueue {}", run.name), num(run.jobs_per_s)],
                    &run.cost,
                )
            })
            .collect();
        table(&baseline_cost(&["baseline run", "jobs/s"]), &rows);
    }
    for d in [&b.runs.drain, &b.runs.drain_1m, &b.runs.drain_dead_tuples]
        .into_iter()
        .flatten()
    {
        println!(
            "  drain of {} ({}; autovacuum {})",
            d.jobs,
            d.analyzed,
            if d.autovacuum {
                "on"
            } else {
                "off on its tables"
            }
        );
        table(
            &baseline_cost(&["baseline run", "jobs/s"]),
            &drain_rows(d, false),
        );
    }
    let mut steady: Vec<Vec<String>> = Vec::new();
    if let Some(s) = &b.runs.steady {
        steady.extend(
            s.runs
                .iter()
                .map(|run| steady_row(format!("{}/s", num(run.offered_rate as f64)), run)),
        );
    }
    if let Some(p) = &b.runs.pinned {
        steady.push(steady_row("unpinned".into(), &p.unpinned));
        steady.push(steady_row("pinned".into(), &p.pinned));
    }
    if !steady.is_empty() {
        table(&baseline_cost(STEADY_HEAD), &steady);
    }
    if let Some(p) = &b.runs.procs {
        print_procs("baseline ", p);
    }
}

pub fn print_comparison(r: &Report) {
    println!("\nours vs baseline (ratio = ours / baseline; `better` says which side wins)");
    let cell = |v: Option<f64>| v.map_or("-".to_string(), num);
    let rows: Vec<Vec<String>> = r
        .comparison
        .iter()
        .map(|c| {
            vec![
                c.figure.clone(),
                c.unit.to_string(),
                cell(c.ours),
                cell(c.baseline),
                c.ratio.map_or("-".to_string(), |x| format!("{x:.2}x")),
                c.winner().to_string(),
            ]
        })
        .collect();
    table(
        &["figure", "unit", "ours", "baseline", "ratio", "better"],
        &rows,
    );
}
