//! Observation (what the PostgreSQL tests compare) and the invariants.

use super::store::Slot;
use super::{Model, PruneOutcome, Ring, RotateOutcome, State};
use std::collections::{BTreeMap, BTreeSet};

/// An open item as observed: (claim slot, batch, item, job, run_lease).
pub type OpenItem = (usize, i64, u32, i64, i64);
/// A closure link as observed: (claim slot, batch, link, items listed).
pub type LinkRow = (usize, i64, u32, Vec<u32>);

impl Model {
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

    /// Every open item, sorted.
    pub fn open_items(&self) -> Vec<OpenItem> {
        let mut out: Vec<OpenItem> = self
            .store
            .open_items()
            .iter()
            .map(|o| (o.claim_slot, o.batch, o.item, o.job, o.run_lease))
            .collect();
        out.sort();
        out
    }

    /// Every closure link, its items sorted; sorted.
    pub fn links(&self) -> Vec<LinkRow> {
        let mut out = Vec::new();
        for (k, slot) in self.store.slots[Ring::Claim.idx()].iter().enumerate() {
            for l in &slot.links {
                let mut items: Vec<u32> = l.items.iter().map(|(i, _)| *i).collect();
                items.sort();
                out.push((k, l.batch, l.link, items));
            }
        }
        out.sort();
        out
    }

    /// Every done batch: (queue slot, its job ids sorted); sorted.
    pub fn done_batches(&self) -> Vec<(usize, Vec<i64>)> {
        let mut out = Vec::new();
        for (s, slot) in self.store.slots[Ring::Queue.idx()].iter().enumerate() {
            for b in &slot.done_batches {
                let mut jobs: Vec<i64> = b.jobs.iter().map(|(j, _)| *j).collect();
                jobs.sort();
                out.push((s, jobs));
            }
        }
        out.sort();
        out
    }

    /// The kept failures (failed or cancelled jobs, outside the rings):
    /// (job, run_lease, state), sorted.
    pub fn failures(&self) -> Vec<(i64, i64, &'static str)> {
        let mut out: Vec<(i64, i64, &'static str)> = self
            .store
            .failures
            .iter()
            .map(|d| (d.job, d.run_lease, d.state.as_str()))
            .collect();
        out.sort();
        out
    }

    /// The parked attempts, (job, run_lease), sorted.
    pub fn parked_attempts(&self) -> Vec<(i64, i64)> {
        let mut out: Vec<(i64, i64)> = self
            .store
            .parked
            .iter()
            .map(|p| (p.job, p.run_lease))
            .collect();
        out.sort();
        out
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
        // 8. Batch evidence.
        self.check_batches()?;
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

    /// Invariant 8, on the storage as it is.
    fn check_batches(&self) -> Result<(), String> {
        let mut ids = BTreeSet::new();
        for (k, slot) in self.store.slots[Ring::Claim.idx()].iter().enumerate() {
            for b in &slot.batches {
                if !ids.insert(b.id) {
                    return Err(format!("batch {} is in two claim slots", b.id));
                }
                if b.items.is_empty() {
                    return Err(format!("batch {} in claim slot {k} has no item", b.id));
                }
                if b.items.windows(2).any(|w| w[0].ready_seq >= w[1].ready_seq) {
                    return Err(format!(
                        "batch {} in claim slot {k} is not in lane order: {:?}",
                        b.id, b.items
                    ));
                }
                // Every item is closed at most once; links are 1..L.
                let mut numbers: Vec<u32> = Vec::new();
                let mut closer: BTreeMap<u32, u32> = BTreeMap::new();
                for l in slot.links.iter().filter(|l| l.batch == b.id) {
                    numbers.push(l.link);
                    for (item, _) in &l.items {
                        if *item < 1 || *item as usize > b.items.len() {
                            return Err(format!(
                                "link {} of batch {} lists item {item}, which the batch does not have",
                                l.link, b.id
                            ));
                        }
                        if let Some(first) = closer.insert(*item, l.link) {
                            return Err(format!(
                                "every item is closed at most once: item {item} of batch {} \
                                 (attempt {}/{}) is listed by links {first} and {}",
                                b.id,
                                b.items[*item as usize - 1].job,
                                b.items[*item as usize - 1].run_lease,
                                l.link
                            ));
                        }
                    }
                }
                numbers.sort();
                if numbers.iter().enumerate().any(|(i, n)| *n != i as u32 + 1) {
                    return Err(format!(
                        "the links of batch {} are numbered {numbers:?}, not 1..L",
                        b.id
                    ));
                }
            }
            if let Some(l) = slot.links.iter().find(|l| slot.batch(l.batch).is_none()) {
                return Err(format!(
                    "link {} of batch {} is in claim slot {k} without its batch",
                    l.link, l.batch
                ));
            }
            for l in &self.store.slots[Ring::Lease.idx()]
                .iter()
                .flat_map(|s| &s.leases)
                .filter(|l| l.claim_slot == k)
                .collect::<Vec<_>>()
            {
                if let Some(b) = slot.batch(l.batch) {
                    let it = b.items.get(l.item as usize - 1);
                    if it.map(|it| (it.job, it.run_lease)) != Some((l.job, l.run_lease)) {
                        return Err(format!(
                            "the lease of {}/{} names item {} of batch {}, which is {:?}",
                            l.job, l.run_lease, l.item, l.batch, it
                        ));
                    }
                }
            }
        }
        for o in self.store.open_items() {
            // A closed item never resurrects.
            if self.closed_items.contains(&(o.batch, o.item)) {
                return Err(format!(
                    "a closed item never resurrects: item {} of batch {} (attempt {}/{}) \
                     is open again",
                    o.item, o.batch, o.job, o.run_lease
                ));
            }
            // An open item is its job's running attempt.
            let job = self.jobs.get(&o.job);
            let token = job.and_then(|j| j.token);
            let mine = token.is_some_and(|t| {
                (t.claim_slot, t.batch, t.item, t.job, t.run_lease)
                    == (o.claim_slot, o.batch, o.item, o.job, o.run_lease)
            });
            if !mine || job.map(|j| j.state) != Some(State::Running) {
                return Err(format!(
                    "item {} of batch {} (attempt {}/{}) is open, but the job is {:?} with {:?}",
                    o.item,
                    o.batch,
                    o.job,
                    o.run_lease,
                    job.map(|j| j.state),
                    token
                ));
            }
        }
        if let Some((k, n)) = self.finishers.iter().find(|(_, n)| **n > 1) {
            return Err(format!(
                "exactly one finisher: attempt {}/{} was finished {n} times",
                k.0, k.1
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
