//! The named scenarios and their short and long plans. One runner
//! ([`super::runner`]) runs them all; a scenario only says what load, which
//! faults, and which extra jobs and checks.

use super::faults::Fault;
use std::time::Duration;

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Scenario {
    /// kill -9 of workers and of the leader and immediate PostgreSQL
    /// restarts under load, with an orphan job on an unserved queue: every
    /// job completes exactly once and the orphan is still there.
    Faults,
    /// Jobs whose handlers return results the database cannot store (an
    /// error with NUL, huge snooze and retry delays) among the load: every
    /// load job still completes exactly once, every poison result is
    /// recorded, workers stop within their grace period.
    PoisonResult,
    /// An orphan job on an unserved queue under load with fast rotation:
    /// once the load is done, the queue ring is reclaimed around it.
    OrphanRing,
    /// A primary with a synchronous streaming standby, reached through a
    /// libpq host list; under load the primary's postmaster is killed
    /// (SIGKILL) and the standby promoted: every acknowledged job
    /// completes exactly once, no process restarts, and maintenance
    /// resumes on the new primary.
    Failover,
}

impl Scenario {
    pub const ALL: [Scenario; 4] = [
        Scenario::Faults,
        Scenario::PoisonResult,
        Scenario::OrphanRing,
        Scenario::Failover,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Scenario::Faults => "faults",
            Scenario::PoisonResult => "poison-result",
            Scenario::OrphanRing => "orphan-ring",
            Scenario::Failover => "failover",
        }
    }

    pub fn plan(self, long: bool, seconds: Option<u64>) -> Plan {
        let load = Duration::from_secs(seconds.unwrap_or(if long { 300 } else { 20 }));
        let base = Plan {
            load,
            rate: if long { 300 } else { 150 },
            fault_every: Duration::from_secs(if long { 10 } else { 4 }),
            faults: Vec::new(),
            workers: 3,
            concurrency: 16,
            rotate_interval: Duration::from_secs(1),
            rescue_after: Duration::from_secs(3),
            orphan: false,
            poison: false,
            ring_bound: false,
            failover: false,
            settle: Duration::from_secs(if long { 180 } else { 90 }),
        };
        match self {
            Scenario::Faults => Plan {
                faults: vec![
                    Fault::KillWorker,
                    Fault::KillLeader,
                    Fault::RestartPostgres,
                    Fault::KillWorker,
                ],
                orphan: true,
                ..base
            },
            Scenario::PoisonResult => Plan {
                poison: true,
                ..base
            },
            Scenario::OrphanRing => Plan {
                rotate_interval: Duration::from_millis(200),
                orphan: true,
                ring_bound: true,
                ..base
            },
            // Short: one failover halfway through the load. Long: one a
            // minute, each onto the standby made after the last one.
            Scenario::Failover => Plan {
                faults: vec![Fault::Failover],
                fault_every: if long {
                    Duration::from_secs(60)
                } else {
                    load / 2
                },
                workers: 2,
                failover: true,
                ..base
            },
        }
    }
}

/// What one run does.
#[derive(Debug, Clone)]
pub struct Plan {
    /// How long the producer enqueues; faults are injected during it.
    pub load: Duration,
    /// Jobs per second.
    pub rate: u32,
    /// A fault every this long, cycling through `faults`.
    pub fault_every: Duration,
    pub faults: Vec<Fault>,
    pub workers: usize,
    pub concurrency: usize,
    pub rotate_interval: Duration,
    pub rescue_after: Duration,
    /// Enqueue one job on a queue no worker serves.
    pub orphan: bool,
    /// Enqueue one job of each poison kind on the load queue.
    pub poison: bool,
    /// Check that the queue ring is reclaimed once the load is done.
    pub ring_bound: bool,
    /// Run on a primary and synchronous standby of our own, through a
    /// host list; no worker may exit by itself, and maintenance must run
    /// on the new primary after the last failover.
    pub failover: bool,
    /// Longest wait, after the load, for every load job to finish.
    pub settle: Duration,
}
