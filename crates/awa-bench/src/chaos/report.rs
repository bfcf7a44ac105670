//! A run's verdict and its concise summary.

use super::faults::{Fault, Injected};
use super::scenario::Scenario;
use super::tally::Tally;
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::time::Duration;

/// The orphan job on the unserved queue, at the end.
#[derive(Debug)]
pub struct OrphanCheck {
    /// Its live state: it must still be `available`.
    pub state: Option<String>,
    pub facts: usize,
    pub executions: usize,
}

impl OrphanCheck {
    pub fn ok(&self) -> bool {
        self.state.as_deref() == Some("available") && self.facts == 0 && self.executions == 0
    }
}

/// A poison job at the end: where it is and how its attempts were closed.
#[derive(Debug)]
pub struct PoisonJob {
    pub kind: &'static str,
    pub state: String,
    pub closures: Vec<String>,
}

impl PoisonJob {
    /// Its handler's result reached the database: some attempt was closed
    /// (`claim_closures.outcome`) by the worker (retry, snooze, fail, ...), not rescued by maintenance
    /// after the worker failed to record it.
    pub fn recorded(&self) -> bool {
        self.closures
            .iter()
            .any(|c| c != "rescued" && c != "released")
    }
}

#[derive(Debug)]
pub struct PoisonCheck {
    pub jobs: Vec<PoisonJob>,
}

impl PoisonCheck {
    pub fn unrecorded(&self) -> usize {
        self.jobs.iter().filter(|j| !j.recorded()).count()
    }
}

/// Queue-ring rows (ready entries, every slot) after the load.
#[derive(Debug)]
pub struct RingCheck {
    pub peak: i64,
    pub at_end: i64,
    pub bound: i64,
    pub waited: Duration,
    /// When over the bound: rows per slot and the last rotate/prune
    /// outcomes, to see what holds the ring.
    pub diagnosis: Option<String>,
}

impl RingCheck {
    pub fn ok(&self) -> bool {
        self.at_end <= self.bound
    }
}

/// The failover scenario's own verdict: a failover happened, and the
/// maintenance leader worked on the new primary after the last one.
#[derive(Debug)]
pub struct FailoverCheck {
    pub failovers: usize,
    /// Ring rotations stamped after the last promotion.
    pub rotations_after: i64,
}

impl FailoverCheck {
    pub fn ok(&self) -> bool {
        self.failovers > 0 && self.rotations_after > 0
    }
}

#[derive(Debug)]
pub struct Report {
    pub scenario: Scenario,
    pub tally: Tally,
    pub faults: Vec<(Fault, Injected)>,
    pub elapsed: Duration,
    /// Whether every load job finished within the settle limit.
    pub settled: bool,
    pub producer_errors: u64,
    pub abandoned: usize,
    /// Workers that exited without being killed (replaced at once).
    pub unexpected_exits: usize,
    /// Workers that did not finish a graceful shutdown in time.
    pub stuck_shutdowns: usize,
    /// `queue stats`' exact completed total for the load queue.
    pub stats_completed: i64,
    /// Attempts closed by maintenance's rescue (their worker was killed).
    pub rescued: usize,
    pub orphan: Option<OrphanCheck>,
    pub poison: Option<PoisonCheck>,
    pub ring: Option<RingCheck>,
    pub failover: Option<FailoverCheck>,
    /// Whether a worker may exit by itself (it is replaced). Not in the
    /// failover scenario: processes reach the new primary without one.
    pub exits_allowed: bool,
}

impl Report {
    pub fn ok(&self) -> bool {
        self.tally.ok()
            && self.settled
            && self.abandoned == 0
            && self.stuck_shutdowns == 0
            && self.stats_completed == self.tally.completions as i64
            && self.orphan.as_ref().is_none_or(OrphanCheck::ok)
            && self.poison.as_ref().is_none_or(|p| p.unrecorded() == 0)
            && self.ring.as_ref().is_none_or(RingCheck::ok)
            && self.failover.as_ref().is_none_or(FailoverCheck::ok)
            && (self.exits_allowed || self.unexpected_exits == 0)
    }

    pub fn summary(&self) -> String {
        let t = &self.tally;
        let mut s = String::new();
        let verdict = if self.ok() { "ok" } else { "FAILED" };
        let _ = writeln!(
            s,
            "chaos {}: {verdict} in {:.1} s: {} jobs, {} lost, {} completed twice; \
             {} executions ({} jobs ran more than once, {} attempts rescued)",
            self.scenario.name(),
            self.elapsed.as_secs_f64(),
            t.jobs,
            t.lost.len(),
            t.completed_twice.len(),
            t.executions,
            t.rerun_jobs,
            self.rescued,
        );
        let mut done: BTreeMap<&str, usize> = BTreeMap::new();
        let mut skipped = Vec::new();
        for (fault, outcome) in &self.faults {
            match outcome {
                Injected::Done => *done.entry(fault.name()).or_default() += 1,
                Injected::Skipped(why) => skipped.push(format!("{}: {why}", fault.name())),
            }
        }
        if !self.faults.is_empty() {
            let list: Vec<String> = done.iter().map(|(f, n)| format!("{f} x{n}")).collect();
            let _ = writeln!(s, "  faults: {}", list.join(", "));
        }
        for why in &skipped {
            let _ = writeln!(s, "  skipped {why}");
        }
        if self.producer_errors > 0 || t.retried_enqueues > 0 {
            let _ = writeln!(
                s,
                "  producer: {} failed enqueue calls retried; {} ids got a second job that way",
                self.producer_errors, t.retried_enqueues
            );
        }
        if self.unexpected_exits > 0 && self.exits_allowed {
            let _ = writeln!(
                s,
                "  {} workers exited without being killed (replaced)",
                self.unexpected_exits
            );
        }
        let mut problems = Vec::new();
        if self.unexpected_exits > 0 && !self.exits_allowed {
            problems.push(format!(
                "{} workers exited without being killed: a failover must not need a restart",
                self.unexpected_exits
            ));
        }
        let few = |v: &[i64]| {
            let shown: Vec<String> = v.iter().take(10).map(i64::to_string).collect();
            let more = if v.len() > 10 { ", ..." } else { "" };
            format!("{}{more}", shown.join(", "))
        };
        if !self.settled {
            problems.push(format!(
                "did not settle: {} ids still live: {}",
                t.unsettled.len(),
                few(&t.unsettled)
            ));
        }
        if !t.lost.is_empty() {
            problems.push(format!(
                "lost ids: {} ({} of them ended failed/cancelled/dead-lettered)",
                few(&t.lost),
                t.ended_otherwise.len()
            ));
        }
        if !t.completed_twice.is_empty() {
            problems.push(format!(
                "job ids with two terminal facts: {}",
                few(&t.completed_twice)
            ));
        }
        if !t.vanished.is_empty() {
            problems.push(format!(
                "acknowledged enqueues missing from the database: {}",
                few(&t.vanished)
            ));
        }
        if !t.enqueued_twice.is_empty() {
            problems.push(format!(
                "ids with two jobs without a failed enqueue: {}",
                few(&t.enqueued_twice)
            ));
        }
        if self.abandoned > 0 {
            problems.push(format!(
                "{} ids could not be enqueued at all",
                self.abandoned
            ));
        }
        if self.stats_completed != t.completions as i64 {
            problems.push(format!(
                "queue stats says {} completed, the ledger {}",
                self.stats_completed, t.completions
            ));
        }
        if self.stuck_shutdowns > 0 {
            problems.push(format!(
                "{} workers did not finish a graceful shutdown within 30 s",
                self.stuck_shutdowns
            ));
        }
        if let Some(o) = &self.orphan {
            let line = format!(
                "orphan job: {} ({} terminal facts, {} executions)",
                o.state.as_deref().unwrap_or("gone"),
                o.facts,
                o.executions
            );
            if o.ok() {
                let _ = writeln!(s, "  {line}");
            } else {
                problems.push(format!("{line}; expected available and untouched"));
            }
        }
        if let Some(p) = &self.poison {
            let list: Vec<String> = p
                .jobs
                .iter()
                .map(|j| {
                    format!(
                        "{} -> {} (closed by {})",
                        j.kind,
                        j.state,
                        j.closures.join(", ")
                    )
                })
                .collect();
            let line = format!("poison results: {}", list.join(", "));
            if p.unrecorded() == 0 {
                let _ = writeln!(s, "  {line}");
            } else {
                problems.push(format!("{line}; {} never recorded", p.unrecorded()));
            }
        }
        if let Some(r) = &self.ring {
            let line = format!(
                "queue ring: {} ready rows at the end (bound {}, peak {}, waited up to {} s)",
                r.at_end,
                r.bound,
                r.peak,
                r.waited.as_secs()
            );
            let line = match &r.diagnosis {
                Some(d) => format!("{line}; {d}"),
                None => line,
            };
            if r.ok() {
                let _ = writeln!(s, "  {line}");
            } else {
                problems.push(line);
            }
        }
        if let Some(f) = &self.failover {
            let line = format!(
                "failover: {} promotions; maintenance on the new primary: {} ring rotations \
                 after the last one",
                f.failovers, f.rotations_after
            );
            if f.ok() {
                let _ = writeln!(s, "  {line}");
            } else {
                problems.push(line);
            }
        }
        for p in problems {
            let _ = writeln!(s, "  FAILED: {p}");
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::PoisonJob;

    #[test]
    fn a_poison_job_closed_only_by_rescue_or_release_was_not_recorded() {
        let job = |closures: &[&str]| PoisonJob {
            kind: "poison-nul-error",
            state: "failed".into(),
            closures: closures.iter().map(|c| (*c).to_owned()).collect(),
        };
        assert!(!job(&[]).recorded());
        assert!(!job(&["rescued", "released"]).recorded());
        assert!(job(&["rescued", "failed"]).recorded());
        assert!(job(&["snoozed"]).recorded());
    }
}
