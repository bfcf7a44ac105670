//! The bench report: one document with every figure (`--json`), or tables,
//! and each target from the spec with whether we meet it; with scenario
//! `baseline`, the baseline's figures and every comparison (ours, the
//! baseline's, the ratio).

use super::baseline::Completion;
use super::compare::Compared;
use super::cost::{CostReport, CostRun};
use super::drain::DrainReport;
use super::enqueue::EnqueueReport;
use super::pgstats::Cost;
use super::pinned::PinnedReport;
use super::procs::{ProcsReport, ProcsRun};
use super::soak::SoakReport;
use super::steady::{SteadyReport, SteadyRun};
use super::{Ctx, Scenario};
use awa_harness::ServerKind;
use std::collections::BTreeMap;

#[derive(Debug, Clone, serde::Serialize)]
pub struct Meta {
    pub date: String,
    pub commit: Option<String>,
    pub build: &'static str,
    pub server: &'static str,
    pub server_version: String,
    pub nproc: usize,
    pub mem_total: Option<String>,
    pub load_before: Option<String>,
    pub load_after: Option<String>,
    pub quick: bool,
    pub scenarios: Vec<Scenario>,
    pub pool_ping_on_acquire: bool,
    pub latency_unit: &'static str,
    pub seconds: f64,
}

#[derive(Debug, Clone, serde::Serialize)]
pub struct Target {
    pub name: String,
    pub target: String,
    pub measured: String,
    /// None: not measured in this run.
    pub met: Option<bool>,
    pub gap: String,
}

/// The baseline's runs, in the same shapes as ours.
#[derive(Debug, Clone, serde::Serialize)]
pub struct BaselineReport {
    /// What it models, in one line.
    pub model: &'static str,
    pub completion: Completion,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub enqueue: Option<EnqueueReport>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub drain: Option<DrainReport>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub steady: Option<SteadyReport>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pinned: Option<PinnedReport>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub procs: Option<ProcsReport>,
}

impl BaselineReport {
    pub fn new(completion: Completion) -> Self {
        Self {
            model: "one plain jobs table (bigserial id, queue, kind, args jsonb, state, run_at, \
                    attempt, ...; primary key + partial fetch index), enqueued by multi-row \
                    INSERT + NOTIFY, claimed with SELECT ... FOR UPDATE SKIP LOCKED + UPDATE, \
                    no maintenance; xtask/sql/baseline/",
            completion,
            enqueue: None,
            drain: None,
            steady: None,
            pinned: None,
            procs: None,
        }
    }
}

#[derive(Debug, Clone, serde::Serialize)]
pub struct Report {
    pub meta: Meta,
    pub settings: BTreeMap<String, String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub enqueue: Option<EnqueueReport>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub drain: Option<DrainReport>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub steady: Option<SteadyReport>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pinned: Option<PinnedReport>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub procs: Option<ProcsReport>,
    /// Scenario `cost`: server CPU per job beside a plain insert.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cost: Option<CostReport>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub soak: Option<SoakReport>,
    /// Scenario `python`: Python no-op handlers against Rust ones.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub python: Option<super::python::PythonReport>,
    /// Scenario `baseline`: the same scenarios against a plain jobs table.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub baseline: Option<BaselineReport>,
    /// Ours / baseline, figure by figure (empty without the baseline).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub comparison: Vec<Compared>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub explain: Option<BTreeMap<String, String>>,
    pub targets: Vec<Target>,
    pub notes: Vec<String>,
}

impl Report {
    pub fn new(
        ctx: &Ctx,
        version: &str,
        settings: BTreeMap<String, String>,
        scenarios: Vec<Scenario>,
        pool_ping: bool,
        load_before: Option<String>,
    ) -> Self {
        // AWA_BENCH_COMMIT names the commit when the source is not a git
        // checkout (an exported tree, some CI checkouts).
        let commit = std::env::var("AWA_BENCH_COMMIT")
            .ok()
            .filter(|c| !c.is_empty())
            .or_else(|| {
                std::process::Command::new("git")
                    .args(["rev-parse", "--short", "HEAD"])
                    .output()
                    .ok()
                    .filter(|o| o.status.success())
                    .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
            });
        let mem_total = std::fs::read_to_string("/proc/meminfo").ok().and_then(|m| {
            m.lines()
                .find(|l| l.starts_with("MemTotal:"))
                .map(|l| l["MemTotal:".len()..].trim().to_string())
        });
        Report {
            meta: Meta {
                date: chrono::Utc::now().format("%Y-%m-%d %H:%M UTC").to_string(),
                commit,
                build: if cfg!(debug_assertions) {
                    "debug"
                } else {
                    "release"
                },
                server: match ctx.server.kind() {
                    ServerKind::External => "DATABASE_URL",
                    ServerKind::LocalCluster => "private local cluster",
                    ServerKind::Docker => "private container",
                },
                server_version: version.to_string(),
                nproc: std::thread::available_parallelism().map_or(0, |n| n.get()),
                mem_total,
                load_before,
                load_after: None,
                quick: ctx.quick,
                scenarios,
                pool_ping_on_acquire: pool_ping,
                latency_unit: "ms",
                seconds: 0.0,
            },
            settings,
            enqueue: None,
            drain: None,
            steady: None,
            pinned: None,
            procs: None,
            cost: None,
            soak: None,
            python: None,
            baseline: ctx.baseline.map(BaselineReport::new),
            comparison: Vec::new(),
            explain: None,
            targets: Vec::new(),
            notes: Vec::new(),
        }
    }
}

fn at_least(name: &str, target: f64, measured: Option<f64>, unit: &str) -> Target {
    let (measured_s, met, gap) = match measured {
        None => ("not measured".into(), None, String::new()),
        Some(m) if m >= target => (
            format!("{} {unit}", num(m)),
            Some(true),
            format!("meets it, {:.0}% above", (m / target - 1.0) * 100.0),
        ),
        Some(m) => (
            format!("{} {unit}", num(m)),
            Some(false),
            format!(
                "misses by {} {unit} ({:.0}% short)",
                num(target - m),
                (1.0 - m / target) * 100.0
            ),
        ),
    };
    Target {
        name: name.into(),
        target: format!(">= {} {unit}", num(target)),
        measured: measured_s,
        met,
        gap,
    }
}

fn below(name: &str, target: f64, measured: Option<f64>, unit: &str, strict: bool) -> Target {
    let ok = |m: f64| if strict { m < target } else { m <= target };
    let (measured_s, met, gap) = match measured {
        None => ("not measured".into(), None, String::new()),
        Some(m) if ok(m) => (
            format!("{} {unit}", num(m)),
            Some(true),
            format!("meets it, {:.0}% under", (1.0 - m / target) * 100.0),
        ),
        Some(m) => (
            format!("{} {unit}", num(m)),
            Some(false),
            format!(
                "misses by {} {unit} ({:.0}% over)",
                num(m - target),
                (m / target - 1.0) * 100.0
            ),
        ),
    };
    Target {
        name: name.into(),
        target: format!("{} {} {unit}", if strict { "<" } else { "<=" }, num(target)),
        measured: measured_s,
        met,
        gap,
    }
}

/// An offered rate, as `200` or `1,000` (no decimals).
pub fn rate(r: u64) -> String {
    if r >= 1_000 {
        num(r as f64)
    } else {
        r.to_string()
    }
}

/// Readable numbers: thousands separators for big ones, decimals for small.
pub fn num(x: f64) -> String {
    if !x.is_finite() {
        return "-".into();
    }
    if x.abs() >= 1000.0 {
        let s = format!("{:.0}", x.abs());
        let mut out = String::new();
        for (i, c) in s.chars().enumerate() {
            if i > 0 && (s.len() - i).is_multiple_of(3) {
                out.push(',');
            }
            out.push(c);
        }
        if x < 0.0 { format!("-{out}") } else { out }
    } else if x.abs() >= 10.0 {
        format!("{x:.1}")
    } else if x.abs() >= 0.01 || x == 0.0 {
        format!("{x:.3}")
    } else {
        format!("{x:.5}")
    }
}

pub fn targets(r: &Report) -> Vec<Target> {
    let mut t = Vec::new();
    let drain = r.drain.as_ref();
    // The issue sets 25,000/s at the default concurrency and 15,000/s at
    // 16 (`--drain-concurrency 16`); other concurrencies have no target.
    let concurrency = drain.map_or(64, |d| d.concurrency);
    let drain_target = match concurrency {
        16 => Some(15_000.0),
        64 => Some(25_000.0),
        _ => None,
    };
    if let Some(target) = drain_target {
        t.push(at_least(
            &format!("drain, 1 worker x {concurrency}"),
            target,
            drain.map(|d| d.jobs_per_s),
            "jobs/s",
        ));
    }
    let steady = r.steady.as_ref();
    let mut rate50 = at_least(
        "steady: highest sustained rate with p95 < 50 ms",
        10_000.0,
        steady.map(|s| s.rate_p95_under_50ms.unwrap_or(0) as f64),
        "jobs/s",
    );
    if let Some(s) = steady
        && let Some(run) = s.at(10_000)
    {
        rate50.measured.push_str(&format!(
            " (at 10,000/s offered: {} completed/s, p95 {} ms)",
            num(run.completions_per_s),
            num(run.latency.p95)
        ));
    }
    t.push(rate50);
    for rate in [200, 1_000] {
        let run = steady.and_then(|s| s.at(rate));
        t.push(below(
            &format!("steady {rate}/s: p50"),
            1.5,
            run.map(|r| r.latency.p50),
            "ms",
            true,
        ));
        t.push(below(
            &format!("steady {rate}/s: p95"),
            3.0,
            run.map(|r| r.latency.p95),
            "ms",
            true,
        ));
    }
    let enq = r.enqueue.as_ref();
    t.push(at_least(
        "enqueue, 1 producer, 1,000 jobs/call",
        150_000.0,
        enq.and_then(|e| e.find(1, 1_000)).map(|r| r.jobs_per_s),
        "jobs/s",
    ));
    t.push(at_least(
        "enqueue, 1 producer, 10,000 jobs/COPY",
        150_000.0,
        enq.and_then(|e| e.runs.iter().find(|r| r.producers == 1 && r.copy))
            .map(|r| r.jobs_per_s),
        "jobs/s",
    ));
    let mut one = at_least(
        "enqueue, 1 producer, 1 job/tx (autocommit)",
        3_500.0,
        enq.and_then(|e| e.find(1, 1)).map(|r| r.jobs_per_s),
        "jobs/s",
    );
    if let Some(e) = enq
        && let (Some(f), Some(frac)) = (e.fdatasync_ops_per_s, e.one_per_tx_vs_fdatasync)
    {
        one.measured.push_str(&format!(
            " ({:.0}% of fdatasync's {} ops/s)",
            frac * 100.0,
            num(f)
        ));
    }
    // The routing check's cost: the same shape pinned, in this run.
    if let Some(e) = enq
        && let (Some(routed), Some(pinned)) = (e.find(1, 1), e.find_pinned())
    {
        one.measured.push_str(&format!(
            " (pinned, without the routing check: {} jobs/s, {:.3}x)",
            num(pinned.jobs_per_s),
            routed.jobs_per_s / pinned.jobs_per_s
        ));
    }
    t.push(one);
    t.push(at_least(
        "enqueue, 1 producer, 1 job/tx (BEGIN..COMMIT; reported against the same figure)",
        3_500.0,
        enq.and_then(|e| e.find_tx(1)).map(|r| r.jobs_per_s),
        "jobs/s",
    ));
    let mut four = at_least(
        "enqueue, 4 producers, 1 job/tx",
        10_000.0,
        enq.and_then(|e| e.find(4, 1)).map(|r| r.jobs_per_s),
        "jobs/s",
    );
    if let Some(b) = enq.and_then(|e| e.find(4, 1_000)) {
        four.measured
            .push_str(&format!(" (1,000 jobs/call: {} jobs/s)", num(b.jobs_per_s)));
    }
    t.push(four);
    t.push(below(
        "WAL per job, enqueue + drain",
        350.0,
        drain.map(|d| d.total_cost.wal_bytes_per_job),
        "bytes",
        false,
    ));
    t.push(below(
        "dead tuples per job, enqueue + drain",
        0.01,
        drain.map(|d| d.total_cost.dead_tuples_per_job),
        "",
        true,
    ));
    t.push(below(
        "dead tuples per job, steady (worst rate)",
        0.01,
        steady.and_then(|s| {
            s.runs
                .iter()
                .map(|r| r.cost.dead_tuples_per_job)
                .max_by(f64::total_cmp)
        }),
        "",
        true,
    ));
    let procs_1000 = r.procs.as_ref().and_then(|p| p.at(1_000));
    let mut procs_p95 = below(
        "procs 1,000/s (1 job/tx, own processes): p95, kept up",
        5.0,
        procs_1000.map(|r| r.latency.p95),
        "ms",
        true,
    );
    if let Some(run) = procs_1000 {
        procs_p95.measured.push_str(&format!(
            " ({} completed/s, {})",
            num(run.completions_per_s),
            if run.kept_up {
                "kept up"
            } else {
                "not kept up"
            }
        ));
        if !run.kept_up {
            procs_p95.met = Some(false);
        }
    }
    t.push(procs_p95);
    t.extend(cost_targets(r));
    let pinned = r.pinned.as_ref();
    t.push(at_least(
        "pinned vs unpinned throughput (2,000/s)",
        0.90,
        pinned.map(|p| p.throughput_ratio),
        "x",
    ));
    t.push(below(
        "pinned vs unpinned p95 (2,000/s)",
        1.10,
        pinned.map(|p| p.p95_ratio),
        "x",
        false,
    ));
    t
}

/// Issue 21's targets on the price of one job (scenario `cost`).
fn cost_targets(r: &Report) -> Vec<Target> {
    let mut t = Vec::new();
    let cost = r.cost.as_ref();
    let at200 = cost.and_then(|c| c.at(200));
    let mut cpu = below(
        "server CPU per job at 200/s, 1 job/tx, x a plain INSERT + COMMIT",
        5.0,
        at200.and_then(|c| c.ours_vs_plain),
        "x",
        false,
    );
    if let Some(c) = at200 {
        cpu.measured.push_str(&format!(
            " ({} us against {} us)",
            CostRun::cpu_us(&c.ours).map_or("-".into(), num),
            CostRun::cpu_us(&c.plain).map_or("-".into(), num),
        ));
    }
    t.push(cpu);
    for f in ["claim", "finish"] {
        let mean_ms = at200.and_then(|c| {
            c.ours
                .cost
                .functions
                .iter()
                .find(|x| x.name == f)
                .map(|x| x.mean_us / 1000.0)
        });
        let mut target = below(
            &format!("server time of one {f} call at 200/s (1-4 jobs)"),
            0.15,
            mean_ms,
            "ms",
            false,
        );
        if let Some(x) = at200.and_then(|c| c.ours.cost.functions.iter().find(|x| x.name == f)) {
            target
                .measured
                .push_str(&format!(" ({:.2} calls per job)", x.calls_per_job));
        }
        t.push(target);
    }
    for rate_ in [200, 1_000] {
        let run = cost.and_then(|c| c.at(rate_)).map(|c| &c.ours);
        t.push(below(
            &format!("end-to-end latency at {}/s: p95", rate(rate_)),
            3.0,
            run.map(|r| r.end_to_end.p95),
            "ms",
            false,
        ));
        t.push(below(
            &format!("end-to-end latency at {}/s: p99", rate(rate_)),
            6.0,
            run.map(|r| r.end_to_end.p99),
            "ms",
            false,
        ));
    }
    let procs = r.procs.as_ref();
    let mut headline = at_least(
        "procs: highest 1 job/tx rate kept up with p95 < 50 ms",
        2_000.0,
        procs.map(|p| p.highest_kept_up.unwrap_or(0) as f64),
        "jobs/s",
    );
    if let (Some(o), Some(b)) = (
        procs.and_then(|p| p.highest_kept_up),
        r.baseline
            .as_ref()
            .and_then(|b| b.procs.as_ref())
            .and_then(|p| p.highest_kept_up),
    ) {
        headline
            .measured
            .push_str(&format!(" (baseline: {}/s)", rate(b)));
        if o < b {
            headline.met = Some(false);
        }
    }
    t.push(headline);
    t
}

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
fn statements(title: &str, list: &[super::pgstats::StatementCost]) {
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
