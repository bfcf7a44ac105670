-- {schema}.live_jobs / {schema}.jobs: every non-terminal job (live_jobs)
-- or every job (jobs) the substrate knows, with the state the planes
-- together give it. live_jobs never reads history, so its cost is bounded
-- by live work, not by retained history. For operators and tests; the hot path never reads it.
--   available      ready entry past its lane head, not tombstoned
--   running        an open item of a claim batch (no closure link lists
--                  it), or a parked attempt, whose worker does not list it
--                  in worker_buffers (its handler has started)
--   buffered       the same, listed in its worker's worker_buffers row:
--                  claimed, waiting in the worker's local buffer, not
--                  started (the worker rewrites that row at most once a
--                  second, so the split is true to about a second)
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
  FROM {schema}.ready_entries e
  JOIN {schema}.lane_heads h ON h.queue = e.queue AND h.priority = e.priority AND h.shard = e.shard
 WHERE e.lane_seq > h.head_seq
   AND NOT EXISTS (SELECT 1 FROM {schema}.ready_tombstones t
                    WHERE t.slot = e.slot AND t.job_id = e.job_id AND t.lane_seq = e.lane_seq)
UNION ALL
SELECT u.job_id, b.queue, e.kind, e.args, e.priority,
       CASE WHEN EXISTS (SELECT 1 FROM {schema}.worker_buffers w
                          WHERE w.instance_id = b.instance_id AND u.job_id = ANY (w.job_ids))
            THEN 'buffered' ELSE 'running' END,
       u.attempt, e.max_attempts,
       u.run_lease, e.created_at, b.claimed_at, NULL, e.metadata, e.attempts, b.instance_id
  FROM {schema}.claim_batches b
 CROSS JOIN LATERAL unnest(b.job_ids, b.run_leases, b.attempts, b.ready_slots, b.ready_seqs,
                           b.priorities, b.shards)
       WITH ORDINALITY AS u(job_id, run_lease, attempt, ready_slot, ready_seq, priority, shard, item)
  -- LATERAL + LIMIT: one index probe per item, whatever filters a caller adds.
 CROSS JOIN LATERAL (
        SELECT e.* FROM {schema}.ready_entries e
         WHERE e.slot = u.ready_slot AND e.queue = b.queue AND e.priority = u.priority
           AND e.shard = u.shard AND e.lane_seq = u.ready_seq AND e.job_id = u.job_id
         LIMIT 1) e
 -- A batch whose last link closed it is skipped with one probe.
 WHERE NOT EXISTS (SELECT 1 FROM {schema}.claim_closures c
                    WHERE c.slot = b.slot AND c.batch_id = b.batch_id AND c.open_after = 0)
   AND NOT EXISTS (SELECT 1 FROM {schema}.claim_closures c
                    WHERE c.slot = b.slot AND c.batch_id = b.batch_id AND u.item = ANY (c.items))
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
