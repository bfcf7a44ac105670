-- The read views of live work (issue 33: priced by the work there is).
-- Each reads what is live, never what the rings retain (claimed entries
-- stay in their queue slot until it is truncated, closed claim batches in
-- theirs), in plans whose estimates stay far below jit_above_cost:
--   lane_entries      per lane (lane_heads), its entries past its head
--                     through the lane index, one range per queue slot;
--                     each reader probes the tombstones' primary key per
--                     entry it keeps (a scalar subquery, which the planner
--                     never turns into a join over every tombstone; LIMIT 1
--                     prices it as the one partition it reads), and only
--                     when some tombstone exists (one probe, an InitPlan:
--                     the per-entry probe, partitions pruned at each, was
--                     two thirds of publish_health over 100,000 available
--                     jobs, 190 -> 65 ms)
--   open_batch_items  the open items of the claim batches claim_floor
--                     lists and of those claimed from its floor on, never
--                     the closed batches below it
--   live_job_states   every live job's id, queue, state and `at`: what the
--                     counting reads (health, stats, pending, storage
--                     status) need, with no body read for a running job
--   live_jobs         every live job with its body: one probe of the lane
--                     index per running job
-- So a read costs O(lanes + live jobs + batches claimed since the leader's
-- last health pass), whatever history is kept. For operators and tests;
-- the hot path never reads them.

-- {schema}.lane_entries: the ready entries past their lane's head, every
-- entry column; those a tombstone names were cancelled (or relocated: the
-- old copy), the others are the available jobs. OFFSET 0 keeps each lane's
-- range inside its lateral subquery (pulled up, it became a hash join over
-- every entry of every slot). The second bound, the sequence's last
-- position, never cuts (every visible entry's position was drawn before it
-- is read) but makes the estimate that of a range between two values
-- instead of a third of each slot. The lane's columns are lane_heads' own,
-- so a filter on queue reaches lane_heads (the subquery's are out of reach
-- behind the fence); other filters apply to each lane's rows.
CREATE OR REPLACE VIEW {schema}.lane_entries AS
SELECT e.slot, h.queue, h.priority, h.shard, e.lane_seq, e.job_id, e.kind, e.args, e.attempt,
       e.max_attempts, e.run_lease, e.created_at, e.ready_at, e.unique_key, e.metadata,
       e.attempts
  FROM {schema}.lane_heads h
 CROSS JOIN LATERAL (
        SELECT e.* FROM {schema}.ready_entries e
         WHERE e.queue = h.queue AND e.priority = h.priority AND e.shard = h.shard
           AND e.lane_seq > h.head_seq
           AND e.lane_seq <= (SELECT s.last_value FROM {schema}.ready_seq s)
        OFFSET 0) e;

-- {schema}.open_batch_items: every open item of a claim batch (no closure
-- link lists it), with what its batch says of it: running, or buffered
-- when its worker lists it in worker_buffers (claimed, waiting in the
-- worker's local buffer, not started; the worker rewrites that row at most
-- once a second, so the split is true to about a second). Batches below
-- claim_floor's floor are read only when the floor lists them as open;
-- from the floor on, every batch (claim_batches_batch_idx; the second
-- bound never cuts, as above). A batch's links are read once.
CREATE OR REPLACE VIEW {schema}.open_batch_items AS
SELECT u.job_id, b.queue,
       CASE WHEN u.job_id = ANY (w.job_ids) THEN 'buffered' ELSE 'running' END AS state,
       b.claimed_at, b.instance_id, b.slot AS claim_slot, b.batch_id, u.item::integer AS item,
       u.run_lease, u.attempt, u.ready_slot, u.ready_seq, u.priority, u.shard
  FROM (-- Each listed batch by its primary key (LATERAL + LIMIT: a probe,
        -- never a join over every batch).
        SELECT b.* FROM {schema}.claim_floor f
         CROSS JOIN LATERAL unnest(f.open_slots, f.open_batches) AS o(slot, batch_id)
         CROSS JOIN LATERAL (
                SELECT b.* FROM {schema}.claim_batches b
                 WHERE b.slot = o.slot AND b.batch_id = o.batch_id
                 LIMIT 1) b
        UNION ALL
        -- (No floor row, were it ever deleted: every batch.)
        SELECT b.* FROM {schema}.claim_batches b
         WHERE b.batch_id >= coalesce((SELECT f.floor FROM {schema}.claim_floor f), 0)
           AND b.batch_id <= (SELECT s.last_value FROM {schema}.claim_batch_seq s)) b
 CROSS JOIN LATERAL (
        -- A batch whose last link left nothing open is skipped with one
        -- probe, before its items are unnested: below, each item is
        -- tested against the list of closed ones, which costs items x
        -- closed per batch (after a drain, 145 closed batches of 512 cost
        -- 90 ms here, an idle check of `worker run --exit-when-idle`).
        SELECT 1 WHERE NOT EXISTS (
                   SELECT 1 FROM {schema}.claim_closures c
                    WHERE c.slot = b.slot AND c.batch_id = b.batch_id AND c.open_after = 0)) open
 CROSS JOIN LATERAL (
        SELECT coalesce(array_agg(x.item), '{}') AS items
          FROM {schema}.claim_closures c
         CROSS JOIN LATERAL unnest(c.items) AS x(item)
         WHERE c.slot = b.slot AND c.batch_id = b.batch_id) c
 CROSS JOIN LATERAL unnest(b.job_ids, b.run_leases, b.attempts, b.ready_slots, b.ready_seqs,
                           b.priorities, b.shards)
       WITH ORDINALITY AS u(job_id, run_lease, attempt, ready_slot, ready_seq, priority, shard, item)
  LEFT JOIN {schema}.worker_buffers w ON w.instance_id = b.instance_id
 WHERE NOT (u.item = ANY (c.items));

-- {schema}.live_job_states: every non-terminal job's id, queue, state and
-- `at` (when it became runnable, was claimed or is due), without reading a
-- running job's body. States as live_jobs has them.
CREATE OR REPLACE VIEW {schema}.live_job_states AS
SELECT e.job_id AS id, e.queue, 'available'::text AS state, e.ready_at AS at
  FROM {schema}.lane_entries e
 WHERE NOT (SELECT EXISTS (SELECT 1 FROM {schema}.ready_tombstones t))
    OR (SELECT true FROM {schema}.ready_tombstones t
         WHERE t.slot = e.slot AND t.job_id = e.job_id AND t.lane_seq = e.lane_seq
         LIMIT 1) IS NULL
UNION ALL
SELECT i.job_id, i.queue, i.state, i.claimed_at
  FROM {schema}.open_batch_items i
UNION ALL
SELECT p.job_id, p.queue,
       CASE WHEN EXISTS (SELECT 1 FROM {schema}.worker_buffers w
                          WHERE w.instance_id = p.instance_id AND p.job_id = ANY (w.job_ids))
            THEN 'buffered' ELSE 'running' END,
       p.claimed_at
  FROM {schema}.parked_attempts p
UNION ALL
SELECT d.job_id, d.queue,
       CASE d.reason WHEN 'retry' THEN 'retryable' WHEN 'released' THEN 'available' ELSE d.reason END,
       d.run_at
  FROM {schema}.deferred_jobs d;

-- {schema}.live_jobs / {schema}.jobs: every non-terminal job (live_jobs)
-- or every job (jobs) the substrate knows, with the state the planes
-- together give it.
--   available      ready entry past its lane head, not tombstoned
--   running        an open item of a claim batch (no closure link lists
--                  it), or a parked attempt, whose worker does not list it
--                  in worker_buffers (its handler has started)
--   buffered       the same, listed in its worker's worker_buffers row
--   scheduled / retryable / snoozed   deferred row (released: available)
--   completed / failed / cancelled    terminal_jobs
--   dead_lettered  dlq entry
-- attempts: the records of the job's ended attempts (ADR 11; a running
-- attempt is not among them). holder: the runtime (awa.runtimes
-- instance id) that claimed a running job; NULL in every other state.
-- Columns a query does not name are not computed (each branch is a
-- subquery whose unused outputs the planner drops).
-- Live rows are never hidden: a retired slot holds none unless a late
-- writer committed one there, and then it must show (and the slot is
-- un-retired by the next prune). Only terminal_jobs leaves retired slots out.
CREATE OR REPLACE VIEW {schema}.live_jobs AS
SELECT e.job_id AS id, e.queue, e.kind, e.args, e.priority, 'available'::text AS state,
       e.attempt, e.max_attempts, e.run_lease, e.created_at, e.ready_at AS at,
       NULL::text AS last_error, e.metadata, e.attempts, NULL::uuid AS holder
  FROM {schema}.lane_entries e
 WHERE NOT (SELECT EXISTS (SELECT 1 FROM {schema}.ready_tombstones t))
    OR (SELECT true FROM {schema}.ready_tombstones t
         WHERE t.slot = e.slot AND t.job_id = e.job_id AND t.lane_seq = e.lane_seq
         LIMIT 1) IS NULL
UNION ALL
SELECT i.job_id, i.queue, e.kind, e.args, e.priority, i.state, i.attempt, e.max_attempts,
       i.run_lease, e.created_at, i.claimed_at, NULL, e.metadata, e.attempts, i.instance_id
  FROM {schema}.open_batch_items i
  -- LATERAL + LIMIT: one index probe per item, whatever filters a caller adds.
 CROSS JOIN LATERAL (
        SELECT e.* FROM {schema}.ready_entries e
         WHERE e.slot = i.ready_slot AND e.queue = i.queue AND e.priority = i.priority
           AND e.shard = i.shard AND e.lane_seq = i.ready_seq AND e.job_id = i.job_id
         LIMIT 1) e
UNION ALL
SELECT p.job_id, p.queue, p.kind, p.args, p.priority,
       CASE WHEN EXISTS (SELECT 1 FROM {schema}.worker_buffers w
                          WHERE w.instance_id = p.instance_id AND p.job_id = ANY (w.job_ids))
            THEN 'buffered' ELSE 'running' END,
       p.attempt, p.max_attempts,
       p.run_lease, p.created_at, p.claimed_at, NULL, p.metadata, p.attempts, p.instance_id
  FROM {schema}.parked_attempts p
UNION ALL
SELECT d.job_id, d.queue, d.kind, d.args, d.priority,
       CASE d.reason WHEN 'retry' THEN 'retryable' WHEN 'released' THEN 'available' ELSE d.reason END,
       d.attempt, d.max_attempts, d.run_lease, d.created_at, d.run_at, d.last_error, d.metadata,
       d.attempts, NULL
  FROM {schema}.deferred_jobs d;

-- {schema}.jobs: live_jobs plus terminal history and dead letters.
CREATE OR REPLACE VIEW {schema}.jobs AS
SELECT * FROM {schema}.live_jobs
UNION ALL
SELECT t.id, t.queue, t.kind, t.args, t.priority, t.state, t.attempt, t.max_attempts,
       t.run_lease, t.created_at, t.finalized_at, t.last_error, t.metadata, t.attempts, NULL
  FROM {schema}.terminal_jobs t
UNION ALL
SELECT q.job_id, q.queue, q.kind, q.args, q.priority, 'dead_lettered', q.attempt, q.max_attempts,
       q.run_lease, q.created_at, q.dead_at, q.last_error, q.metadata, q.attempts, NULL
  FROM {schema}.dlq_entries q;
