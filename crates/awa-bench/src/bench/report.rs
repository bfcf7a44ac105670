//! The bench report: one document with every figure (`--json`); with
//! scenario `baseline`, the baseline's figures and every comparison (ours,
//! the baseline's, the ratio). `targets` judges it against the spec and
//! `print` writes it as tables.

use super::baseline::Completion;
use super::claim_cost::ClaimCostReport;
use super::compare::{Compared, Side};
use super::cost::CostReport;
use super::python::PythonReport;
use super::soak::SoakReport;
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
    /// What every figure was measured under: autovacuum, analyzed before
    /// the timed phases, the maintenance leader, JIT (one line, printed at
    /// the top of the report).
    pub conditions: String,
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
    #[serde(flatten)]
    pub runs: Side,
}

impl BaselineReport {
    pub fn new(completion: Completion) -> Self {
        Self {
            model: "one plain jobs table (bigserial id, queue, kind, args jsonb, state, run_at, \
                    attempt, ...; primary key + partial fetch index), enqueued by multi-row \
                    INSERT + NOTIFY, claimed with SELECT ... FOR UPDATE SKIP LOCKED + UPDATE, \
                    no maintenance; crates/awa-bench/sql/baseline/",
            completion,
            runs: Side::default(),
        }
    }
}

#[derive(Debug, Clone, serde::Serialize)]
pub struct Report {
    pub meta: Meta,
    pub settings: BTreeMap<String, String>,
    /// Ours, of the scenarios the baseline runs too.
    #[serde(flatten)]
    pub ours: Side,
    /// Scenario `cost`: server CPU per job beside a plain insert.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cost: Option<CostReport>,
    /// Scenario `claim-cost`: one claim of 128 at two backlogs.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub claim_cost: Option<ClaimCostReport>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub soak: Option<SoakReport>,
    /// Scenario `python`: Python no-op handlers against Rust ones.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub python: Option<PythonReport>,
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
        conditions: String,
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
                conditions,
            },
            settings,
            ours: Side::default(),
            cost: None,
            claim_cost: None,
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

impl Report {
    /// Ours / baseline, figure by figure (empty without the baseline).
    pub fn compared(&self) -> Vec<Compared> {
        match &self.baseline {
            Some(baseline) => super::compare::compare(&self.ours, &baseline.runs),
            None => Vec::new(),
        }
    }

    /// One scenario's runs into their places: ours, and the baseline's
    /// when it ran.
    pub fn put<T>(
        &mut self,
        place: impl Fn(&mut Side) -> &mut Option<T>,
        (ours, baseline): (T, Option<T>),
    ) {
        *place(&mut self.ours) = Some(ours);
        if let Some(b) = &mut self.baseline {
            *place(&mut b.runs) = baseline;
        }
    }
}
