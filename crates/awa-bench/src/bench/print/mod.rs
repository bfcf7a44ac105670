//! The human-readable report: tables of every figure, the targets, the
//! baseline's runs and the comparison (`--json` prints the document instead).

use super::baseline::Completion;
use super::cost::{CostReport, CostRun};
use super::fmt::{num, rate};
use super::pgstats::{Cost, StatementCost};
use super::procs::{ProcsReport, ProcsRun};
use super::report::{BaselineReport, Report};
use super::steady::SteadyRun;

/// Left-aligned first column, the rest right-aligned.
fn table(header: &[&str], rows: &[Vec<String>]) {
    let mut widths: Vec<usize> = header.iter().map(|h| h.len()).collect();
    for row in rows {
        for (i, cell) in row.iter().enumerate() {
            widths[i] = widths[i].max(cell.chars().count());
        }
    }
    let line = |cells: Vec<String>| {
        let mut out = String::from("  ");
        for (i, cell) in cells.iter().enumerate() {
            if i == 0 {
                out.push_str(&format!("{cell:<w$}", w = widths[i]));
            } else {
                out.push_str(&format!("  {cell:>w$}", w = widths[i]));
            }
        }
        println!("{}", out.trim_end());
    };
    line(header.iter().map(|h| h.to_string()).collect());
    for row in rows {
        line(row.clone());
    }
}

const COST_HEADER: &[&str] = &[
    "WAL B/job",
    "commits/job",
    "dead tup",
    "awa MB",
    "pg CPU us/job",
    "client CPU us/job",
    "others' CPU s",
];

fn cost_cells(c: &Cost) -> Vec<String> {
    let opt = |v: Option<f64>| v.map_or("-".to_string(), num);
    vec![
        num(c.wal_bytes_per_job),
        num(c.commits_per_job),
        c.dead_tuples.to_string(),
        format!("{:.1}", c.awa_bytes as f64 / 1_048_576.0),
        opt(c.cpu_postgres_us_per_job),
        opt(c.cpu_client_us_per_job),
        opt(c.cpu_others_s),
    ]
}

fn with_cost<'a>(head: &[&'a str]) -> Vec<&'a str> {
    let mut h = head.to_vec();
    h.extend_from_slice(COST_HEADER);
    h
}

fn steady_row(label: String, r: &SteadyRun) -> Vec<String> {
    let mut row = vec![
        label,
        num(r.enqueued_per_s),
        num(r.completions_per_s),
        num(r.latency.p50),
        num(r.latency.p95),
        num(r.latency.p99),
        num(r.enqueue_call.p50),
        r.max_depth.to_string(),
        match (r.sustained, r.drained) {
            (true, _) => "yes".into(),
            (false, true) => "no".into(),
            (false, false) => "no, backlog left".into(),
        },
    ];
    row.extend(cost_cells(&r.cost));
    row
}

const STEADY_HEAD: &[&str] = &[
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

fn functions(title: &str, c: &Cost) {
    if c.functions.is_empty() {
        return;
    }
    println!("  {title}:");
    let rows: Vec<Vec<String>> = c
        .functions
        .iter()
        .map(|f| {
            vec![
                format!("awa.{}", f.name),
                f.calls.to_string(),
                num(f.calls_per_job),
                num(f.mean_us),
                num(f.total_ms),
                num(f.self_ms),
            ]
        })
        .collect();
    table(
        &[
            "function",
            "calls",
            "calls/job",
            "mean us",
            "total ms",
            "self ms",
        ],
        &rows,
    );
}

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
    if let Some(e) = &r.enqueue {
        println!("\nenqueue");
        let rows: Vec<Vec<String>> = e
            .runs
            .iter()
            .map(|run| {
                let mut row = vec![
                    run.name.clone(),
                    run.jobs.to_string(),
                    format!("{:.2}", run.seconds),
                    num(run.jobs_per_s),
                ];
                row.extend(cost_cells(&run.cost));
                row
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
    if let Some(d) = &r.drain {
        println!(
            "\ndrain ({} jobs, {} worker x {}, claim batch {})",
            d.jobs, d.workers, d.concurrency, d.claim_batch
        );
        let rows = vec![
            {
                let mut row = vec![
                    "preload (1,000/call)".to_string(),
                    num(d.preload_jobs_per_s),
                ];
                row.extend(cost_cells(&d.enqueue_cost));
                row
            },
            {
                let mut row = vec!["drain".to_string(), num(d.jobs_per_s)];
                row.extend(cost_cells(&d.drain_cost));
                row
            },
            {
                let mut row = vec!["enqueue + drain".to_string(), "".to_string()];
                row.extend(cost_cells(&d.total_cost));
                row
            },
        ];
        table(&with_cost(&["phase", "jobs/s"]), &rows);
        functions("drain, server-side functions", &d.drain_cost);
    }
    if let Some(s) = &r.steady {
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
    if let Some(p) = &r.pinned {
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
    if let Some(p) = &r.procs {
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

/// The cost header for the baseline's tables: its size is its own schema's.
fn baseline_cost<'a>(head: &[&'a str]) -> Vec<&'a str> {
    with_cost(head)
        .into_iter()
        .map(|h| if h == "awa MB" { "schema MB" } else { h })
        .collect()
}

fn print_baseline(b: &BaselineReport) {
    println!(
        "\nbaseline: {} (completed by {})",
        b.model,
        match b.completion {
            Completion::Update => "UPDATE",
            Completion::Delete => "DELETE",
        }
    );
    if let Some(e) = &b.enqueue {
        let rows: Vec<Vec<String>> = e
            .runs
            .iter()
            .map(|run| {
                let mut row = vec![format!("enqueue {}", run.name), num(run.jobs_per_s)];
                row.extend(cost_cells(&run.cost));
                row
            })
            .collect();
        table(&baseline_cost(&["baseline run", "jobs/s"]), &rows);
    }
    if let Some(d) = &b.drain {
        let rows = vec![
            {
                let mut row = vec!["drain".to_string(), num(d.jobs_per_s)];
                row.extend(cost_cells(&d.drain_cost));
                row
            },
            {
                let mut row = vec!["enqueue + drain".to_string(), "".to_string()];
                row.extend(cost_cells(&d.total_cost));
                row
            },
        ];
        table(&baseline_cost(&["baseline run", "jobs/s"]), &rows);
    }
    let mut steady: Vec<Vec<String>> = Vec::new();
    if let Some(s) = &b.steady {
        steady.extend(
            s.runs
                .iter()
                .map(|run| steady_row(format!("{}/s", num(run.offered_rate as f64)), run)),
        );
    }
    if let Some(p) = &b.pinned {
        steady.push(steady_row("unpinned".into(), &p.unpinned));
        steady.push(steady_row("pinned".into(), &p.pinned));
    }
    if !steady.is_empty() {
        table(&baseline_cost(STEADY_HEAD), &steady);
    }
    if let Some(p) = &b.procs {
        print_procs("baseline ", p);
    }
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
    let mut row = vec![
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
        match (r.kept_up, r.drained) {
            (true, _) => "yes".into(),
            (false, true) => "no".into(),
            (false, false) => "no, backlog left".into(),
        },
    ];
    row.extend(cost_cells(&r.cost));
    row
}

fn print_procs(who: &str, p: &ProcsReport) {
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
        && let Some(run) = p.at(1_000)
    {
        functions("procs 1,000/s, server-side functions", &run.cost);
    }
}

fn print_cost(c: &CostReport) {
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

/// pg_stat_statements' figures of one run (with `--explain`).
fn statements(title: &str, list: &[StatementCost]) {
    if list.is_empty() {
        return;
    }
    println!(
        "  {title} (pg_stat_statements, track = all: nested statements are inside their callers' time)"
    );
    let rows: Vec<Vec<String>> = list
        .iter()
        .map(|st| {
            vec![
                if st.toplevel { "top" } else { "nested" }.to_string(),
                st.calls.to_string(),
                num(st.calls_per_job),
                num(st.total_ms),
                format!("{:.3}", st.mean_ms),
                st.query.chars().take(100).collect(),
            ]
        })
        .collect();
    table(
        &[
            "level",
            "calls",
            "per job",
            "total ms",
            "mean ms",
            "statement",
        ],
        &rows,
    );
}

fn print_comparison(r: &Report) {
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
