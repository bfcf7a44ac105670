//! Ours against the baseline, figure by figure, for every scenario that has
//! a counterpart: our figure, the baseline's and the ratio ours/baseline.
//! Absolute figures on a shared machine move from run to run; the ratio of
//! two runs made minutes apart on the same server moves much less.

use super::climb::at;
use super::drain::DrainReport;
use super::enqueue::EnqueueReport;
use super::fmt::{num, rate};
use super::pgstats::Cost;
use super::pinned::PinnedReport;
use super::procs::ProcsReport;
use super::steady::{SteadyReport, SteadyRun};
use crate::latency::Percentiles;
use PerJob::{Commits, Cpu, DeadTuples, Wal};

/// Whether a larger figure is the better one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Better {
    Higher,
    Lower,
}

#[derive(Debug, Clone, serde::Serialize)]
pub struct Compared {
    /// Stable name, e.g. `drain.jobs_per_s`.
    pub key: String,
    /// Readable name.
    pub figure: String,
    pub unit: &'static str,
    pub better: Better,
    pub ours: Option<f64>,
    pub baseline: Option<f64>,
    /// ours / baseline (absent when either is missing or the baseline's is 0).
    pub ratio: Option<f64>,
}

impl Compared {
    /// Which side the figures favour: "ours", "baseline" or "even" (within
    /// 1 %), or "" when there is no ratio.
    pub fn winner(&self) -> &'static str {
        match self.ratio {
            None => "",
            Some(r) if (r - 1.0).abs() < 0.01 => "even",
            Some(r) if (r > 1.0) == (self.better == Better::Higher) => "ours",
            Some(_) => "baseline",
        }
    }
}

/// The figures compared so far, in the order the report shows them.
struct Out(Vec<Compared>);

impl Out {
    fn push(
        &mut self,
        key: String,
        figure: String,
        unit: &'static str,
        better: Better,
        ours: Option<f64>,
        baseline: Option<f64>,
    ) {
        let ratio = match (ours, baseline) {
            (Some(o), Some(b)) if b != 0.0 && o.is_finite() && b.is_finite() => Some(o / b),
            _ => None,
        };
        self.0.push(Compared {
            key,
            figure,
            unit,
            better,
            ours,
            baseline,
            ratio,
        });
    }

    /// One per-job cost of a phase.
    fn cost(&mut self, key: &str, figure: &str, per_job: PerJob, ours: &Cost, baseline: &Cost) {
        let (name, what, unit) = per_job.names();
        self.push(
            format!("{key}.{name}"),
            format!("{figure}: {what}"),
            unit,
            Better::Lower,
            per_job.of(ours),
            per_job.of(baseline),
        );
    }

    /// WAL, dead tuples and server CPU per job of one phase.
    fn costs(&mut self, key: &str, figure: &str, ours: &Cost, baseline: &Cost) {
        for per_job in [Wal, DeadTuples, Cpu] {
            self.cost(key, figure, per_job, ours, baseline);
        }
    }

    /// Completions per second and pickup latency (p50, p95, p99) of a run
    /// at an offered rate.
    fn pace(
        &mut self,
        key: &str,
        label: &str,
        (ours, ours_latency): (f64, &Percentiles),
        (baseline, baseline_latency): (f64, &Percentiles),
    ) {
        self.push(
            format!("{key}.completions_per_s"),
            format!("{label}: completed/s"),
            "jobs/s",
            Better::Higher,
            Some(ours),
            Some(baseline),
        );
        for (name, ours, base) in [
            ("p50", ours_latency.p50, baseline_latency.p50),
            ("p95", ours_latency.p95, baseline_latency.p95),
            ("p99", ours_latency.p99, baseline_latency.p99),
        ] {
            self.push(
                format!("{key}.{name}_ms"),
                format!("{label}: latency {name}"),
                "ms",
                Better::Lower,
                Some(ours),
                Some(base),
            );
        }
    }
}

/// A per-job cost of a phase (lower is better for each).
#[derive(Debug, Clone, Copy)]
enum PerJob {
    Wal,
    DeadTuples,
    Cpu,
    Commits,
}

impl PerJob {
    /// Its key, its readable name and its unit.
    fn names(self) -> (&'static str, &'static str, &'static str) {
        match self {
            Wal => ("wal_bytes_per_job", "WAL per job", "bytes"),
            DeadTuples => ("dead_tuples_per_job", "dead tuples per job", ""),
            Cpu => ("cpu_postgres_us_per_job", "Postgres CPU per job", "us"),
            Commits => ("commits_per_job", "commits per job", ""),
        }
    }

    /// Its figure in `cost` (CPU only where it was measured).
    fn of(self, cost: &Cost) -> Option<f64> {
        match self {
            Wal => Some(cost.wal_bytes_per_job),
            DeadTuples => Some(cost.dead_tuples_per_job),
            Cpu => cost.cpu_postgres_us_per_job,
            Commits => Some(cost.commits_per_job),
        }
    }
}

/// One side's runs (ours or the baseline's) of the scenarios both sides
/// run, as the report holds them.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct Side {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub enqueue: Option<EnqueueReport>,
    /// Scenario `drain`: a backlog of 200,000.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub drain: Option<DrainReport>,
    /// Scenario `drain`'s dead-tuple phase (autovacuum off on its tables).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub drain_dead_tuples: Option<DrainReport>,
    /// Scenario `drain-1m`: a backlog of 1,000,000.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub drain_1m: Option<DrainReport>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub steady: Option<SteadyReport>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pinned: Option<PinnedReport>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub procs: Option<ProcsReport>,
}

/// Every figure both sides measured, ours beside the baseline's.
pub fn compare(ours: &Side, baseline: &Side) -> Vec<Compared> {
    let mut out = Out(Vec::new());
    if let (Some(o), Some(b)) = (&ours.enqueue, &baseline.enqueue) {
        enqueue(&mut out, o, b);
    }
    for (key, o, b) in [
        ("drain", &ours.drain, &baseline.drain),
        ("drain_1m", &ours.drain_1m, &baseline.drain_1m),
        (
            "drain_dead_tuples",
            &ours.drain_dead_tuples,
            &baseline.drain_dead_tuples,
        ),
    ] {
        if let (Some(o), Some(b)) = (o, b) {
            drain(&mut out, key, o, b);
        }
    }
    if let (Some(o), Some(b)) = (&ours.steady, &baseline.steady) {
        steady(&mut out, o, b);
    }
    if let (Some(o), Some(b)) = (&ours.pinned, &baseline.pinned) {
        pinned(&mut out, o, b);
    }
    if let (Some(o), Some(b)) = (&ours.procs, &baseline.procs) {
        procs(&mut out, o, b);
    }
    out.0
}

fn enqueue(out: &mut Out, o: &EnqueueReport, b: &EnqueueReport) {
    for run in &o.runs {
        let Some(base) = b.same_as(run) else {
            continue;
        };
        let key = format!(
            "enqueue.{}x{}{}",
            run.producers,
            run.batch,
            if run.explicit_tx { ".explicit_tx" } else { "" }
        );
        out.push(
            format!("{key}.jobs_per_s"),
            format!("enqueue {}", run.name),
            "jobs/s",
            Better::Higher,
            Some(run.jobs_per_s),
            Some(base.jobs_per_s),
        );
        for per_job in [Wal, Cpu] {
            out.cost(
                &key,
                &format!("enqueue {}", run.name),
                per_job,
                &run.cost,
                &base.cost,
            );
        }
    }
}

/// One drain's figures under `key` (`drain`, `drain_1m`,
/// `drain_dead_tuples`). Dead tuples compare only where autovacuum was off
/// on the tables: with it on, they are whatever it had not yet removed.
fn drain(out: &mut Out, key: &str, o: &DrainReport, b: &DrainReport) {
    let what = format!(
        "drain {}{}",
        num(o.jobs as f64),
        if o.autovacuum {
            ""
        } else {
            " (autovacuum off)"
        }
    );
    out.push(
        format!("{key}.jobs_per_s"),
        format!("{what}, {} worker x {}", o.workers, o.concurrency),
        "jobs/s",
        Better::Higher,
        Some(o.jobs_per_s),
        Some(b.jobs_per_s),
    );
    for per_job in [Wal, Cpu] {
        out.cost(
            &format!("{key}.drain"),
            &format!("{what} alone"),
            per_job,
            &o.drain_cost,
            &b.drain_cost,
        );
    }
    let total = format!("{key}.total");
    let label = format!("{what}: enqueue + drain");
    if o.autovacuum || b.autovacuum {
        for per_job in [Wal, Cpu] {
            out.cost(&total, &label, per_job, &o.total_cost, &b.total_cost);
        }
    } else {
        out.costs(&total, &label, &o.total_cost, &b.total_cost);
    }
}

fn steady_run(out: &mut Out, key: &str, label: &str, o: &SteadyRun, b: &SteadyRun) {
    out.pace(
        key,
        label,
        (o.completions_per_s, &o.latency),
        (b.completions_per_s, &b.latency),
    );
    out.costs(key, label, &o.cost, &b.cost);
}

fn steady(out: &mut Out, o: &SteadyReport, b: &SteadyReport) {
    for run in &o.runs {
        if let Some(base) = at(&b.runs, run.offered_rate) {
            let rate = run.offered_rate;
            steady_run(
                out,
                &format!("steady.{rate}"),
                &format!("steady {}/s", num(rate as f64)),
                run,
                base,
            );
        }
    }
    // The highest rates compare only when both ran the same rates (with
    // --quick the baseline runs one of them).
    let rates = |s: &SteadyReport| s.runs.iter().map(|r| r.offered_rate).collect::<Vec<_>>();
    if rates(o) != rates(b) {
        return;
    }
    let rate = |x: Option<u64>| Some(x.unwrap_or(0) as f64);
    out.push(
        "steady.headline_rate".into(),
        "steady: highest rate sustained, p95 < 100 ms".into(),
        "jobs/s",
        Better::Higher,
        rate(o.headline_rate),
        rate(b.headline_rate),
    );
    out.push(
        "steady.rate_p95_under_50ms".into(),
        "steady: highest rate sustained, p95 < 50 ms".into(),
        "jobs/s",
        Better::Higher,
        rate(o.rate_p95_under_50ms),
        rate(b.rate_p95_under_50ms),
    );
}

fn pinned(out: &mut Out, o: &PinnedReport, b: &PinnedReport) {
    steady_run(
        out,
        "pinned.pinned",
        &format!("pinned {}/s", num(o.rate as f64)),
        &o.pinned,
        &b.pinned,
    );
    out.push(
        "pinned.p95_ratio".into(),
        "pinned / unpinned p95".into(),
        "x",
        Better::Lower,
        Some(o.p95_ratio),
        Some(b.p95_ratio),
    );
}

fn procs(out: &mut Out, o: &ProcsReport, b: &ProcsReport) {
    for run in &o.runs {
        let Some(base) = at(&b.runs, run.offered_rate) else {
            continue;
        };
        let key = format!("procs.{}", run.offered_rate);
        let label = format!("procs {}/s (1 job/tx)", rate(run.offered_rate));
        out.pace(
            &key,
            &label,
            (run.completions_per_s, &run.latency),
            (base.completions_per_s, &base.latency),
        );
        out.push(
            format!("{key}.transaction_p50_ms"),
            format!("{label}: producer BEGIN..COMMIT p50"),
            "ms",
            Better::Lower,
            Some(run.transaction.p50),
            Some(base.transaction.p50),
        );
        out.cost(&key, &label, Commits, &run.cost, &base.cost);
        out.costs(&key, &label, &run.cost, &base.cost);
    }
    out.push(
        "procs.highest_kept_up".into(),
        "procs: highest 1 job/tx rate kept up, p95 < 50 ms".into(),
        "jobs/s",
        Better::Higher,
        Some(o.highest_kept_up.unwrap_or(0) as f64),
        Some(b.highest_kept_up.unwrap_or(0) as f64),
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    fn c(better: Better, ours: Option<f64>, baseline: Option<f64>) -> Compared {
        let mut out = Out(Vec::new());
        out.push("k".into(), "f".into(), "", better, ours, baseline);
        out.0.pop().expect("one figure")
    }

    #[test]
    fn ratio_is_ours_over_baseline_and_names_the_better_side() {
        let fast = c(Better::Higher, Some(300.0), Some(100.0));
        assert_eq!(fast.ratio, Some(3.0));
        assert_eq!(fast.winner(), "ours");
        let slow = c(Better::Lower, Some(300.0), Some(100.0));
        assert_eq!(slow.winner(), "baseline");
        assert_eq!(c(Better::Lower, Some(100.5), Some(100.0)).winner(), "even");
        let none = c(Better::Lower, Some(1.0), Some(0.0));
        assert_eq!((none.ratio, none.winner()), (None, ""));
        assert_eq!(c(Better::Higher, None, Some(1.0)).ratio, None);
    }
}
