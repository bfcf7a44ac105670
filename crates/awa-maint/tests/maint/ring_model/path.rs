//! The job path: enqueue, claim (one batch per call), the guarded finish
//! (one link per batch, one done batch per body slot), cancel, heartbeat,
//! promote and rescue; late writers, snapshots and leader crashes.

use super::store::{Batch, Deferred, Delta, Done, DoneBatch, Entry, Item, Lease, Link};
use super::{How, Job, Model, Ring, Snapshot, State, Token, Writer};
use std::collections::{BTreeMap, BTreeSet};

/// Where the evidence of an attempt a finish call accepted is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Source {
    /// An open item of its batch: closed by this call's link.
    Item,
    /// A parked row (`exec_park`): closed by deleting it.
    Parked,
}

impl Model {
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

    /// What one claim call of up to `n` jobs takes, in lane order, without
    /// taking it: items 1..k of the next batch. With a late writer open,
    /// the claim frontier may pass nothing: it waits for the writer when the
    /// writer's xid is in the claim's snapshot, which depends on every
    /// transaction that completed on the cluster since, so PostgreSQL
    /// answers either this or nothing. It never passes the writer's
    /// position: anything committed behind it was committed by a newer
    /// transaction, which puts the writer in the snapshot's xip, and then
    /// the frontier holds everything back.
    pub fn claimable(&self, n: usize) -> Vec<Token> {
        let mut cands: Vec<(i64, usize, &Entry)> = Vec::new();
        for s in 0..self.shape.queue {
            cands.extend(self.store.waiting(s).map(|e| (e.lane_seq, s, e)));
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
            .enumerate()
            .map(|(i, (lane_seq, ready_slot, e))| Token {
                job: e.job,
                run_lease: e.run_lease + 1,
                attempt: e.attempt + 1,
                claim_slot,
                batch: self.next_batch,
                item: i as u32 + 1,
                ready_slot,
                ready_seq: lane_seq,
            })
            .collect()
    }

    /// One claim call of up to `n` jobs in lane order (see `claimable`):
    /// one batch in the current claim slot when it takes any; the lane head
    /// moves past them.
    pub fn claim(&mut self, n: usize) -> Vec<Token> {
        let out = self.claimable(n);
        self.tick();
        if out.is_empty() {
            return out;
        }
        if !self.writers.is_empty() {
            self.note("claim:past_open_writer");
        }
        if out.len() > 1 {
            self.note("claim:batch");
        }
        if out.iter().any(|t| t.ready_slot != out[0].ready_slot) {
            self.note("claim:spans_slots");
        }
        let batch = Batch {
            id: self.next_batch,
            items: out
                .iter()
                .map(|t| Item {
                    job: t.job,
                    run_lease: t.run_lease,
                    attempt: t.attempt,
                    ready_slot: t.ready_slot,
                    ready_seq: t.ready_seq,
                })
                .collect(),
        };
        self.next_batch += 1;
        let claim_slot = out[0].claim_slot;
        self.store
            .slot_mut(Ring::Claim, claim_slot)
            .batches
            .push(batch);
        for t in &out {
            self.store.lane_head = t.ready_seq;
            let job = self.jobs.get_mut(&t.job).expect("a claimable job is known");
            job.state = State::Running;
            job.token = Some(*t);
            job.lease_slot = None;
        }
        out
    }

    /// Finish one running attempt in one call; the job's next state (None:
    /// the guard rejected it, which breaks invariant 2).
    pub fn finish(&mut self, job: i64, how: How) -> Option<State> {
        self.finish_many(&[(job, how)])[0]
    }

    /// Finish several running attempts in one call.
    pub fn finish_many(&mut self, list: &[(i64, How)]) -> Vec<Option<State>> {
        let calls: Vec<(Token, How)> = list
            .iter()
            .map(|&(id, how)| (self.token(id).expect("finishing a running job"), how))
            .collect();
        self.finish_call(&calls)
    }

    /// Complete an attempt that was finished already (a stale token): the
    /// guard must reject it (None).
    pub fn finish_stale(&mut self, t: Token) -> Option<State> {
        let got = self.finish_call(&[(t, How::Complete)])[0];
        if got.is_none() {
            self.note("finish:stale_rejected");
        }
        got
    }

    /// The guarded finish path: one call (one transaction) finishing the
    /// attempts the tokens name. The guard reads the storage: an attempt is
    /// accepted if its item is open (this call's link closes it) or it has
    /// a parked row (this call deletes it); a pair named twice is finished
    /// once, the first wins. One link per batch touched, listing the items
    /// closed; one done batch per body slot for the successes of open
    /// items; a done entry (in the current queue slot) for the success of
    /// a parked attempt; a kept failure (outside the rings) per failed or
    /// cancelled job; one count delta per (slot, state).
    fn finish_call(&mut self, calls: &[(Token, How)]) -> Vec<Option<State>> {
        let now = self.tick();
        let faults = self.faults;
        let mut named = BTreeSet::new();
        let mut links: BTreeMap<(usize, i64), Vec<(u32, &'static str)>> = BTreeMap::new();
        let mut done_batches: BTreeMap<usize, Vec<(i64, i64)>> = BTreeMap::new();
        let mut deltas: BTreeMap<(usize, State), i64> = BTreeMap::new();
        let mut out = Vec::new();
        for &(t, how) in calls {
            let key = t.attempt_key();
            let first = named.insert(key);
            let src = if !first {
                None
            } else if self.store.token_open(&t, faults) {
                Some(Source::Item)
            } else if self.store.parked(t.job, t.run_lease) {
                Some(Source::Parked)
            } else {
                None
            };
            let running = self.token(t.job).map(|x| x.attempt_key()) == Some(key)
                && self.jobs[&t.job].state == State::Running;
            let Some(src) = src else {
                if first && running {
                    self.violate(format!(
                        "no lost attempt: the guard rejected the running attempt {}/{} \
                         (batch {} item {})",
                        t.job, t.run_lease, t.batch, t.item
                    ));
                }
                out.push(None);
                continue;
            };
            // 8. Exactly one finisher per (job_id, run_lease).
            let n = {
                let n = self.finishers.entry(key).or_default();
                *n += 1;
                *n
            };
            if !running || n > 1 {
                self.violate(format!(
                    "exactly one finisher: attempt {}/{} (batch {} item {}) was finished \
                     again, {} finishes accepted",
                    t.job, t.run_lease, t.batch, t.item, n
                ));
            }
            let next = how.next_state(t.attempt);
            let hist_slot = match src {
                Source::Item => {
                    links
                        .entry((t.claim_slot, t.batch))
                        .or_default()
                        .push((t.item, how.closed_as(next)));
                    t.ready_slot
                }
                Source::Parked => {
                    self.note("finish:parked");
                    self.store
                        .parked
                        .retain(|p| !(p.job == t.job && p.run_lease == t.run_lease));
                    self.current(Ring::Queue)
                }
            };
            if next == State::Completed && src == Source::Item {
                done_batches.entry(hist_slot).or_default().push(key);
                *deltas.entry((hist_slot, next)).or_default() += 1;
            } else if next == State::Completed {
                self.store.slot_mut(Ring::Queue, hist_slot).done.push(Done {
                    job: t.job,
                    run_lease: t.run_lease,
                    state: next,
                });
                *deltas.entry((hist_slot, next)).or_default() += 1;
            } else if next.is_terminal() {
                self.store.failures.push(Done {
                    job: t.job,
                    run_lease: t.run_lease,
                    state: next,
                });
                *deltas.entry((hist_slot, next)).or_default() += 1;
            } else {
                self.store.deferred.push(Deferred {
                    job: t.job,
                    attempt: t.attempt,
                    run_lease: t.run_lease,
                    due: (now, t.job),
                });
            }
            if running {
                let job = self.jobs.get_mut(&t.job).expect("known");
                job.state = next;
                job.token = None;
                job.lease_slot = None;
            }
            self.finished.push(t);
            out.push(Some(next));
        }
        if links.len() > 1 {
            self.note("finish:many_batches");
        }
        let rescue_one = matches!(calls, [(_, How::Rescue)]);
        for ((k, batch), items) in links {
            if self.write_link(k, batch, items) && rescue_one {
                self.note("rescue:one_of_batch");
            }
        }
        if done_batches.len() > 1 {
            self.note("finish:many_done_slots");
        }
        for (s, jobs) in done_batches {
            if jobs.len() > 1 {
                self.note("finish:done_batch");
            }
            let slot = self.store.slot_mut(Ring::Queue, s);
            slot.done_batches.push(DoneBatch { jobs });
        }
        for ((slot, state), n) in deltas {
            self.store
                .slot_mut(Ring::Queue, slot)
                .deltas
                .push(Delta { state, n });
        }
        out
    }

    /// Write the next link of `batch` (claim slot `k`) listing `items`;
    /// whether the batch still has open items.
    pub(super) fn write_link(
        &mut self,
        k: usize,
        batch: i64,
        items: Vec<(u32, &'static str)>,
    ) -> bool {
        let slot = self.store.slot_mut(Ring::Claim, k);
        let link = slot.next_link(batch);
        if link > 1 {
            self.note("link:later");
        }
        for (item, _) in &items {
            self.closed_items.insert((batch, *item));
        }
        let slot = self.store.slot_mut(Ring::Claim, k);
        slot.links.push(Link { batch, link, items });
        let b = slot.batch(batch).expect("a link's batch is in its slot");
        let open = (1..=b.items.len() as u32).any(|i| !slot.item_closed(batch, i));
        if open {
            self.note("batch:partially_closed");
        }
        open
    }

    /// Cancel a job wherever it is; the state it was cancelled from as
    /// `cancel_job` names it ("available", "retry", "running"), or None.
    pub fn cancel(&mut self, id: i64) -> Option<&'static str> {
        let state = self.jobs.get(&id)?.state;
        if state == State::Running {
            let t = self.token(id).expect("a running job has a token");
            return self.finish_call(&[(t, How::Cancel)])[0].map(|_| "running");
        }
        self.tick();
        match state {
            State::Available => {
                // Its newest live entry, as `ready_tombstone` picks it (a
                // relocated job's old copy is tombstoned).
                let (slot, e) = (0..self.shape.queue)
                    .flat_map(|s| {
                        let slot = self.store.slot(Ring::Queue, s);
                        slot.entries
                            .iter()
                            .filter(|e| e.writer.is_none() && !slot.tombstoned(e.job, e.lane_seq))
                            .map(move |e| (s, e))
                    })
                    .filter(|(_, e)| e.job == id)
                    .max_by_key(|(_, e)| e.lane_seq)
                    .map(|(s, e)| (s, e.clone()))
                    .expect("an available job has an entry");
                self.store.failures.push(Done {
                    job: id,
                    run_lease: e.run_lease,
                    state: State::Cancelled,
                });
                let slot_rows = self.store.slot_mut(Ring::Queue, slot);
                slot_rows.tombstones.push((id, e.lane_seq));
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
                self.store.failures.push(Done {
                    job: id,
                    run_lease: d.run_lease,
                    state: State::Cancelled,
                });
                let slot_rows = self.store.slot_mut(Ring::Queue, slot);
                slot_rows.deltas.push(Delta {
                    state: State::Cancelled,
                    n: 1,
                });
                self.jobs.get_mut(&id).expect("known").state = State::Cancelled;
                Some("retry")
            }
            _ => None,
        }
    }

    /// A heartbeat materializes the attempt's lease (naming its batch item)
    /// in the current lease slot the first time; later ones update it where
    /// it is. A parked attempt heartbeats on its parked row.
    pub fn heartbeat(&mut self, id: i64) -> bool {
        self.tick();
        let Some(t) = self.token(id) else {
            return false;
        };
        if !self.store.token_open(&t, self.faults) {
            // Heartbeats go to the parked row: nothing in the rings.
            return self.store.parked(id, t.run_lease);
        }
        if self.jobs[&id].lease_slot.is_none() {
            let slot = self.current(Ring::Lease);
            self.store.slot_mut(Ring::Lease, slot).leases.push(Lease {
                job: id,
                run_lease: t.run_lease,
                claim_slot: t.claim_slot,
                batch: t.batch,
                item: t.item,
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

    /// Rescue every open attempt (staleness 0) in one finish call, as
    /// `rescue_stale` does; the rescued job ids.
    pub fn rescue(&mut self) -> Vec<i64> {
        let ids = self.running();
        let list: Vec<(i64, How)> = ids.iter().map(|&id| (id, How::Rescue)).collect();
        let got = self.finish_many(&list);
        ids.into_iter()
            .zip(got)
            .filter(|(_, g)| g.is_some())
            .map(|(id, _)| id)
            .collect()
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
}
