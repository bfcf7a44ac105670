//! Storage: the rows of every slot, as the SQL writes them, and what the
//! liveness checks and the read views make of them.

use super::{Faults, Ring, Rules, State, Token};
use std::collections::BTreeMap;

#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Entry {
    pub(super) job: i64,
    pub(super) lane_seq: i64,
    pub(super) attempt: i32,
    pub(super) run_lease: i64,
    /// The open late writer whose uncommitted row this is.
    pub(super) writer: Option<u32>,
    /// A copy `ready_relocate` made (keeps the original's ready_at).
    pub(super) relocated: bool,
}

/// A `done_entries` row (one terminal fact in a queue slot: a completion
/// of a parked attempt) or a `failure_entries` row (a failed or cancelled
/// job, kept outside the rings for the failure retention: ADR 11).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Done {
    pub(super) job: i64,
    pub(super) run_lease: i64,
    pub(super) state: State,
}

/// A `done_batches` row: the attempts one finish call completed whose
/// bodies are in this queue slot, (job, run_lease) each.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct DoneBatch {
    pub(super) jobs: Vec<(i64, i64)>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Delta {
    pub(super) state: State,
    pub(super) n: i64,
}

/// One item of a claim batch (item i is `items[i - 1]`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Item {
    pub(super) job: i64,
    pub(super) run_lease: i64,
    pub(super) attempt: i32,
    pub(super) ready_slot: usize,
    pub(super) ready_seq: i64,
}

/// A `claim_batches` row: what one claim call took.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Batch {
    pub(super) id: i64,
    pub(super) items: Vec<Item>,
}

/// A `claim_closures` row: the items of one batch one call closed, with
/// the outcome of each ('parked' for `exec_park`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Link {
    pub(super) batch: i64,
    /// 1, 2, 3, ... per batch (the primary key serializes finishers).
    pub(super) link: u32,
    pub(super) items: Vec<(u32, &'static str)>,
}

impl Link {
    pub(super) fn lists(&self, item: u32) -> bool {
        self.items.iter().any(|(i, _)| *i == item)
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Lease {
    pub(super) job: i64,
    pub(super) run_lease: i64,
    pub(super) claim_slot: usize,
    pub(super) batch: i64,
    pub(super) item: u32,
}

/// An attempt moved out of the rings by `exec_park`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Parked {
    pub(super) job: i64,
    pub(super) run_lease: i64,
}

/// An item that no link lists, with where it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Open {
    pub(super) claim_slot: usize,
    pub(super) batch: i64,
    pub(super) item: u32,
    pub(super) job: i64,
    pub(super) run_lease: i64,
    pub(super) ready_slot: usize,
    pub(super) ready_seq: i64,
}

#[derive(Debug, Clone, Default)]
pub(super) struct Slot {
    pub(super) entries: Vec<Entry>,
    /// (job, lane_seq)
    pub(super) tombstones: Vec<(i64, i64)>,
    pub(super) done: Vec<Done>,
    pub(super) done_batches: Vec<DoneBatch>,
    pub(super) deltas: Vec<Delta>,
    pub(super) batches: Vec<Batch>,
    pub(super) links: Vec<Link>,
    pub(super) leases: Vec<Lease>,
}

impl Slot {
    /// Rows a new snapshot sees (what `count(*)` and the emptiness checks
    /// see): a batch, a link and a done batch are one row each.
    pub(super) fn visible_rows(&self) -> usize {
        self.entries.iter().filter(|e| e.writer.is_none()).count()
            + self.tombstones.len()
            + self.done.len()
            + self.done_batches.len()
            + self.deltas.len()
            + self.batches.len()
            + self.links.len()
            + self.leases.len()
    }

    /// Rows worth sealing: everything but relocated copies still waiting
    /// (`ring_slot_fresh`). Rotating those away would only carry them round
    /// the ring; a claimed or cancelled copy is dead and may go.
    pub(super) fn fresh_rows(&self, lane_head: i64) -> usize {
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
    pub(super) fn all_rows(&self) -> usize {
        self.visible_rows() + self.entries.iter().filter(|e| e.writer.is_some()).count()
    }

    pub(super) fn tombstoned(&self, job: i64, lane_seq: i64) -> bool {
        self.tombstones.contains(&(job, lane_seq))
    }

    pub(super) fn batch(&self, id: i64) -> Option<&Batch> {
        self.batches.iter().find(|b| b.id == id)
    }

    /// Whether a link of batch `batch` lists `item`.
    pub(super) fn item_closed(&self, batch: i64, item: u32) -> bool {
        self.links.iter().any(|l| l.batch == batch && l.lists(item))
    }

    /// The next link number of a batch.
    pub(super) fn next_link(&self, batch: i64) -> u32 {
        self.links
            .iter()
            .filter(|l| l.batch == batch)
            .map(|l| l.link)
            .max()
            .unwrap_or(0)
            + 1
    }

    fn waiting<'a>(&'a self, lane_head: i64) -> impl Iterator<Item = &'a Entry> + 'a {
        self.entries.iter().filter(move |e| {
            e.writer.is_none() && e.lane_seq > lane_head && !self.tombstoned(e.job, e.lane_seq)
        })
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Retirement {
    pub(super) slot: usize,
    /// Model clock of the retiring transaction (its xid, in order).
    pub(super) at: u64,
}

#[derive(Debug, Clone)]
pub(super) struct Deferred {
    pub(super) job: i64,
    pub(super) attempt: i32,
    pub(super) run_lease: i64,
    /// Promotion order: (when it became due, job id), like `run_at, job_id`.
    pub(super) due: (u64, i64),
}

/// Everything durable that the read views and maintenance look at.
#[derive(Debug, Clone)]
pub(super) struct Store {
    pub(super) slots: [Vec<Slot>; 3],
    pub(super) retired: [Option<Retirement>; 3],
    pub(super) deferred: Vec<Deferred>,
    pub(super) parked: Vec<Parked>,
    /// `failure_entries`: outside the rings, never retired or truncated
    /// (the failure retention, days by default, is not modelled).
    pub(super) failures: Vec<Done>,
    pub(super) lane_head: i64,
    pub(super) rollups: BTreeMap<State, i64>,
}

impl Store {
    pub(super) fn new(slots: [usize; 3]) -> Store {
        Store {
            slots: slots.map(|n| vec![Slot::default(); n]),
            retired: [None; 3],
            deferred: Vec::new(),
            parked: Vec::new(),
            failures: Vec::new(),
            lane_head: 0,
            rollups: BTreeMap::new(),
        }
    }

    pub(super) fn slot(&self, ring: Ring, s: usize) -> &Slot {
        &self.slots[ring.idx()][s]
    }

    pub(super) fn slot_mut(&mut self, ring: Ring, s: usize) -> &mut Slot {
        &mut self.slots[ring.idx()][s]
    }

    pub(super) fn retired_slot(&self, ring: Ring) -> Option<usize> {
        self.retired[ring.idx()].map(|r| r.slot)
    }

    pub(super) fn waiting(&self, s: usize) -> impl Iterator<Item = &Entry> + '_ {
        self.slot(Ring::Queue, s).waiting(self.lane_head)
    }

    /// Every open item: its batch exists and no link of its batch lists it.
    pub(super) fn open_items(&self) -> Vec<Open> {
        self.open_items_as(Faults::default())
    }

    /// The open items as an implementation with `faults` sees them.
    pub(super) fn open_items_as(&self, faults: Faults) -> Vec<Open> {
        let mut out = Vec::new();
        for (k, slot) in self.slots[Ring::Claim.idx()].iter().enumerate() {
            for b in &slot.batches {
                if faults.any_link_closes_the_batch && slot.links.iter().any(|l| l.batch == b.id) {
                    continue;
                }
                for (i, it) in b.items.iter().enumerate() {
                    let item = i as u32 + 1;
                    if !slot.item_closed(b.id, item) {
                        out.push(Open {
                            claim_slot: k,
                            batch: b.id,
                            item,
                            job: it.job,
                            run_lease: it.run_lease,
                            ready_slot: it.ready_slot,
                            ready_seq: it.ready_seq,
                        });
                    }
                }
            }
        }
        out
    }

    /// The open item a token (or a lease) names: the batch is in the claim
    /// slot, its item is that attempt, and no link lists it. The guard of
    /// finish and heartbeat (with `guard_ignores_links`, a broken one).
    pub(super) fn item_open(
        &self,
        claim_slot: usize,
        batch: i64,
        item: u32,
        attempt: (i64, i64),
        faults: Faults,
    ) -> bool {
        let slot = self.slot(Ring::Claim, claim_slot);
        let named = slot.batch(batch).is_some_and(|b| {
            item >= 1
                && b.items
                    .get(item as usize - 1)
                    .is_some_and(|it| (it.job, it.run_lease) == attempt)
        });
        named && (faults.guard_ignores_links || !slot.item_closed(batch, item))
    }

    pub(super) fn token_open(&self, t: &Token, faults: Faults) -> bool {
        self.item_open(t.claim_slot, t.batch, t.item, t.attempt_key(), faults)
    }

    pub(super) fn parked(&self, job: i64, run_lease: i64) -> bool {
        self.parked
            .iter()
            .any(|p| p.job == job && p.run_lease == run_lease)
    }

    /// Why a slot still holds live data (committed rows only, as the SQL's
    /// `ready_slot_live` / `exec_slot_live` see it), or None:
    ///   queue: a waiting ready entry, or the body of an open item;
    ///   claim: a batch with an open item;
    ///   lease: a lease of an open item.
    pub(super) fn live(&self, ring: Ring, s: usize) -> Option<String> {
        self.live_as(ring, s, Faults::default())
    }

    pub(super) fn live_as(&self, ring: Ring, s: usize, faults: Faults) -> Option<String> {
        let open = self.open_items_as(faults);
        let attempt = |o: &Open| {
            format!(
                "attempt {}/{} (batch {} item {})",
                o.job, o.run_lease, o.batch, o.item
            )
        };
        match ring {
            Ring::Queue => {
                if let Some(e) = self.waiting(s).next() {
                    return Some(format!("job {} is waiting", e.job));
                }
                open.iter()
                    .find(|o| o.ready_slot == s)
                    .map(|o| format!("{} reads its body here", attempt(o)))
            }
            Ring::Claim => open
                .iter()
                .find(|o| o.claim_slot == s)
                .map(|o| format!("{} is open", attempt(o))),
            Ring::Lease => self
                .slot(Ring::Lease, s)
                .leases
                .iter()
                .find_map(|l| open.iter().find(|o| lease_of(l, o)))
                .map(|o| format!("the lease of {} is live", attempt(o))),
        }
    }

    /// The `jobs` read view: every (id, state) row it returns, sorted.
    /// `rules`: None reads the storage as it is (no retirement filtering),
    /// Some applies the views' filters.
    pub(super) fn view(&self, rules: Option<Rules>) -> Vec<(i64, State)> {
        let hidden = |ring: Ring, s: usize| rules.is_some() && self.retired_slot(ring) == Some(s);
        let hide_entries = rules.is_some_and(|r| r.views_hide_retired_entries);
        let mut out = Vec::new();
        for (s, slot) in self.slots[Ring::Queue.idx()].iter().enumerate() {
            if !(hide_entries && hidden(Ring::Queue, s)) {
                out.extend(self.waiting(s).map(|e| (e.job, State::Available)));
            }
            if !hidden(Ring::Queue, s) {
                out.extend(slot.done.iter().map(|d| (d.job, d.state)));
                out.extend(
                    slot.done_batches
                        .iter()
                        .flat_map(|b| b.jobs.iter().map(|(job, _)| (*job, State::Completed))),
                );
            }
        }
        for o in self.open_items() {
            if hidden(Ring::Claim, o.claim_slot) {
                continue;
            }
            let body = self
                .slot(Ring::Queue, o.ready_slot)
                .entries
                .iter()
                .any(|e| e.writer.is_none() && e.job == o.job && e.lane_seq == o.ready_seq);
            if body {
                out.push((o.job, State::Running));
            }
        }
        out.extend(self.parked.iter().map(|p| (p.job, State::Running)));
        out.extend(self.deferred.iter().map(|d| (d.job, State::Retryable)));
        out.extend(self.failures.iter().map(|d| (d.job, d.state)));
        out.sort();
        out
    }

    pub(super) fn totals(&self) -> BTreeMap<State, i64> {
        let mut t = self.rollups.clone();
        for slot in &self.slots[Ring::Queue.idx()] {
            for d in &slot.deltas {
                *t.entry(d.state).or_default() += d.n;
            }
        }
        t.retain(|_, n| *n != 0);
        t
    }

    pub(super) fn fold_deltas(&mut self, s: usize) {
        let deltas = std::mem::take(&mut self.slot_mut(Ring::Queue, s).deltas);
        for d in deltas {
            *self.rollups.entry(d.state).or_default() += d.n;
        }
    }
}

/// Whether a lease row is the lease of that open item.
pub(super) fn lease_of(l: &Lease, o: &Open) -> bool {
    l.claim_slot == o.claim_slot
        && l.batch == o.batch
        && l.item == o.item
        && (l.job, l.run_lease) == (o.job, o.run_lease)
}
