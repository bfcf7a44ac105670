//! The human-readable report: tables of every figure, the targets, the
//! baseline's runs and the comparison (`--json` prints the document instead).
//!
//! * `table` — drawing a table, and the cost cells every run's row ends with
//! * `runs` — rows of the runs both sides make (steady, drain, procs)
//! * `cost` — scenario `cost`'s table
//! * `claim_cost` — scenario `claim-cost`'s table
//! * `baseline` — the baseline's tables and the comparison

mod baseline;
mod claim_cost;
mod cost;
mod runs;
mod table;

use super::drain::DrainReport;
use super::fmt::num;
use super::report::Report;
use baseline::{print_baseline, print_comparison};
use claim_cost::print_claim_cost;
use cost::print_cost;
use runs::{STEADY_HEAD, drain_rows, print_procs, steady_row};
use table::{costed, functions, table, with_cost, with_cost_av};

pub fn print_human(r: &Report) {
    println!();
    println!(
        "Awa bench, {} build, {} ({}), {} CPUs, commit {}, {:.0} s",
        r.meta.build,
        r.meta.server,
        r.settings.get("server_version").map_or("?", String::as_str),
        r.meta.nproc,
        r.meta.commit.as_deref().unwrap_or("?"),
        r.meta.seconds
    );
    println!("measured under: {}", r.meta.conditions);
    if let Some(e) = &r.ours.enqueue {
        println!("\nenqueue");
        let rows: Vec<Vec<String>> = e
            .runs
            .iter()
            .map(|run| {
                let row = vec![
                    run.name.clone(),
                    run.jobs.to_string(),
                    format!("{:.2}", run.seconds),
                    num(run.jobs_per_s),
                ];
                costed(row, &run.cost)
            })
            .collect();
        table(&with_cost(&["variant", "jobs", "s", "jobs/s"]), &rows);
        if let Some(f) = e.fdatasync_ops_per_s {
            println!(
                "  pg_test_fsync fdatasync: {} ops/s; 1 producer x 1 job/tx is {:.0}% of it",
                num(f),
                e.one_per_tx_vs_fdatasync.unwrap_or(f64::NAN) * 100.0
            );
        }
    }
    for d in [&r.ours.drain, &r.ours.drain_1m, &r.ours.drain_dead_tuples]
        .into_iter()
        .flatten()
    {
        print_drain(d);
    }
    if let Some(c) = &r.claim_cost {
        print_claim_cost(c);
    }
    if let Some(s) = &r.ours.steady {
        println!(
            "\nsteady ({} worker x {} + leader; latency = ready_at -> handler start)",
            s.workers, s.concurrency
        );
        let rows: Vec<Vec<String>> = s
            .runs
            .iter()
            .map(|run| steady_row(format!("{}/s", num(run.offered_rate as f64)), run))
            .collect();
        table(&with_cost(STEADY_HEAD), &rows);
        println!(
            "  headline: highest offered rate sustained with p95 < 100 ms: {}",
            s.headline_rate
                .map_or("none".to_string(), |x| format!("{}/s", num(x as f64)))
        );
    }
    if let Some(p) = &r.ours.pinned {
        println!(
            "\npinned ({}/s, REPEATABLE READ snapshot held open)",
            p.rate
        );
        let rows = vec![
            steady_row("unpinned".into(), &p.unpinned),
            steady_row("pinned".into(), &p.pinned),
        ];
        table(&with_cost(STEADY_HEAD), &rows);
        println!(
            "  pinned/unpinned: throughput {:.3}x, p50 {:.2}x, p95 {:.2}x, p99 {:.2}x",
            p.throughput_ratio, p.p50_ratio, p.p95_ratio, p.p99_ratio
        );
        functions("pinned, server-side functions", &p.pinned.cost);
    }
    if let Some(p) = &r.ours.procs {
        print_procs("", p);
    }
    if let Some(c) = &r.cost {
        print_cost(c);
    }
    if let Some(p) = &r.python {
        println!(
            "\npython (no-op handlers, {} jobs each, concurrency {}, {} wheel)",
            p.jobs, p.concurrency, p.profile
        );
        let rows: Vec<Vec<String>> = [
            ("rust", &p.rust, 1.0),
            ("python sync", &p.python_sync, p.sync_ratio),
            ("python async", &p.python_async, p.async_ratio),
        ]
        .iter()
        .map(|(name, run, ratio)| {
            vec![
                name.to_string(),
                format!("{:.2}", run.seconds),
                num(run.jobs_per_s),
                format!("{ratio:.2}"),
            ]
        })
        .collect();
        table(&["handler", "s", "jobs/s", "x rust"], &rows);
    }
    if let Some(s) = &r.soak {
        println!("\nsoak ({} jobs at {}/s)", s.jobs, s.rate);
        table(
            &with_cost(STEADY_HEAD),
            &[steady_row(format!("{}/s", s.rate), &s.run)],
        );
        let rows: Vec<Vec<String>> = s
            .run
            .samples
            .iter()
            .map(|x| {
                vec![
                    format!("{:.0}", x.t_s),
                    x.enqueued.to_string(),
                    x.completed.to_string(),
                    x.depth.to_string(),
                    x.dead_tuples.to_string(),
                    format!("{:.1}", x.awa_bytes as f64 / 1_048_576.0),
                ]
            })
            .collect();
        table(
            &[
                "t s",
                "enqueued",
                "completed",
                "depth",
                "dead tup",
                "awa MB",
            ],
            &rows,
        );
    }
    if let Some(b) = &r.baseline {
        print_baseline(b);
    }
    if !r.comparison.is_empty() {
        print_comparison(r);
    }
    println!("\ntargets");
    let rows: Vec<Vec<String>> = r
        .targets
        .iter()
        .map(|t| {
            vec![
                t.name.clone(),
                t.target.clone(),
                match t.met {
                    Some(true) => "yes".into(),
                    Some(false) => "NO".into(),
                    None => "-".into(),
                },
                t.measured.clone(),
                t.gap.clone(),
            ]
        })
        .collect();
    table(&["target", "goal", "met", "measured", "gap"], &rows);
    if !r.notes.is_empty() {
        println!("\nnotes");
        for n in &r.notes {
            println!("  - {n}");
        }
    }
}

/// One drain of ours: its phases' rows and the functions it called.
fn print_drain(d: &DrainReport) {
    println!(
        "\ndrain ({} jobs, {} worker x {} + leader{}, claim batch {}; {} {:.1} s before; \
         autovacuum {}; {} claims, {} took nothing)",
        d.jobs,
        d.workers,
        d.concurrency,
        if d.totals.leader_elected {
            ", elected"
        } else {
            ", not elected"
        },
        d.claim_batch,
        d.analyzed,
        d.analyze_s,
        if d.autovacuum {
            "on"
        } else {
            "off on its tables (the dead-tuple phase)"
        },
        d.totals.claim_calls,
        d.totals.empty_claims
    );
    table(
        &with_cost_av(&["phase", "jobs/s"], d.autovacuum),
        &drain_rows(d, true),
    );
    functions("drain, server-side functions", &d.drain_cost);
}
