//! Counting a finished run: pure, from what the producer was told, the
//! ledger, the live jobs and the handlers' execution logs. Unit-tested
//! below without a database.

use std::collections::{BTreeMap, BTreeSet, HashMap};

/// A job as the ledger saw it first appended to the ready plane.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LedgerJob {
    pub job_id: i64,
    pub kind: String,
    pub n: Option<i64>,
}

/// Everything the tally reads.
#[derive(Debug, Default)]
pub struct Observed {
    /// `(n, job_id)` for every enqueue the producer saw succeed.
    pub acked: Vec<(i64, i64)>,
    /// Numbers whose enqueue call failed at least once (it may or may not
    /// have committed), so a second job for them is the producer's retry.
    pub ambiguous: BTreeSet<i64>,
    /// Jobs of the load kind in the ledger.
    pub ledger: Vec<LedgerJob>,
    /// `(job_id, state)` of every terminal fact and dead letter.
    pub facts: Vec<(i64, String)>,
    /// `(job_id, state)` of every job still live.
    pub live: Vec<(i64, String)>,
    /// `(job_id, run_lease)` per handler execution.
    pub executions: Vec<(i64, i64)>,
}

/// The verdict's numbers for the load jobs.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Tally {
    /// Distinct ids (`n`) enqueued.
    pub jobs: usize,
    /// Ids with no completion and no live job.
    pub lost: Vec<i64>,
    /// Of the lost: ids whose job ended failed, cancelled or dead-lettered.
    pub ended_otherwise: Vec<i64>,
    /// Ids still live at the end (the run did not settle).
    pub unsettled: Vec<i64>,
    /// Job ids with more than one terminal fact.
    pub completed_twice: Vec<i64>,
    /// Acknowledged job ids the ledger never saw: committed, then gone.
    pub vanished: Vec<i64>,
    /// Ids with two jobs although their enqueue never failed.
    pub enqueued_twice: Vec<i64>,
    /// Ids with two jobs after a failed enqueue was retried (allowed:
    /// the failure may have hidden a commit).
    pub retried_enqueues: usize,
    /// Completed terminal facts.
    pub completions: usize,
    pub executions: usize,
    /// Jobs whose handler ran more than once (at-least-once delivery).
    pub rerun_jobs: usize,
}

impl Tally {
    pub fn ok(&self) -> bool {
        self.lost.is_empty()
            && self.unsettled.is_empty()
            && self.completed_twice.is_empty()
            && self.vanished.is_empty()
            && self.enqueued_twice.is_empty()
    }
}

pub fn tally(o: &Observed) -> Tally {
    let mut jobs_of: BTreeMap<i64, BTreeSet<i64>> = BTreeMap::new();
    let ledger_ids: BTreeSet<i64> = o.ledger.iter().map(|j| j.job_id).collect();
    for job in &o.ledger {
        if let Some(n) = job.n {
            jobs_of.entry(n).or_default().insert(job.job_id);
        }
    }
    let mut vanished = Vec::new();
    for &(n, job_id) in &o.acked {
        jobs_of.entry(n).or_default().insert(job_id);
        if !ledger_ids.contains(&job_id) {
            vanished.push(job_id);
        }
    }

    let mut facts_of: HashMap<i64, Vec<&str>> = HashMap::new();
    for (job_id, state) in &o.facts {
        facts_of.entry(*job_id).or_default().push(state);
    }
    let live: HashMap<i64, &str> = o.live.iter().map(|(j, s)| (*j, s.as_str())).collect();

    let mut t = Tally {
        jobs: jobs_of.len(),
        vanished,
        ..Tally::default()
    };
    for (&n, ids) in &jobs_of {
        if ids.len() > 1 {
            if o.ambiguous.contains(&n) {
                t.retried_enqueues += 1;
            } else {
                t.enqueued_twice.push(n);
            }
        }
        let mut completed = false;
        let mut ended = false;
        let mut is_live = false;
        for id in ids {
            let facts = facts_of.get(id).map(Vec::as_slice).unwrap_or_default();
            completed |= facts.contains(&"completed");
            ended |= !facts.is_empty();
            is_live |= live.contains_key(id);
        }
        if is_live {
            t.unsettled.push(n);
        } else if !completed {
            t.lost.push(n);
            if ended {
                t.ended_otherwise.push(n);
            }
        }
    }
    for ids in jobs_of.values() {
        for id in ids {
            let facts = facts_of.get(id).map_or(0, Vec::len);
            if facts > 1 {
                t.completed_twice.push(*id);
            }
            t.completions += facts_of
                .get(id)
                .map_or(0, |f| f.iter().filter(|s| **s == "completed").count());
        }
    }
    let load_ids: BTreeSet<i64> = jobs_of.values().flatten().copied().collect();
    let mut runs: HashMap<i64, usize> = HashMap::new();
    for (job_id, _) in o.executions.iter().filter(|(j, _)| load_ids.contains(j)) {
        *runs.entry(*job_id).or_default() += 1;
    }
    t.executions = runs.values().sum();
    t.rerun_jobs = runs.values().filter(|&&r| r > 1).count();
    t
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job(job_id: i64, n: i64) -> LedgerJob {
        LedgerJob {
            job_id,
            kind: "chaos-load".into(),
            n: Some(n),
        }
    }

    fn fact(job_id: i64, state: &str) -> (i64, String) {
        (job_id, state.into())
    }

    #[test]
    fn every_job_completed_once_is_clean_even_when_run_twice() {
        let o = Observed {
            acked: vec![(0, 10), (1, 11)],
            ledger: vec![job(10, 0), job(11, 1)],
            facts: vec![fact(10, "completed"), fact(11, "completed")],
            executions: vec![(10, 1), (11, 1), (11, 2)],
            ..Observed::default()
        };
        let t = tally(&o);
        assert!(t.ok(), "{t:?}");
        assert_eq!(
            (t.jobs, t.completions, t.executions, t.rerun_jobs),
            (2, 2, 3, 1)
        );
    }

    #[test]
    fn a_missing_completion_is_lost_and_a_second_fact_is_completed_twice() {
        let o = Observed {
            acked: vec![(0, 10), (1, 11), (2, 12)],
            ledger: vec![job(10, 0), job(11, 1), job(12, 2)],
            facts: vec![
                fact(10, "completed"),
                fact(10, "completed"),
                fact(12, "failed"),
            ],
            ..Observed::default()
        };
        let t = tally(&o);
        assert_eq!(t.lost, vec![1, 2]);
        assert_eq!(t.ended_otherwise, vec![2]);
        assert_eq!(t.completed_twice, vec![10]);
        assert!(!t.ok());
    }

    #[test]
    fn live_jobs_are_unsettled_and_vanished_acks_are_reported() {
        let o = Observed {
            acked: vec![(0, 10), (1, 11)],
            ledger: vec![job(10, 0)],
            live: vec![fact(10, "running")],
            ..Observed::default()
        };
        let t = tally(&o);
        assert_eq!(t.unsettled, vec![0]);
        assert_eq!(t.vanished, vec![11]);
        assert_eq!(t.lost, vec![1]);
    }

    #[test]
    fn a_second_job_for_an_id_is_allowed_only_after_a_failed_enqueue() {
        let mut o = Observed {
            acked: vec![(0, 10), (0, 20)],
            ledger: vec![job(10, 0), job(20, 0)],
            facts: vec![fact(10, "completed"), fact(20, "completed")],
            ..Observed::default()
        };
        assert_eq!(tally(&o).enqueued_twice, vec![0]);
        o.ambiguous.insert(0);
        let t = tally(&o);
        assert!(t.ok(), "{t:?}");
        assert_eq!(t.retried_enqueues, 1);
    }
}
