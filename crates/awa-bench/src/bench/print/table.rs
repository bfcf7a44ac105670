//! The tables' drawing and the cells every run's row ends with: its
//! per-job costs (a leaf of the report's printing).

use crate::bench::fmt::num;
use crate::bench::pgstats::{Cost, StatementCost};

/// Left-aligned first column, the rest right-aligned.
pub fn table(header: &[&str], rows: &[Vec<String>]) {
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

/// A run's row: its own cells, then its costs.
pub fn costed(mut row: Vec<String>, cost: &Cost) -> Vec<String> {
    row.extend(cost_cells(cost));
    row
}

pub fn with_cost<'a>(head: &[&'a str]) -> Vec<&'a str> {
    let mut h = head.to_vec();
    h.extend_from_slice(COST_HEADER);
    h
}

/// [`with_cost`], its dead-tuple column saying whether autovacuum could
/// have removed some (the report's first line says it for every other
/// table).
pub fn with_cost_av<'a>(head: &[&'a str], autovacuum: bool) -> Vec<&'a str> {
    with_cost(head)
        .into_iter()
        .map(|h| match h {
            "dead tup" if autovacuum => "dead tup (av on)",
            "dead tup" => "dead tup (av off)",
            h => h,
        })
        .collect()
}

/// The cost header for the baseline's tables: its size is its own schema's.
pub fn baseline_cost<'a>(head: &[&'a str]) -> Vec<&'a str> {
    with_cost(head)
        .into_iter()
        .map(|h| if h == "awa MB" { "schema MB" } else { h })
        .collect()
}

pub fn functions(title: &str, c: &Cost) {
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

/// pg_stat_statements' figures of one run (with `--explain`).
pub fn statements(title: &str, list: &[StatementCost]) {
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
