//! Maintenance: rotation, the two-phase prune, evacuation (relocate and
//! park) and truncation.

use super::store::{Entry, Open, Parked, Retirement, Slot, lease_of};
use super::{Model, PruneChoice, PruneOutcome, Ring, RotateOutcome};
use std::collections::BTreeMap;

impl Model {
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
            } else if self.store.live_as(ring, s, self.faults).is_some() {
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
            if (k == 1 || ring == Ring::Queue)
                && after.store.live_as(ring, s, self.faults).is_some()
            {
                evacuate = Some(s);
                after.evacuate(ring, s);
            }
            if after.store.live_as(ring, s, self.faults).is_none() {
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
    /// is tombstoned); the open items that keep the slot live (queue: their
    /// body is there; claim: their batch is there; lease: their lease is
    /// there) are closed by one 'parked' link per batch and move out of the
    /// rings, one parked row each. The other items of those batches stay
    /// open where they are.
    fn evacuate(&mut self, ring: Ring, s: usize) {
        if ring == Ring::Queue {
            let cur = self.current(Ring::Queue);
            let waiting: Vec<Entry> = self.store.waiting(s).cloned().collect();
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
        let leases = &self.store.slot(Ring::Lease, s).leases;
        let open: Vec<Open> = self
            .store
            .open_items_as(self.faults)
            .into_iter()
            .filter(|o| match ring {
                Ring::Queue => o.ready_slot == s,
                Ring::Claim => o.claim_slot == s,
                Ring::Lease => leases.iter().any(|l| lease_of(l, o)),
            })
            .collect();
        let mut by_batch: BTreeMap<(usize, i64), Vec<(u32, &'static str)>> = BTreeMap::new();
        for o in &open {
            self.note("prune:parked");
            let slot = self.store.slot(Ring::Claim, o.claim_slot);
            if slot.links.iter().any(|l| l.batch == o.batch) {
                self.note("prune:parked_partially_closed");
            }
            by_batch
                .entry((o.claim_slot, o.batch))
                .or_default()
                .push((o.item, "parked"));
            self.store.parked.push(Parked {
                job: o.job,
                run_lease: o.run_lease,
            });
            if let Some(job) = self.jobs.get_mut(&o.job) {
                // The lease row is no longer the attempt's evidence.
                job.lease_slot = None;
            }
        }
        for ((k, batch), items) in by_batch {
            if self.write_link(k, batch, items) {
                self.note("prune:parked_part_of_batch");
            }
        }
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
}
