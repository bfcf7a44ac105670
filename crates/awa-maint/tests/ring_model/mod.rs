//! The reference model of ring reclamation (brief section 4), shared by
//! `ring_props.rs` (the model alone, many cases) and `ring_pg.rs` (the same
//! operation sequences applied to PostgreSQL and compared step by step).
//!
//! # What is modelled
//!
//! * Three rings (queue, claim, lease) of `N` slots each, with the rows each
//!   slot holds, exactly as the SQL lays them out:
//!   - queue slot: ready entries, tombstones, done entries (terminal facts)
//!     and count deltas;
//!   - claim slot: claim receipts and closures;
//!   - lease slot: leases (materialized by a heartbeat).
//! * Jobs in one lane: `Enqueue` appends to the current queue slot; `Claim`
//!   takes the lane in order and writes a receipt in the current claim slot;
//!   complete / fail / cancel write a done entry (and a count delta) in the
//!   job's ready slot; retry (and rescue) defer the job, `Promote` appends it
//!   again to the current queue slot. Cancel of a waiting job tombstones it;
//!   cancel of a deferred one writes its done entry in the current slot.
//! * The ring ledger (append-only, current slot = newest generation),
//!   rotation and the two-phase prune with the rules of
//!   `fn_ring_rotate.sql` / `fn_ring_prune.sql`, including the retirement
//!   marker, the fold of count deltas into rollups, and the read views that
//!   leave retired slots out.
//! * Evacuation (`ready_relocate`, `exec_park`): when the slot a ring
//!   rotates onto next (or, in the queue ring, any sealed slot past its
//!   retention) is still live, phase 1 first moves waiting jobs to the
//!   current queue slot (same lane position, old copy tombstoned) and parks
//!   open attempts out of the rings (a 'parked' closure plus a parked row
//!   that finishing deletes); other live slots are looked past.
//! * A late writer: a producer transaction that drew its id, lane position
//!   and slot at `LateWriterBegin` and commits or rolls back later. Its row is
//!   physically there (it holds the partition's lock) but invisible.
//! * A long-lived REPEATABLE READ snapshot: a frozen copy of the storage at
//!   open. `TRUNCATE` is not MVCC-safe, so a slot truncated while it is open
//!   is emptied in the frozen copy too, which is exactly what PostgreSQL
//!   shows such a snapshot.
//! * Leader crash: the maintenance session dies between steps; all that the
//!   next leader has is the durable state, which is all the model has.
//!   Racing rotators: a compare-and-swap on `(ring, generation)`.
//!
//! # How it is used
//!
//! Rotation and prune have decisions the database takes (a lock timed out,
//! a snapshot pins the horizon). The model computes the outcome it expects
//! (`rotate_expect`, `prune_choice`); the model-only tests apply it, the
//! PostgreSQL tests apply what PostgreSQL answered. Either way the effect is
//! applied to the model's storage and [`Model::check`] then verifies the
//! invariants *by their consequences* (a job whose rows were truncated is
//! lost, a snapshot whose view changed was not safe), so a wrong decision
//! by PostgreSQL shows up as a violated invariant, not only as a mismatch.
//!
//! # The invariants checked after every step
//!
//! 1. No lost work: every committed non-terminal job is still where its
//!    rows say it is (ready entry past the lane head, open receipt with its
//!    body, deferred row).
//! 2. No lost attempt: every open receipt, and the lease of every running
//!    attempt that heartbeated, still exists.
//! 3. No in-flight surprise: an open late writer's row is still there, and
//!    once committed its job is covered by 1 and is visible in the read view.
//! 4. No wrap onto live data: a rotation only lands on a slot that is empty
//!    (including uncommitted rows) and not awaiting truncation.
//! 5. Snapshot safety: the open snapshot's view of `jobs` never changes, and
//!    no slot is truncated while a snapshot that predates its retirement is
//!    open.
//! 6. One leader: the ledger is one chain, generation by generation, and
//!    two racing rotators never both rotate.
//! 7. Bounded storage ([`Model::check_bounded`]): with no snapshot and no
//!    late writer open, running maintenance to a fixpoint leaves no sealed
//!    slot that holds only dead rows, and the slot each ring rotates onto
//!    next empty, whatever is live (a straggler, a job that runs for ever);
//!    with nothing live, the ring is empty. Storage is thus at most
//!    slots x (rows written per rotation), whatever the total history.
//!
//! Plus exact counts: rollups + count deltas equal the number of jobs that
//! reached each terminal state, however much history was reclaimed.

#![allow(dead_code)] // two test crates share this module; each uses part of it

use proptest::prelude::*;
use std::collections::BTreeMap;
use std::ops::Range;

/// Attempts before a retry fails for good (the tests enqueue with this).
pub const MAX_ATTEMPTS: i32 = 3;
/// At most this many late writers are open at once.
pub const MAX_WRITERS: usize = 2;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Ring {
    Queue,
    Claim,
    Lease,
}

impl Ring {
    pub const ALL: [Ring; 3] = [Ring::Queue, Ring::Claim, Ring::Lease];

    fn idx(self) -> usize {
        self as usize
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Ring::Queue => "queue",
            Ring::Claim => "claim",
            Ring::Lease => "lease",
        }
    }
}

/// Slots per ring.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shape {
    pub queue: usize,
    pub claim: usize,
    pub lease: usize,
}

impl Shape {
    /// The smallest shape the installer accepts: wraps quickly.
    pub const SMALL: Shape = Shape {
        queue: 4,
        claim: 4,
        lease: 4,
    };

    pub fn slots(self, ring: Ring) -> usize {
        match ring {
            Ring::Queue => self.queue,
            Ring::Claim => self.claim,
            Ring::Lease => self.lease,
        }
    }
}

/// Which of the implementation's choices the model follows. The two flags
/// only make a difference when a late writer commits into a slot that was
/// retired while it was open (see the regression tests in ring_props.rs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rules {
    /// The read views leave out *every* row of a retired queue slot,
    /// including a ready entry a late writer committed there afterwards.
    pub views_hide_retired_entries: bool,
    /// Phase 2 folds the slot's count deltas into the rollups again, under
    /// its lock, right before the TRUNCATE.
    pub refold_before_truncate: bool,
}

impl Rules {
    /// What the SQL does today (the fix below, applied).
    pub const IMPLEMENTED: Rules = Rules::PROPOSED;
    /// What the SQL did before the property tests found the gap; kept so
    /// a test shows the model still tells the two apart.
    pub const BEFORE_FIX: Rules = Rules {
        views_hide_retired_entries: true,
        refold_before_truncate: false,
    };
    /// The proposed fix: views hide only terminal facts of a retired slot
    /// (it holds nothing else that is visible, unless a late writer put it
    /// there), and deltas written after the retirement are folded before
    /// the slot is truncated.
    pub const PROPOSED: Rules = Rules {
        views_hide_retired_entries: false,
        refold_before_truncate: true,
    };

    /// Whether a late writer may commit into a retired slot without breaking
    /// an invariant.
    pub fn late_commit_into_retired_slot_is_safe(self) -> bool {
        !self.views_hide_retired_entries && self.refold_before_truncate
    }
}

/// A job's state as the `jobs` read view names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum State {
    Available,
    Running,
    Retryable,
    Completed,
    Failed,
    Cancelled,
}

impl State {
    pub const TERMINAL: [State; 3] = [State::Completed, State::Failed, State::Cancelled];

    pub fn as_str(self) -> &'static str {
        match self {
            State::Available => "available",
            State::Running => "running",
            State::Retryable => "retryable",
            State::Completed => "completed",
            State::Failed => "failed",
            State::Cancelled => "cancelled",
        }
    }

    pub fn parse(s: &str) -> Option<State> {
        [
            State::Available,
            State::Running,
            State::Retryable,
            State::Completed,
            State::Failed,
            State::Cancelled,
        ]
        .into_iter()
        .find(|st| st.as_str() == s)
    }

    pub fn is_terminal(self) -> bool {
        State::TERMINAL.contains(&self)
    }
}

/// One generated step. Indices pick among what exists, modulo its count
/// (running jobs for Complete/Retry/Fail/Heartbeat, non-terminal jobs for
/// Cancel, both ordered by id); a step with nothing to act on does nothing.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Op {
    Enqueue(u8),
    Claim(u8),
    Complete(u8),
    Retry(u8),
    Fail(u8),
    Cancel(u8),
    Heartbeat(u8),
    Promote,
    /// Finish every open attempt as abandoned (rescue with staleness 0).
    Rescue,
    Rotate(Ring),
    Prune(Ring),
    LateWriterBegin,
    /// Commit the oldest open late writer.
    LateWriterCommit,
    LateWriterRollback,
    SnapshotOpen,
    SnapshotClose,
    LeaderCrash,
    RacingRotate(Ring),
    /// One leader pass: on every ring, prune twice (retire, then truncate)
    /// and rotate.
    Maintain,
}

/// One line per op even in `{:#?}`, so a shrunk sequence reads as a list.
impl std::fmt::Debug for Op {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Op::Enqueue(n) => write!(f, "Enqueue({n})"),
            Op::Claim(n) => write!(f, "Claim({n})"),
            Op::Complete(k) => write!(f, "Complete({k})"),
            Op::Retry(k) => write!(f, "Retry({k})"),
            Op::Fail(k) => write!(f, "Fail({k})"),
            Op::Cancel(k) => write!(f, "Cancel({k})"),
            Op::Heartbeat(k) => write!(f, "Heartbeat({k})"),
            Op::Rotate(r) => write!(f, "Rotate({r:?})"),
            Op::Prune(r) => write!(f, "Prune({r:?})"),
            Op::RacingRotate(r) => write!(f, "RacingRotate({r:?})"),
            Op::Promote => f.write_str("Promote"),
            Op::Rescue => f.write_str("Rescue"),
            Op::LateWriterBegin => f.write_str("LateWriterBegin"),
            Op::LateWriterCommit => f.write_str("LateWriterCommit"),
            Op::LateWriterRollback => f.write_str("LateWriterRollback"),
            Op::SnapshotOpen => f.write_str("SnapshotOpen"),
            Op::SnapshotClose => f.write_str("SnapshotClose"),
            Op::LeaderCrash => f.write_str("LeaderCrash"),
            Op::Maintain => f.write_str("Maintain"),
        }
    }
}

/// How an attempt is finished.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum How {
    Complete,
    Retry,
    Fail,
    Cancel,
    Rescue,
}

/// An [`Op`] resolved against the model's state: concrete job ids, and
/// no-ops made explicit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    Noop,
    Enqueue(usize),
    Claim(usize),
    Finish(i64, How),
    Cancel(i64),
    Heartbeat(i64),
    Promote,
    Rescue,
    Rotate(Ring),
    RacingRotate(Ring),
    Prune(Ring),
    WriterBegin,
    WriterCommit,
    WriterRollback,
    SnapshotOpen,
    SnapshotClose,
    LeaderCrash,
    Maintain,
}

/// The calls one leader pass makes, in order.
pub const MAINTAIN_PASS: [(Ring, bool); 9] = [
    (Ring::Queue, false),
    (Ring::Queue, false),
    (Ring::Queue, true),
    (Ring::Claim, false),
    (Ring::Claim, false),
    (Ring::Claim, true),
    (Ring::Lease, false),
    (Ring::Lease, false),
    (Ring::Lease, true),
];

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RotateOutcome {
    Rotated {
        from: usize,
        to: usize,
        generation: u64,
    },
    Idle,
    IncomingNotEmpty {
        slot: usize,
    },
    LostRace,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PruneOutcome {
    Retired { slot: usize },
    Pruned { slot: usize },
    NothingToPrune,
    LiveRows { slot: usize },
    SnapshotPinned { slot: usize },
    Busy { slot: usize },
}

impl PruneOutcome {
    fn kind(self) -> &'static str {
        match self {
            PruneOutcome::Retired { .. } => "prune:retired",
            PruneOutcome::Pruned { .. } => "prune:pruned",
            PruneOutcome::NothingToPrune => "prune:nothing",
            PruneOutcome::LiveRows { .. } => "prune:live_rows",
            PruneOutcome::SnapshotPinned { .. } => "prune:snapshot_pinned",
            PruneOutcome::Busy { .. } => "prune:busy",
        }
    }
}

/// What a prune should answer: `expected` from the model's own sessions;
/// `tolerated` are safe answers that sessions outside the model can cause
/// (autovacuum holding a lock or an old xmin, other databases' transactions
/// lowering the snapshot's xmin). Never a truncation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PruneChoice {
    pub expected: PruneOutcome,
    pub tolerated: Vec<PruneOutcome>,
    /// Phase 1 evacuates this slot before deciding.
    pub evacuate: Option<usize>,
}

/// One attempt as the claim hands it out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Token {
    pub job: i64,
    pub run_lease: i64,
    pub attempt: i32,
    pub claim_slot: usize,
    pub ready_slot: usize,
    pub ready_seq: i64,
}

// ---------------------------------------------------------------------------
// Storage: the rows of every slot, as the SQL writes them.

#[derive(Debug, Clone, PartialEq, Eq)]
struct Entry {
    job: i64,
    lane_seq: i64,
    attempt: i32,
    run_lease: i64,
    /// The open late writer whose uncommitted row this is.
    writer: Option<u32>,
    /// A copy `ready_relocate` made (keeps the original's ready_at).
    relocated: bool,
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct Done {
    job: i64,
    run_lease: i64,
    state: State,
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct Delta {
    state: State,
    n: i64,
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct Receipt {
    job: i64,
    run_lease: i64,
    attempt: i32,
    ready_slot: usize,
    ready_seq: i64,
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct Lease {
    job: i64,
    run_lease: i64,
    claim_slot: usize,
}

/// An attempt moved out of the rings by `exec_park`.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Parked {
    job: i64,
    run_lease: i64,
}

#[derive(Debug, Clone, Default)]
struct Slot {
    entries: Vec<Entry>,
    /// (job, lane_seq)
    tombstones: Vec<(i64, i64)>,
    done: Vec<Done>,
    deltas: Vec<Delta>,
    receipts: Vec<Receipt>,
    /// (job, run_lease)
    closures: Vec<(i64, i64)>,
    leases: Vec<Lease>,
}

impl Slot {
    /// Rows a new snapshot sees (what `count(*)` and the emptiness checks see).
    fn visible_rows(&self) -> usize {
        self.entries.iter().filter(|e| e.writer.is_none()).count()
            + self.tombstones.len()
            + self.done.len()
            + self.deltas.len()
            + self.receipts.len()
            + self.closures.len()
            + self.leases.len()
    }

    /// Rows worth sealing: everything but relocated copies still waiting
    /// (`ring_slot_fresh`). Rotating those away would only carry them round
    /// the ring; a claimed or cancelled copy is dead and may go.
    fn fresh_rows(&self, lane_head: i64) -> usize {
        self.visible_rows()
            - self
                .entries
                .iter()
                .filter(|e| {
                    e.writer.is_none()
                        && e.relocated
                        && e.lane_seq > lane_head
                        && !self.tombstoned(e.job, e.lane_seq)
                })
                .count()
    }

    /// Every row, committed or not.
    fn all_rows(&self) -> usize {
        self.visible_rows() + self.entries.iter().filter(|e| e.writer.is_some()).count()
    }

    fn closed(&self, job: i64, run_lease: i64) -> bool {
        self.closures.contains(&(job, run_lease))
    }

    fn tombstoned(&self, job: i64, lane_seq: i64) -> bool {
        self.tombstones.contains(&(job, lane_seq))
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Retirement {
    slot: usize,
    /// Model clock of the retiring transaction (its xid, in order).
    at: u64,
}

#[derive(Debug, Clone)]
struct Deferred {
    job: i64,
    attempt: i32,
    run_lease: i64,
    /// Promotion order: (when it became due, job id), like `run_at, job_id`.
    due: (u64, i64),
}

/// Everything durable that the read views and maintenance look at.
#[derive(Debug, Clone)]
struct Store {
    slots: [Vec<Slot>; 3],
    retired: [Option<Retirement>; 3],
    deferred: Vec<Deferred>,
    parked: Vec<Parked>,
    lane_head: i64,
    rollups: BTreeMap<State, i64>,
}

impl Store {
    fn slot(&self, ring: Ring, s: usize) -> &Slot {
        &self.slots[ring.idx()][s]
    }

    fn slot_mut(&mut self, ring: Ring, s: usize) -> &mut Slot {
        &mut self.slots[ring.idx()][s]
    }

    fn retired_slot(&self, ring: Ring) -> Option<usize> {
        self.retired[ring.idx()].map(|r| r.slot)
    }

    fn receipt_open(&self, r: &Receipt, claim_slot: usize) -> bool {
        !self
            .slot(Ring::Claim, claim_slot)
            .closed(r.job, r.run_lease)
    }

    /// Why a slot still holds live data (committed rows only, as the SQL's
    /// `ready_slot_live` / `exec_slot_live` see it), or None.
    fn live(&self, ring: Ring, s: usize) -> Option<String> {
        match ring {
            Ring::Queue => {
                let slot = self.slot(Ring::Queue, s);
                if let Some(e) = slot.entries.iter().find(|e| {
                    e.writer.is_none()
                        && e.lane_seq > self.lane_head
                        && !slot.tombstoned(e.job, e.lane_seq)
                }) {
                    return Some(format!("job {} is waiting", e.job));
                }
                self.open_receipts()
                    .find(|(_, r)| r.ready_slot == s)
                    .map(|(_, r)| format!("attempt {}/{} reads its body here", r.job, r.run_lease))
            }
            Ring::Claim => self
                .open_receipts()
                .find(|(k, _)| *k == s)
                .map(|(_, r)| format!("attempt {}/{} is open", r.job, r.run_lease)),
            Ring::Lease => self
                .slot(Ring::Lease, s)
                .leases
                .iter()
                .find(|l| {
                    self.slot(Ring::Claim, l.claim_slot)
                        .receipts
                        .iter()
                        .any(|r| r.job == l.job && r.run_lease == l.run_lease)
                        && !self
                            .slot(Ring::Claim, l.claim_slot)
                            .closed(l.job, l.run_lease)
                })
                .map(|l| format!("lease of {}/{} is live", l.job, l.run_lease)),
        }
    }

    fn open_receipts(&self) -> impl Iterator<Item = (usize, &Receipt)> + '_ {
        self.slots[Ring::Claim.idx()]
            .iter()
            .enumerate()
            .flat_map(move |(k, slot)| {
                slot.receipts
                    .iter()
                    .filter(move |r| !slot.closed(r.job, r.run_lease))
                    .map(move |r| (k, r))
            })
    }

    /// The `jobs` read view: every (id, state) row it returns, sorted.
    /// `rules`: None reads the storage as it is (no retirement filtering),
    /// Some applies the views' filters.
    fn view(&self, rules: Option<Rules>) -> Vec<(i64, State)> {
        let hidden = |ring: Ring, s: usize| rules.is_some() && self.retired_slot(ring) == Some(s);
        let hide_entries = rules.is_some_and(|r| r.views_hide_retired_entries);
        let mut out = Vec::new();
        for (s, slot) in self.slots[Ring::Queue.idx()].iter().enumerate() {
            for e in &slot.entries {
                if e.writer.is_none()
                    && e.lane_seq > self.lane_head
                    && !slot.tombstoned(e.job, e.lane_seq)
                    && !(hide_entries && hidden(Ring::Queue, s))
                {
                    out.push((e.job, State::Available));
                }
            }
            if !hidden(Ring::Queue, s) {
                out.extend(slot.done.iter().map(|d| (d.job, d.state)));
            }
        }
        for (k, slot) in self.slots[Ring::Claim.idx()].iter().enumerate() {
            if hidden(Ring::Claim, k) {
                continue;
            }
            for r in &slot.receipts {
                let body = self
                    .slot(Ring::Queue, r.ready_slot)
                    .entries
                    .iter()
                    .any(|e| e.writer.is_none() && e.job == r.job && e.lane_seq == r.ready_seq);
                if !slot.closed(r.job, r.run_lease) && body {
                    out.push((r.job, State::Running));
                }
            }
        }
        out.extend(self.parked.iter().map(|p| (p.job, State::Running)));
        out.extend(self.deferred.iter().map(|d| (d.job, State::Retryable)));
        out.sort();
        out
    }

    fn totals(&self) -> BTreeMap<State, i64> {
        let mut t = self.rollups.clone();
        for slot in &self.slots[Ring::Queue.idx()] {
            for d in &slot.deltas {
                *t.entry(d.state).or_default() += d.n;
            }
        }
        t.retain(|_, n| *n != 0);
        t
    }

    fn fold_deltas(&mut self, s: usize) {
        let deltas = std::mem::take(&mut self.slot_mut(Ring::Queue, s).deltas);
        for d in deltas {
            *self.rollups.entry(d.state).or_default() += d.n;
        }
    }
}

// ---------------------------------------------------------------------------
// The model.

/// What the specification says about one job (independent of where its rows
/// are, which is what the checks compare against).
#[derive(Debug, Clone)]
struct Job {
    state: State,
    token: Option<Token>,
    lease_slot: Option<usize>,
}

#[derive(Debug, Clone)]
struct Writer {
    id: u32,
    job: i64,
    slot: usize,
    lane_seq: i64,
    began: u64,
}

#[derive(Debug, Clone)]
struct Snapshot {
    opened: u64,
    /// Oldest transaction still running when it was taken (its xmin).
    xmin: u64,
    frozen: Store,
    seen: Vec<(i64, State)>,
}

#[derive(Debug, Clone)]
pub struct Model {
    pub shape: Shape,
    pub rules: Rules,
    /// Steer a late writer whose slot is retired to roll back instead of
    /// committing, when the rules make that commit unsafe (the known gap).
    pub avoid_known_gap: bool,
    clock: u64,
    next_job: i64,
    next_seq: i64,
    next_writer: u32,
    store: Store,
    ledger: [Vec<usize>; 3],
    jobs: BTreeMap<i64, Job>,
    writers: Vec<Writer>,
    snapshot: Option<Snapshot>,
    /// Sessions the leader has had (LeaderCrash starts a new one).
    pub leader_sessions: u32,
    /// An invariant broken inside an operation (a wrap, a truncation under a
    /// snapshot), reported by the next check.
    violation: Option<String>,
    /// How often each outcome happened (for coverage checks).
    pub seen: BTreeMap<&'static str, u32>,
}

impl Model {
    /// The model of what the SQL does today, steering around the known gap.
    pub fn new(shape: Shape) -> Self {
        Self::with_rules(shape, Rules::IMPLEMENTED)
    }

    pub fn with_rules(shape: Shape, rules: Rules) -> Self {
        let slots = |n: usize| vec![Slot::default(); n];
        Model {
            shape,
            rules,
            avoid_known_gap: !rules.late_commit_into_retired_slot_is_safe(),
            clock: 0,
            next_job: 1,
            next_seq: 1,
            next_writer: 1,
            store: Store {
                slots: [slots(shape.queue), slots(shape.claim), slots(shape.lease)],
                retired: [None; 3],
                deferred: Vec::new(),
                parked: Vec::new(),
                lane_head: 0,
                rollups: BTreeMap::new(),
            },
            ledger: [vec![0], vec![0], vec![0]],
            jobs: BTreeMap::new(),
            writers: Vec::new(),
            snapshot: None,
            leader_sessions: 1,
            violation: None,
            seen: BTreeMap::new(),
        }
    }

    /// Every operation is one transaction; the clock orders them (and so
    /// stands in for transaction ids).
    fn tick(&mut self) -> u64 {
        self.clock += 1;
        self.clock
    }

    fn note(&mut self, what: &'static str) {
        *self.seen.entry(what).or_default() += 1;
    }

    fn violate(&mut self, msg: String) {
        if self.violation.is_none() {
            self.violation = Some(msg);
        }
    }

    pub fn current(&self, ring: Ring) -> usize {
        *self.ledger[ring.idx()]
            .last()
            .expect("a ledger is never empty")
    }

    pub fn generation(&self, ring: Ring) -> u64 {
        self.ledger[ring.idx()].len() as u64 - 1
    }

    pub fn retired(&self, ring: Ring) -> Option<usize> {
        self.store.retired_slot(ring)
    }

    pub fn snapshot_open(&self) -> bool {
        self.snapshot.is_some()
    }

    pub fn open_writers(&self) -> usize {
        self.writers.len()
    }

    fn ids_where(&self, f: impl Fn(State) -> bool) -> Vec<i64> {
        self.jobs
            .iter()
            .filter(|(_, j)| f(j.state))
            .map(|(id, _)| *id)
            .collect()
    }

    pub fn running(&self) -> Vec<i64> {
        self.ids_where(|s| s == State::Running)
    }

    pub fn token(&self, job: i64) -> Option<Token> {
        self.jobs.get(&job).and_then(|j| j.token)
    }

    /// Turn a generated op into a concrete action.
    pub fn resolve(&self, op: &Op) -> Action {
        let pick = |ids: Vec<i64>, k: u8| -> Option<i64> {
            (!ids.is_empty()).then(|| ids[k as usize % ids.len()])
        };
        let finish = |k: u8, how: How| {
            pick(self.running(), k).map_or(Action::Noop, |id| Action::Finish(id, how))
        };
        match *op {
            Op::Enqueue(n) => Action::Enqueue(n.max(1) as usize),
            Op::Claim(n) => Action::Claim(n.max(1) as usize),
            Op::Complete(k) => finish(k, How::Complete),
            Op::Retry(k) => finish(k, How::Retry),
            Op::Fail(k) => finish(k, How::Fail),
            Op::Cancel(k) => {
                pick(self.ids_where(|s| !s.is_terminal()), k).map_or(Action::Noop, Action::Cancel)
            }
            Op::Heartbeat(k) => pick(self.running(), k).map_or(Action::Noop, Action::Heartbeat),
            Op::Promote => Action::Promote,
            Op::Rescue => Action::Rescue,
            Op::Rotate(r) => Action::Rotate(r),
            Op::RacingRotate(r) => Action::RacingRotate(r),
            Op::Prune(r) => Action::Prune(r),
            Op::LateWriterBegin if self.writers.len() < MAX_WRITERS => Action::WriterBegin,
            Op::LateWriterCommit if !self.writers.is_empty() => {
                let w = &self.writers[0];
                if self.avoid_known_gap && self.retired(Ring::Queue) == Some(w.slot) {
                    // Under BEFORE_FIX, committing into a retired slot hid the job
                    // from the views and can lose a count delta; see the
                    // ignored regression tests.
                    Action::WriterRollback
                } else {
                    Action::WriterCommit
                }
            }
            Op::LateWriterRollback if !self.writers.is_empty() => Action::WriterRollback,
            Op::SnapshotOpen if self.snapshot.is_none() => Action::SnapshotOpen,
            Op::SnapshotClose if self.snapshot.is_some() => Action::SnapshotClose,
            Op::LeaderCrash => Action::LeaderCrash,
            Op::Maintain => Action::Maintain,
            _ => Action::Noop,
        }
    }

    /// One op with the model's own decisions, then every check.
    pub fn step(&mut self, op: &Op) -> Result<Action, String> {
        let action = self.resolve(op);
        match action {
            Action::Noop => {}
            Action::Enqueue(n) => {
                self.enqueue(n);
            }
            Action::Claim(n) => {
                self.claim(n);
            }
            Action::Finish(id, how) => {
                self.finish(id, how);
            }
            Action::Cancel(id) => {
                self.cancel(id);
            }
            Action::Heartbeat(id) => {
                self.heartbeat(id);
            }
            Action::Promote => {
                self.promote();
            }
            Action::Rescue => {
                self.rescue();
            }
            Action::Rotate(r) => {
                let o = self.rotate_expect(r);
                self.apply_rotate(r, o)?;
            }
            Action::RacingRotate(r) => {
                let o = self.racing_expect(r)[0];
                self.apply_racing(r, o)?;
            }
            Action::Prune(r) => {
                let o = self.prune_choice(r).expected;
                self.apply_prune(r, o)?;
            }
            Action::WriterBegin => {
                self.writer_begin();
            }
            Action::WriterCommit => self.writer_commit(),
            Action::WriterRollback => self.writer_rollback(),
            Action::SnapshotOpen => {
                self.open_snapshot();
            }
            Action::SnapshotClose => self.close_snapshot(),
            Action::LeaderCrash => self.leader_crash(),
            Action::Maintain => {
                for (ring, rotate) in MAINTAIN_PASS {
                    if rotate {
                        let o = self.rotate_expect(ring);
                        self.apply_rotate(ring, o)?;
                    } else {
                        let o = self.prune_choice(ring).expected;
                        self.apply_prune(ring, o)?;
                    }
                    self.check()?;
                }
            }
        }
        self.check()?;
        Ok(action)
    }

    // --- the job path -----------------------------------------------------

    /// Append `n` jobs to the current queue slot; their ids.
    pub fn enqueue(&mut self, n: usize) -> Vec<i64> {
        self.tick();
        let slot = self.current(Ring::Queue);
        let ids: Vec<i64> = (0..n as i64).map(|i| self.next_job + i).collect();
        self.next_job += n as i64;
        for &job in &ids {
            self.append_entry(slot, job, 0, 0, None);
            self.jobs.insert(
                job,
                Job {
                    state: State::Available,
                    token: None,
                    lease_slot: None,
                },
            );
        }
        ids
    }

    fn append_entry(
        &mut self,
        slot: usize,
        job: i64,
        attempt: i32,
        run_lease: i64,
        writer: Option<u32>,
    ) -> i64 {
        let lane_seq = self.next_seq;
        self.next_seq += 1;
        self.store.slot_mut(Ring::Queue, slot).entries.push(Entry {
            job,
            lane_seq,
            attempt,
            run_lease,
            writer,
            relocated: false,
        });
        lane_seq
    }

    /// What a claim of up to `n` jobs takes, in lane order, without taking
    /// it. With a late writer open, the claim frontier may pass nothing: it
    /// waits for the writer when the writer's xid is in the claim's
    /// snapshot, which depends on every transaction that completed on the
    /// cluster since, so PostgreSQL answers either this or nothing. It never
    /// passes the writer's position: anything committed behind it was
    /// committed by a newer transaction, which puts the writer in the
    /// snapshot's xip, and then the frontier holds everything back.
    pub fn claimable(&self, n: usize) -> Vec<Token> {
        let head = self.store.lane_head;
        let mut cands: Vec<(i64, usize, &Entry)> = Vec::new();
        for (s, slot) in self.store.slots[Ring::Queue.idx()].iter().enumerate() {
            for e in &slot.entries {
                if e.writer.is_none() && e.lane_seq > head && !slot.tombstoned(e.job, e.lane_seq) {
                    cands.push((e.lane_seq, s, e));
                }
            }
        }
        cands.sort_by_key(|c| c.0);
        if let Some(first_open) = self.writers.iter().map(|w| w.lane_seq).min()
            && cands.iter().any(|c| c.0 > first_open)
        {
            return Vec::new();
        }
        let claim_slot = self.current(Ring::Claim);
        cands
            .into_iter()
            .take(n)
            .map(|(lane_seq, ready_slot, e)| Token {
                job: e.job,
                run_lease: e.run_lease + 1,
                attempt: e.attempt + 1,
                claim_slot,
                ready_slot,
                ready_seq: lane_seq,
            })
            .collect()
    }

    /// Claim up to `n` jobs in lane order (see `claimable`): one receipt
    /// each in the current claim slot; the lane head moves past them.
    pub fn claim(&mut self, n: usize) -> Vec<Token> {
        let out = self.claimable(n);
        self.tick();
        if !self.writers.is_empty() && !out.is_empty() {
            self.note("claim:past_open_writer");
        }
        for t in &out {
            self.store
                .slot_mut(Ring::Claim, t.claim_slot)
                .receipts
                .push(Receipt {
                    job: t.job,
                    run_lease: t.run_lease,
                    attempt: t.attempt,
                    ready_slot: t.ready_slot,
                    ready_seq: t.ready_seq,
                });
            self.store.lane_head = t.ready_seq;
            let job = self.jobs.get_mut(&t.job).expect("a claimable job is known");
            job.state = State::Running;
            job.token = Some(*t);
            job.lease_slot = None;
        }
        out
    }

    /// Finish one running attempt; the job's next state.
    pub fn finish(&mut self, job: i64, how: How) -> State {
        self.tick();
        self.finish_batch(&[(job, how)])[0]
    }

    /// The guarded finish path for many attempts in one transaction (one
    /// count delta per ready slot and state, as `finish` groups them).
    fn finish_batch(&mut self, batch: &[(i64, How)]) -> Vec<State> {
        let now = self.clock;
        let mut deltas: BTreeMap<(usize, State), i64> = BTreeMap::new();
        let mut out = Vec::new();
        for &(id, how) in batch {
            let t = self.token(id).expect("finishing a running job");
            // A parked attempt is finished by deleting its parked row; its
            // terminal fact (body copied in) goes to the current queue slot.
            let parked = self.parked(id, t.run_lease);
            let hist_slot = if parked {
                self.store
                    .parked
                    .retain(|p| !(p.job == id && p.run_lease == t.run_lease));
                self.current(Ring::Queue)
            } else {
                self.store
                    .slot_mut(Ring::Claim, t.claim_slot)
                    .closures
                    .push((id, t.run_lease));
                t.ready_slot
            };
            let next = match how {
                How::Complete => State::Completed,
                How::Cancel => State::Cancelled,
                How::Fail => State::Failed,
                How::Retry | How::Rescue if t.attempt < MAX_ATTEMPTS => State::Retryable,
                How::Retry | How::Rescue => State::Failed,
            };
            if next.is_terminal() {
                self.store.slot_mut(Ring::Queue, hist_slot).done.push(Done {
                    job: id,
                    run_lease: t.run_lease,
                    state: next,
                });
                *deltas.entry((hist_slot, next)).or_default() += 1;
            } else {
                self.store.deferred.push(Deferred {
                    job: id,
                    attempt: t.attempt,
                    run_lease: t.run_lease,
                    due: (now, id),
                });
            }
            let job = self.jobs.get_mut(&id).expect("known");
            job.state = next;
            job.token = None;
            job.lease_slot = None;
            out.push(next);
        }
        for ((slot, state), n) in deltas {
            self.store
                .slot_mut(Ring::Queue, slot)
                .deltas
                .push(Delta { state, n });
        }
        out
    }

    /// Cancel a job wherever it is; the state it was cancelled from as
    /// `cancel_job` names it ("available", "retry", "running"), or None.
    pub fn cancel(&mut self, id: i64) -> Option<&'static str> {
        self.tick();
        let state = self.jobs.get(&id)?.state;
        match state {
            State::Available => {
                // Its newest live entry, as `ready_tombstone` picks it (a
                // relocated job's old copy is tombstoned).
                let (slot, e) = self.store.slots[Ring::Queue.idx()]
                    .iter()
                    .enumerate()
                    .flat_map(|(s, slot)| slot.entries.iter().map(move |e| (s, slot, e)))
                    .filter(|(_, slot, e)| {
                        e.job == id && e.writer.is_none() && !slot.tombstoned(e.job, e.lane_seq)
                    })
                    .map(|(s, _, e)| (s, e))
                    .max_by_key(|(_, e)| e.lane_seq)
                    .map(|(s, e)| (s, e.clone()))
                    .expect("an available job has an entry");
                let slot_rows = self.store.slot_mut(Ring::Queue, slot);
                slot_rows.tombstones.push((id, e.lane_seq));
                slot_rows.done.push(Done {
                    job: id,
                    run_lease: e.run_lease,
                    state: State::Cancelled,
                });
                slot_rows.deltas.push(Delta {
                    state: State::Cancelled,
                    n: 1,
                });
                self.jobs.get_mut(&id).expect("known").state = State::Cancelled;
                Some("available")
            }
            State::Retryable => {
                let pos = self.store.deferred.iter().position(|d| d.job == id)?;
                let d = self.store.deferred.remove(pos);
                let slot = self.current(Ring::Queue);
                let slot_rows = self.store.slot_mut(Ring::Queue, slot);
                slot_rows.done.push(Done {
                    job: id,
                    run_lease: d.run_lease,
                    state: State::Cancelled,
                });
                slot_rows.deltas.push(Delta {
                    state: State::Cancelled,
                    n: 1,
                });
                self.jobs.get_mut(&id).expect("known").state = State::Cancelled;
                Some("retry")
            }
            State::Running => {
                self.finish_batch(&[(id, How::Cancel)]);
                Some("running")
            }
            _ => None,
        }
    }

    /// A heartbeat materializes the attempt's lease in the current lease
    /// slot the first time; later ones update it where it is.
    pub fn heartbeat(&mut self, id: i64) -> bool {
        self.tick();
        let Some(t) = self.token(id) else {
            return false;
        };
        if self.parked(id, t.run_lease) {
            // Heartbeats go to the parked row: nothing in the rings.
            return true;
        }
        if self.jobs[&id].lease_slot.is_none() {
            let slot = self.current(Ring::Lease);
            self.store.slot_mut(Ring::Lease, slot).leases.push(Lease {
                job: id,
                run_lease: t.run_lease,
                claim_slot: t.claim_slot,
            });
            self.jobs.get_mut(&id).expect("known").lease_slot = Some(slot);
        }
        true
    }

    /// Move every deferred job (all are due: retries use delay 0) back to
    /// the current queue slot, earliest first; how many.
    pub fn promote(&mut self) -> usize {
        self.tick();
        let mut due = std::mem::take(&mut self.store.deferred);
        due.sort_by_key(|d| d.due);
        let slot = self.current(Ring::Queue);
        for d in &due {
            self.append_entry(slot, d.job, d.attempt, d.run_lease, None);
            let job = self.jobs.get_mut(&d.job).expect("known");
            job.state = State::Available;
        }
        due.len()
    }

    /// Rescue every open attempt (staleness 0); the rescued job ids.
    pub fn rescue(&mut self) -> Vec<i64> {
        self.tick();
        let ids = self.running();
        let batch: Vec<(i64, How)> = ids.iter().map(|&id| (id, How::Rescue)).collect();
        self.finish_batch(&batch);
        ids
    }

    // --- late writers and snapshots -----------------------------------------

    /// A producer transaction draws its job id, lane position and slot now
    /// and stays open; the job's id.
    pub fn writer_begin(&mut self) -> i64 {
        let began = self.tick();
        let id = self.next_writer;
        self.next_writer += 1;
        let job = self.next_job;
        self.next_job += 1;
        let slot = self.current(Ring::Queue);
        let lane_seq = self.append_entry(slot, job, 0, 0, Some(id));
        self.writers.push(Writer {
            id,
            job,
            slot,
            lane_seq,
            began,
        });
        job
    }

    fn take_writer(&mut self) -> Option<(Writer, Option<usize>)> {
        if self.writers.is_empty() {
            return None;
        }
        let w = self.writers.remove(0);
        let pos = self
            .store
            .slot(Ring::Queue, w.slot)
            .entries
            .iter()
            .position(|e| e.writer == Some(w.id));
        Some((w, pos))
    }

    pub fn writer_commit(&mut self) {
        self.tick();
        let Some((w, pos)) = self.take_writer() else {
            return;
        };
        if let Some(pos) = pos {
            self.store.slot_mut(Ring::Queue, w.slot).entries[pos].writer = None;
        }
        self.jobs.insert(
            w.job,
            Job {
                state: State::Available,
                token: None,
                lease_slot: None,
            },
        );
    }

    pub fn writer_rollback(&mut self) {
        self.tick();
        if let Some((w, Some(pos))) = self.take_writer() {
            self.store.slot_mut(Ring::Queue, w.slot).entries.remove(pos);
        }
    }

    /// Open the long-lived snapshot; what it sees.
    pub fn open_snapshot(&mut self) -> Vec<(i64, State)> {
        let opened = self.tick();
        let xmin = self
            .writers
            .iter()
            .map(|w| w.began)
            .min()
            .unwrap_or(opened)
            .min(opened);
        let seen = self.view();
        self.snapshot = Some(Snapshot {
            opened,
            xmin,
            frozen: self.store.clone(),
            seen: seen.clone(),
        });
        seen
    }

    pub fn close_snapshot(&mut self) {
        self.tick();
        self.snapshot = None;
    }

    /// What the open snapshot sees now.
    pub fn snapshot_view(&self) -> Option<Vec<(i64, State)>> {
        self.snapshot
            .as_ref()
            .map(|s| s.frozen.view(Some(self.rules)))
    }

    /// What the open snapshot saw when it was opened.
    pub fn snapshot_seen(&self) -> Option<&[(i64, State)]> {
        self.snapshot.as_ref().map(|s| s.seen.as_slice())
    }

    pub fn leader_crash(&mut self) {
        self.tick();
        // Nothing the leader knew was only in its session: markers, ledger
        // and rows are durable. The next leader starts from them.
        self.leader_sessions += 1;
    }

    // --- rotation ---------------------------------------------------------

    fn slot_empty(&self, ring: Ring, s: usize) -> bool {
        self.store.slot(ring, s).visible_rows() == 0
    }

    /// `ring_rotate`'s answer.
    pub fn rotate_expect(&self, ring: Ring) -> RotateOutcome {
        let n = self.shape.slots(ring);
        let cur = self.current(ring);
        let next = (cur + 1) % n;
        if self.store.slot(ring, cur).fresh_rows(self.store.lane_head) == 0 {
            RotateOutcome::Idle
        } else if !self.slot_empty(ring, next) || self.retired(ring) == Some(next) {
            RotateOutcome::IncomingNotEmpty { slot: next }
        } else {
            RotateOutcome::Rotated {
                from: cur,
                to: next,
                generation: self.generation(ring) + 1,
            }
        }
    }

    /// Apply a rotation's outcome (the model's or PostgreSQL's). Err when it
    /// is not the expected one; invariants are checked by `check`.
    pub fn apply_rotate(&mut self, ring: Ring, outcome: RotateOutcome) -> Result<(), String> {
        let expected = self.rotate_expect(ring);
        self.tick();
        self.rotate_effect(ring, outcome);
        if outcome == expected {
            Ok(())
        } else {
            Err(format!(
                "rotate {}: expected {expected:?}, got {outcome:?}",
                ring.as_str()
            ))
        }
    }

    fn rotate_effect(&mut self, ring: Ring, outcome: RotateOutcome) {
        self.note(match outcome {
            RotateOutcome::Rotated { .. } => "rotate:rotated",
            RotateOutcome::Idle => "rotate:idle",
            RotateOutcome::IncomingNotEmpty { .. } => "rotate:incoming_not_empty",
            RotateOutcome::LostRace => "rotate:lost_race",
        });
        if let RotateOutcome::Rotated { to, .. } = outcome {
            let slot = self.store.slot(ring, to);
            if slot.all_rows() > 0 || self.retired(ring) == Some(to) {
                self.violate(format!(
                    "no wrap onto live data: {} ring rotated onto slot {to}, which holds {} rows{}",
                    ring.as_str(),
                    slot.all_rows(),
                    if self.retired(ring) == Some(to) {
                        " and awaits truncation"
                    } else {
                        ""
                    }
                ));
            }
            if self.ledger[ring.idx()].len() as u64 >= self.shape.slots(ring) as u64 {
                self.note("rotate:wrapped");
            }
            self.ledger[ring.idx()].push(to);
        }
    }

    /// The allowed outcome pairs of two rotators racing for the same
    /// generation (order-insensitive); the first is the model's.
    pub fn racing_expect(&self, ring: Ring) -> Vec<[RotateOutcome; 2]> {
        match self.rotate_expect(ring) {
            won @ RotateOutcome::Rotated { .. } => vec![
                [won, RotateOutcome::LostRace],
                // The loser ran after the winner committed: the new current
                // slot is empty.
                [won, RotateOutcome::Idle],
            ],
            other => vec![[other, other]],
        }
    }

    pub fn apply_racing(&mut self, ring: Ring, pair: [RotateOutcome; 2]) -> Result<(), String> {
        let allowed = self.racing_expect(ring);
        self.tick();
        let winners = pair
            .iter()
            .filter(|o| matches!(o, RotateOutcome::Rotated { .. }))
            .count();
        if winners > 1 {
            self.violate(format!(
                "one leader: two racing rotators of the {} ring both rotated: {pair:?}",
                ring.as_str()
            ));
        }
        // The winner's effect first (a loser's outcome changes nothing).
        let mut ordered = pair;
        ordered.sort_by_key(|o| !matches!(o, RotateOutcome::Rotated { .. }));
        self.rotate_effect(ring, ordered[0]);
        if winners <= 1 {
            self.note(match ordered[1] {
                RotateOutcome::LostRace => "race:lost_race",
                _ => "race:other",
            });
        }
        let same = |a: [RotateOutcome; 2], b: [RotateOutcome; 2]| {
            (a[0] == b[0] && a[1] == b[1]) || (a[0] == b[1] && a[1] == b[0])
        };
        if allowed.iter().any(|a| same(*a, pair)) {
            Ok(())
        } else {
            Err(format!(
                "racing rotate {}: expected one of {allowed:?}, got {pair:?}",
                ring.as_str()
            ))
        }
    }

    // --- prune ------------------------------------------------------------

    /// `ring_prune`'s answer, phase by phase.
    pub fn prune_choice(&self, ring: Ring) -> PruneChoice {
        let n = self.shape.slots(ring);
        let cur = self.current(ring);
        if let Some(ret) = self.store.retired[ring.idx()] {
            let s = ret.slot;
            // Phase 2. A snapshot pins the slot when its xmin is not after the
            // retiring transaction (`age(backend_xmin) >= age(retired_xid)`).
            let pinned = self.snapshot.as_ref().is_some_and(|sn| sn.xmin < ret.at);
            // Who holds a lock that ACCESS EXCLUSIVE waits for: the snapshot
            // read every queue- and claim-ring table through the `jobs` view
            // (not the leases); a late writer holds the ready partition it
            // inserted into.
            let locked = (self.snapshot.is_some() && ring != Ring::Lease)
                || (ring == Ring::Queue && self.writers.iter().any(|w| w.slot == s));
            let expected = if pinned {
                PruneOutcome::SnapshotPinned { slot: s }
            } else if locked {
                PruneOutcome::Busy { slot: s }
            } else if self.store.live(ring, s).is_some() {
                PruneOutcome::LiveRows { slot: s }
            } else {
                PruneOutcome::Pruned { slot: s }
            };
            let tolerated = vec![
                PruneOutcome::SnapshotPinned { slot: s },
                PruneOutcome::Busy { slot: s },
            ];
            return PruneChoice {
                expected,
                tolerated,
                evacuate: None,
            };
        }
        // Phase 1: the sealed slots that hold rows, oldest first; a live one
        // is evacuated when it is the one the ring rotates onto next, and
        // any queue slot (all are past the retention of 0 in these tests);
        // the first dead one is retired.
        let mut after = self.clone();
        let mut evacuate = None;
        let mut first_live = None;
        let mut expected = None;
        for k in 1..n {
            let s = (cur + k) % n;
            if after.slot_empty(ring, s) {
                continue;
            }
            if (k == 1 || ring == Ring::Queue) && after.store.live(ring, s).is_some() {
                evacuate = Some(s);
                after.evacuate(ring, s);
            }
            if after.store.live(ring, s).is_none() {
                expected = Some(PruneOutcome::Retired { slot: s });
                break;
            }
            first_live.get_or_insert(s);
        }
        let expected = expected.unwrap_or(match first_live {
            Some(s) => PruneOutcome::LiveRows { slot: s },
            None => PruneOutcome::NothingToPrune,
        });
        PruneChoice {
            expected,
            tolerated: Vec::new(),
            evacuate,
        }
    }

    /// `ready_relocate` and `exec_park` on one slot: waiting jobs get a copy
    /// in the current queue slot with the same lane position (the old copy
    /// is tombstoned); open attempts that keep the slot live are closed as
    /// 'parked' and move out of the rings.
    fn evacuate(&mut self, ring: Ring, s: usize) {
        if ring == Ring::Queue {
            let cur = self.current(Ring::Queue);
            let head = self.store.lane_head;
            let slot = self.store.slot(Ring::Queue, s);
            let waiting: Vec<Entry> = slot
                .entries
                .iter()
                .filter(|e| {
                    e.writer.is_none() && e.lane_seq > head && !slot.tombstoned(e.job, e.lane_seq)
                })
                .cloned()
                .collect();
            for e in waiting {
                self.note("prune:relocated");
                self.store
                    .slot_mut(Ring::Queue, s)
                    .tombstones
                    .push((e.job, e.lane_seq));
                self.store.slot_mut(Ring::Queue, cur).entries.push(Entry {
                    relocated: true,
                    ..e
                });
            }
        }
        let open: Vec<(usize, Receipt)> =
            self.store
                .open_receipts()
                .filter(|(k, r)| match ring {
                    Ring::Queue => r.ready_slot == s,
                    Ring::Claim => *k == s,
                    Ring::Lease => self.store.slot(Ring::Lease, s).leases.iter().any(|l| {
                        l.job == r.job && l.run_lease == r.run_lease && l.claim_slot == *k
                    }),
                })
                .map(|(k, r)| (k, r.clone()))
                .collect();
        for (k, r) in open {
            self.note("prune:parked");
            self.store
                .slot_mut(Ring::Claim, k)
                .closures
                .push((r.job, r.run_lease));
            self.store.parked.push(Parked {
                job: r.job,
                run_lease: r.run_lease,
            });
            if let Some(job) = self.jobs.get_mut(&r.job) {
                // The lease row is no longer the attempt's evidence.
                job.lease_slot = None;
            }
        }
    }

    fn parked(&self, job: i64, run_lease: i64) -> bool {
        self.store
            .parked
            .iter()
            .any(|p| p.job == job && p.run_lease == run_lease)
    }

    /// Apply a prune's outcome (the model's or PostgreSQL's). Err when it is
    /// neither expected nor tolerated; invariants are checked by `check`.
    pub fn apply_prune(&mut self, ring: Ring, outcome: PruneOutcome) -> Result<(), String> {
        let choice = self.prune_choice(ring);
        let now = self.tick();
        self.note(outcome.kind());
        let phase2 = self.store.retired[ring.idx()].is_some();
        if !phase2
            && let Some(s) = choice.evacuate
            && matches!(
                outcome,
                PruneOutcome::Retired { .. } | PruneOutcome::LiveRows { .. }
            )
        {
            self.evacuate(ring, s);
        }
        match outcome {
            PruneOutcome::Retired { slot } => {
                if ring == Ring::Queue {
                    self.store.fold_deltas(slot);
                }
                self.store.retired[ring.idx()] = Some(Retirement { slot, at: now });
            }
            PruneOutcome::Pruned { slot } => self.truncate(ring, slot),
            PruneOutcome::LiveRows { .. } if phase2 => {
                // The re-check under the lock found live rows: un-retired.
                self.note("prune:unretired");
                self.store.retired[ring.idx()] = None;
            }
            _ => {}
        }
        if outcome == choice.expected {
            Ok(())
        } else if choice.tolerated.contains(&outcome) {
            self.note("prune:tolerated");
            Ok(())
        } else {
            Err(format!(
                "prune {}: expected {:?}, got {outcome:?}",
                ring.as_str(),
                choice.expected
            ))
        }
    }

    fn truncate(&mut self, ring: Ring, s: usize) {
        if let Some(sn) = &self.snapshot {
            let predates =
                self.store.retired[ring.idx()].is_none_or(|r| r.slot != s || sn.xmin < r.at);
            if predates {
                self.violate(format!(
                    "snapshot safety: {} slot {s} truncated while a snapshot opened at t{} \
                     that predates its retirement is open",
                    ring.as_str(),
                    sn.opened
                ));
            }
        }
        if ring == Ring::Queue
            && let Some(w) = self.writers.iter().find(|w| w.slot == s)
        {
            self.violate(format!(
                "no in-flight surprise: queue slot {s} truncated under the open late writer of job {}",
                w.job
            ));
        }
        if ring == Ring::Queue && self.rules.refold_before_truncate {
            self.store.fold_deltas(s);
        }
        *self.store.slot_mut(ring, s) = Slot::default();
        if let Some(sn) = &mut self.snapshot {
            // TRUNCATE is not MVCC-safe: old snapshots see the slot empty.
            *sn.frozen.slot_mut(ring, s) = Slot::default();
        }
        if self.retired(ring) == Some(s) {
            self.store.retired[ring.idx()] = None;
        }
    }

    // --- observation --------------------------------------------------------

    /// The `jobs` read view now: sorted (id, state) rows.
    pub fn view(&self) -> Vec<(i64, State)> {
        self.store.view(Some(self.rules))
    }

    /// Visible rows per (ring, slot), only non-empty slots.
    pub fn slot_rows(&self) -> BTreeMap<(Ring, usize), usize> {
        let mut out = BTreeMap::new();
        for ring in Ring::ALL {
            for (s, slot) in self.store.slots[ring.idx()].iter().enumerate() {
                if slot.visible_rows() > 0 {
                    out.insert((ring, s), slot.visible_rows());
                }
            }
        }
        out
    }

    /// Exact terminal totals as `queue_stats` computes them (rollups + deltas).
    pub fn totals(&self) -> BTreeMap<State, i64> {
        self.store.totals()
    }

    pub fn ring_rows(&self, ring: Ring) -> usize {
        self.store.slots[ring.idx()]
            .iter()
            .map(Slot::all_rows)
            .sum()
    }

    // --- invariants -------------------------------------------------------

    /// Every invariant that must hold after every step.
    pub fn check(&self) -> Result<(), String> {
        if let Some(v) = &self.violation {
            return Err(v.clone());
        }
        // 6. One leader: one chain of generations, one slot at a time.
        for ring in Ring::ALL {
            let n = self.shape.slots(ring);
            let l = &self.ledger[ring.idx()];
            if l[0] != 0 || l.windows(2).any(|w| w[1] != (w[0] + 1) % n) {
                return Err(format!(
                    "one leader: the {} ledger is not one chain: {l:?}",
                    ring.as_str()
                ));
            }
        }
        // 1, 2. What storage says, read without any view filter.
        let truth = self.store.view(None);
        let mut by_job: BTreeMap<i64, Vec<State>> = BTreeMap::new();
        for (id, st) in &truth {
            by_job.entry(*id).or_default().push(*st);
        }
        for (id, job) in &self.jobs {
            let found = by_job.get(id).cloned().unwrap_or_default();
            if !job.state.is_terminal() && found != [job.state] {
                return Err(format!(
                    "no lost work: job {id} is {} but its rows say {found:?}",
                    job.state.as_str()
                ));
            }
            if job.state.is_terminal() && !found.iter().all(|s| *s == job.state) {
                return Err(format!(
                    "job {id} is {} but its rows say {found:?}",
                    job.state.as_str()
                ));
            }
            if let (Some(t), Some(l)) = (job.token, job.lease_slot) {
                let present = self
                    .store
                    .slot(Ring::Lease, l)
                    .leases
                    .iter()
                    .any(|x| x.job == *id && x.run_lease == t.run_lease);
                if !present {
                    return Err(format!(
                        "no lost attempt: the lease of running attempt {id}/{} is gone from lease slot {l}",
                        t.run_lease
                    ));
                }
            }
        }
        for (id, states) in &by_job {
            let known = self.jobs.get(id).map(|j| j.state);
            if states.len() > 1 || known.is_none() {
                return Err(format!(
                    "job {id}: storage shows {states:?}, the model knows {known:?}"
                ));
            }
        }
        // 3. Open late writers' rows are where they wrote them; committed
        // jobs are visible to readers.
        for w in &self.writers {
            if !self
                .store
                .slot(Ring::Queue, w.slot)
                .entries
                .iter()
                .any(|e| e.writer == Some(w.id))
            {
                return Err(format!(
                    "no in-flight surprise: the uncommitted row of job {} vanished from queue slot {}",
                    w.job, w.slot
                ));
            }
        }
        let seen: BTreeMap<i64, State> = self.view().into_iter().collect();
        for (id, job) in &self.jobs {
            if !job.state.is_terminal() && seen.get(id) != Some(&job.state) {
                return Err(format!(
                    "no in-flight surprise: job {id} is {} but the jobs view shows {:?}",
                    job.state.as_str(),
                    seen.get(id)
                ));
            }
        }
        // 5. The snapshot's view never changes.
        if let Some(sn) = &self.snapshot {
            let now = sn.frozen.view(Some(self.rules));
            if now != sn.seen {
                return Err(format!(
                    "snapshot safety: the snapshot opened at t{} saw {:?}, now sees {now:?}",
                    sn.opened, sn.seen
                ));
            }
        }
        // Exact counts outlive reclamation.
        let mut want: BTreeMap<State, i64> = BTreeMap::new();
        for job in self.jobs.values().filter(|j| j.state.is_terminal()) {
            *want.entry(job.state).or_default() += 1;
        }
        let got = self.totals();
        if got != want {
            return Err(format!(
                "exact counts: {} jobs reached a terminal state ({want:?}) but rollups + deltas say {got:?}",
                want.values().sum::<i64>()
            ));
        }
        Ok(())
    }

    /// Invariant 7: with no snapshot and no late writer open, maintenance
    /// run to a fixpoint (on a copy) leaves no dead slot behind a live one's
    /// back and empties a ring that holds nothing live.
    pub fn check_bounded(&self) -> Result<(), String> {
        if self.snapshot.is_some() || !self.writers.is_empty() {
            return Ok(());
        }
        let mut m = self.clone();
        m.drain()?;
        m.bounded_after_drain()
    }

    /// Run rotate and prune on every ring with the model's own decisions
    /// until nothing changes, checking every step.
    pub fn drain(&mut self) -> Result<(), String> {
        let rounds = 2 * (self.shape.queue.max(self.shape.claim).max(self.shape.lease) + 2);
        for _ in 0..rounds {
            let mut changed = false;
            for ring in Ring::ALL {
                for _ in 0..rounds {
                    let o = self.prune_choice(ring).expected;
                    let retired = self.retired(ring).is_some();
                    self.apply_prune(ring, o)?;
                    self.check().map_err(|e| format!("while draining: {e}"))?;
                    let progress = match o {
                        PruneOutcome::Retired { .. } | PruneOutcome::Pruned { .. } => true,
                        PruneOutcome::LiveRows { .. } => retired,
                        _ => false,
                    };
                    if !progress {
                        break;
                    }
                    changed = true;
                }
                let o = self.rotate_expect(ring);
                self.apply_rotate(ring, o)?;
                self.check().map_err(|e| format!("while draining: {e}"))?;
                changed |= matches!(o, RotateOutcome::Rotated { .. });
            }
            if !changed {
                return Ok(());
            }
        }
        Err("maintenance did not reach a fixpoint".into())
    }

    /// After `drain`: every ring holds rows only from its oldest slot with
    /// live data onwards, and nothing at all when nothing in it is live.
    pub fn bounded_after_drain(&self) -> Result<(), String> {
        for ring in Ring::ALL {
            let n = self.shape.slots(ring);
            let cur = self.current(ring);
            let any_live = (0..n).any(|s| self.store.live(ring, s).is_some());
            if !any_live && self.ring_rows(ring) > 0 {
                return Err(format!(
                    "bounded storage: nothing in the {} ring is live, yet after maintenance \
                     it still holds {} rows ({:?})",
                    ring.as_str(),
                    self.ring_rows(ring),
                    self.slot_rows()
                ));
            }
            for s in (1..n).map(|k| (cur + k) % n) {
                if self.store.slot(ring, s).all_rows() > 0 && self.store.live(ring, s).is_none() {
                    return Err(format!(
                        "bounded storage: after maintenance the sealed {} slot {s} holds only dead rows",
                        ring.as_str()
                    ));
                }
            }
            let incoming = (cur + 1) % n;
            if n > 1 && self.store.slot(ring, incoming).all_rows() > 0 {
                return Err(format!(
                    "bounded storage: after maintenance the {} ring cannot rotate: slot {incoming}, \
                     the next to write, still holds rows ({:?})",
                    ring.as_str(),
                    self.slot_rows()
                ));
            }
        }
        Ok(())
    }
}

// ---------------------------------------------------------------------------
// Generated sequences.

pub fn ring() -> impl Strategy<Value = Ring> {
    prop_oneof![
        3 => Just(Ring::Queue),
        2 => Just(Ring::Claim),
        1 => Just(Ring::Lease),
    ]
}

pub fn op() -> impl Strategy<Value = Op> {
    op_with_late_writers(1)
}

/// Like [`op`], with the late-writer steps weighted `late` each (and
/// cancels and leader passes more frequent when `late` > 1, so a writer's
/// slot more often dies and retires while it is open).
pub fn op_with_late_writers(late: u32) -> impl Strategy<Value = Op> {
    let often = if late > 1 { 3 } else { 1 };
    // Weighted so that slots fill, die and get reclaimed within ~40 steps:
    // work is mostly finished, maintenance runs often.
    prop_oneof![
        6 => (1u8..=3).prop_map(Op::Enqueue),
        5 => (1u8..=4).prop_map(Op::Claim),
        5 => (0u8..8).prop_map(Op::Complete),
        1 => (0u8..8).prop_map(Op::Retry),
        1 => (0u8..8).prop_map(Op::Fail),
        2 * often => (0u8..8).prop_map(Op::Cancel),
        1 => (0u8..8).prop_map(Op::Heartbeat),
        1 => Just(Op::Promote),
        1 => Just(Op::Rescue),
        3 => ring().prop_map(Op::Rotate),
        4 => ring().prop_map(Op::Prune),
        late => Just(Op::LateWriterBegin),
        late => Just(Op::LateWriterCommit),
        late => Just(Op::LateWriterRollback),
        1 => Just(Op::SnapshotOpen),
        1 => Just(Op::SnapshotClose),
        1 => Just(Op::LeaderCrash),
        1 => ring().prop_map(Op::RacingRotate),
        4 * often => Just(Op::Maintain),
    ]
}

/// A sequence of `len` ops; shrinks to fewer and simpler ones.
pub fn ops(len: Range<usize>) -> impl Strategy<Value = Vec<Op>> {
    prop::collection::vec(op(), len)
}

/// Sequences where late writers are frequent, built around one whose slot
/// has every chance to be sealed and retired while it is open: random ops,
/// `LateWriterBegin`, a few more, two leader passes, the commit, more ops, a
/// final leader pass.
pub fn ops_with_late_writers(len: Range<usize>) -> impl Strategy<Value = Vec<Op>> {
    let part = |n: usize| prop::collection::vec(op_with_late_writers(4), 0..n.max(1));
    let third = len.end / 3;
    (part(third), part(third / 2), part(third)).prop_map(|(before, during, after)| {
        let mut ops = before;
        ops.push(Op::LateWriterBegin);
        ops.extend(during);
        ops.extend([Op::Maintain, Op::Maintain, Op::LateWriterCommit]);
        ops.extend(after);
        ops.push(Op::Maintain);
        ops
    })
}

/// Cases to run: `var` from the environment, else `default`.
pub fn cases_from_env(var: &str, default: u32) -> u32 {
    std::env::var(var)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}
