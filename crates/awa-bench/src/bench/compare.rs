//! Ours against the baseline, figure by figure, for every scenario that has
//! a counterpart: our figure, the baseline's and the ratio ours/baseline.
//! Absolute figures on a shared machine move from run to run; the ratio of
//! two runs made minutes apart on the same server moves much less.

use super::drain::DrainReport;
use super::enqueue::EnqueueReport;
use super::fmt::{num, rate};
use super::pgstats::Cost;
use super::pinned::PinnedReport;
use super::procs::ProcsReport;
use super::steady::{SteadyReport, SteadyRun};

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
    fn new(
        key: String,
        figure: String,
        unit: &'static str,
        better: Better,
        ours: Option<f64>,
        baseline: Option<f64>,
    ) -> Self {
        let ratio = match (ours, baseline) {
            (Some(o), Some(b)) if b != 0.0 && o.is_finite() && b.is_finite() => Some(o / b),
            _ => None,
        };
        Self {
            key,
            figure,
            unit,
            better,
            ours,
            baseline,
            ratio,
        }
    }

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
        self.0
            .push(Compared::new(key, figure, unit, better, ours, baseline));
    }

    /// WAL, dead tuples and server CPU per job of one phase.
    fn costs(&mut self, key: &str, figure: &str, ours: &Cost, baseline: &Cost) {
        self.push(
            format!("{key}.wal_bytes_per_job"),
            format!("{figure}: WAL per job"),
            "bytes",
            Better::Lower,
            Some(ours.wal_bytes_per_job),
            Some(baseline.wal_bytes_per_job),
        );
        self.push(
            format!("{key}.dead_tuples_per_job"),
            format!("{figure}: dead tuples per job"),
            "",
            Better::Lower,
            Some(ours.dead_tuples_per_job),
            Some(baseline.dead_tuples_per_job),
        );
        self.push(
            format!("{key}.cpu_postgres_us_per_job"),
            format!("{figure}: Postgres CPU per job"),
            "us",
            Better::Lower,
            ours.cpu_postgres_us_per_job,
            baseline.cpu_postgres_us_per_job,
        );
    }
}

/// One side's runs, as the report holds them (ours or the baseline's).
#[derive(Debug, Clone, Copy)]
pub struct Sides<'a> {
    pub enqueue: Option<&'a EnqueueReport>,
    pub drain: Option<&'a DrainReport>,
    pub steady: Option<&'a SteadyReport>,
    pub pinned: Option<&'a PinnedReport>,
    pub procs: Option<&'a ProcsReport>,
}

/// Every figure both sides measured, ours beside the baseline's.
pub fn compare(ours: &Sides<'_>, baseline: &Sides<'_>) -> Vec<Compared> {
    let mut out = Out(Vec::new());
    if let (Some(o), Some(b)) = (ours.enqueue, baseline.enqueue) {
        enqueue(&mut out, o, b);
    }
    if let (Some(o), Some(b)) = (ours.drain, baseline.drain) {
        drain(&mut out, o, b);
    }
    if let (Some(o), Some(b)) = (ours.steady, baseline.steady) {
        steady(&mut out, o, b);
    }
    if let (Some(o), Some(b)) = (ours.pinned, baseline.pinned) {
        pinned(&mut out, o, b);
    }
    if let (Some(o), Some(b)) = (ours.procs, baseline.procs) {
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
        out.push(
            format!("{key}.wal_bytes_per_job"),
            format!("enqueue {}: WAL per job", run.name),
            "bytes",
            Better::Lower,
            Some(run.cost.wal_bytes_per_job),
            Some(base.cost.wal_bytes_per_job),
        );
        out.push(
            format!("{key}.cpu_postgres_us_per_job"),
            format!("enqueue {}: Postgres CPU per job", run.name),
            "us",
            Better::Lower,
            run.cost.cpu_postgres_us_per_job,
            base.cost.cpu_postgres_us_per_job,
        );
    }
}

fn drain(out: &mut Out, o: &DrainReport, b: &DrainReport) {
    out.push(
        "drain.jobs_per_s".into(),
        format!("drain, {} worker x {}", o.workers, o.concurrency),
        "jobs/s",
        Better::Higher,
        Some(o.jobs_per_s),
        Some(b.jobs_per_s),
    );
    out.push(
        "drain.drain.wal_bytes_per_job".into(),
        "drain alone: WAL per job".into(),
        "bytes",
        Better::Lower,
        Some(o.drain_cost.wal_bytes_per_job),
        Some(b.drain_cost.wal_bytes_per_job),
    );
    out.push(
        "drain.drain.cpu_postgres_us_per_job".into(),
        "drain alone: Postgres CPU per job".into(),
        "us",
        Better::Lower,
        o.drain_cost.cpu_postgres_us_per_job,
        b.drain_cost.cpu_postgres_us_per_job,
    );
    out.costs(
        "drain.total",
        "enqueue + drain",
        &o.total_cost,
        &b.total_cost,
    );
}

fn steady_run(out: &mut Out, key: &str, label: &str, o: &SteadyRun, b: &SteadyRun) {
    out.push(
        format!("{key}.completions_per_s"),
        format!("{label}: completed/s"),
        "jobs/s",
        Better::Higher,
        Some(o.completions_per_s),
        Some(b.completions_per_s),
    );
    for (name, ours, base) in [
        ("p50", o.latency.p50, b.latency.p50),
        ("p95", o.latency.p95, b.latency.p95),
        ("p99", o.latency.p99, b.latency.p99),
    ] {
        out.push(
            format!("{key}.{name}_ms"),
            format!("{label}: latency {name}"),
            "ms",
            Better::Lower,
            Some(ours),
            Some(base),
        );
    }
    out.costs(key, label, &o.cost, &b.cost);
}

fn steady(out: &mut Out, o: &SteadyReport, b: &SteadyReport) {
    for run in &o.runs {
        if let Some(base) = b.at(run.offered_rate) {
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
        let Some(base) = b.at(run.offered_rate) else {
            continue;
        };
        let key = format!("procs.{}", run.offered_rate);
        let label = format!("procs {}/s (1 job/tx)", rate(run.offered_rate));
        out.push(
            format!("{key}.completions_per_s"),
            format!("{label}: completed/s"),
            "jobs/s",
            Better::Higher,
            Some(run.completions_per_s),
            Some(base.completions_per_s),
        );
        for (name, ours, theirs) in [
            ("p50", run.latency.p50, base.latency.p50),
            ("p95", run.latency.p95, base.latency.p95),
            ("p99", run.latency.p99, base.latency.p99),
        ] {
            out.push(
                format!("{key}.{name}_ms"),
                format!("{label}: latency {name}"),
                "ms",
                Better::Lower,
                Some(ours),
                Some(theirs),
            );
        }
        out.push(
            format!("{key}.transaction_p50_ms"),
            format!("{label}: producer BEGIN..COMMIT p50"),
            "ms",
            Better::Lower,
            Some(run.transaction.p50),
            Some(base.transaction.p50),
        );
        out.push(
            format!("{key}.commits_per_job"),
            format!("{label}: commits per job"),
            "",
            Better::Lower,
            Some(run.cost.commits_per_job),
            Some(base.cost.commits_per_job),
        );
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
        Compared::new("k".into(), "f".into(), "", better, ours, baseline)
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
