//! The model's vocabulary: rings, shapes, rules, job states, the generated
//! ops and the actions they resolve to, and what maintenance answers.

use super::MAX_ATTEMPTS;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Ring {
    Queue,
    Claim,
    Lease,
}

impl Ring {
    pub const ALL: [Ring; 3] = [Ring::Queue, Ring::Claim, Ring::Lease];

    pub(super) fn idx(self) -> usize {
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
/// (running jobs for Complete/Retry/Fail/Heartbeat/RescueOne and the many-
/// finishes, non-terminal jobs for Cancel, finished attempts for
/// FinishStale, all ordered by id); a step with nothing to act on does
/// nothing.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Op {
    Enqueue(u8),
    /// One claim call taking up to n jobs: one claim batch.
    Claim(u8),
    Complete(u8),
    Retry(u8),
    Fail(u8),
    Cancel(u8),
    Heartbeat(u8),
    /// `CompleteMany(k, m)`: complete m running attempts (the k-th by id
    /// and the ones after it, wrapping) in one finish call.
    CompleteMany(u8, u8),
    /// `FinishMany(k, m)`: like `CompleteMany`, the outcomes cycling
    /// complete, retry, complete, fail (one call, mixed outcomes).
    FinishMany(u8, u8),
    /// Rescue the k-th running attempt alone: one finish call, outcome
    /// rescue, one item of its batch.
    RescueOne(u8),
    /// Complete again the k-th attempt that was already finished (a stale
    /// token): the guard must reject it.
    FinishStale(u8),
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
            Op::CompleteMany(k, m) => write!(f, "CompleteMany({k}, {m})"),
            Op::FinishMany(k, m) => write!(f, "FinishMany({k}, {m})"),
            Op::RescueOne(k) => write!(f, "RescueOne({k})"),
            Op::FinishStale(k) => write!(f, "FinishStale({k})"),
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

impl How {
    /// The job's next state after an attempt that was its `attempt`-th.
    pub fn next_state(self, attempt: i32) -> State {
        match self {
            How::Complete => State::Completed,
            How::Cancel => State::Cancelled,
            How::Fail => State::Failed,
            How::Retry | How::Rescue if attempt < MAX_ATTEMPTS => State::Retryable,
            How::Retry | How::Rescue => State::Failed,
        }
    }

    /// The outcome the closure link records for the item.
    pub fn closed_as(self, next: State) -> &'static str {
        match (self, next) {
            (How::Rescue, _) => "rescued",
            (How::Retry, State::Retryable) => "retried",
            _ => next.as_str(),
        }
    }
}

/// The outcomes `FinishMany` cycles through.
pub const MIXED: [How; 4] = [How::Complete, How::Retry, How::Complete, How::Fail];

/// An [`Op`] resolved against the model's state: concrete job ids (and
/// tokens), and no-ops made explicit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    Noop,
    Enqueue(usize),
    Claim(usize),
    /// One finish call for one running attempt.
    Finish(i64, How),
    /// One finish call for several running attempts.
    FinishMany(Vec<(i64, How)>),
    /// One finish call (complete) with a token already finished.
    FinishStale(Token),
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
    pub(super) fn kind(self) -> &'static str {
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

/// One attempt as the claim hands it out: item `item` (1-based) of claim
/// batch `batch` in claim slot `claim_slot`; its body is the ready entry
/// (`ready_slot`, `ready_seq`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Token {
    pub job: i64,
    pub run_lease: i64,
    pub attempt: i32,
    pub claim_slot: usize,
    pub batch: i64,
    pub item: u32,
    pub ready_slot: usize,
    pub ready_seq: i64,
}

impl Token {
    /// The attempt: one finisher per (job_id, run_lease).
    pub fn attempt_key(&self) -> (i64, i64) {
        (self.job, self.run_lease)
    }
}

/// Mistakes an implementation of the batch shapes could plausibly make, all
/// off by default; a test turns one on to show the invariants catch it by
/// its consequences.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Faults {
    /// The finish (and heartbeat) guard accepts an item whose batch exists
    /// without checking that no link of the batch lists it.
    pub guard_ignores_links: bool,
    /// Liveness treats a batch with any closure link as closed (as if a
    /// batch were closed as a whole), so a partially closed batch's open
    /// items pin nothing.
    pub any_link_closes_the_batch: bool,
}
