-- {schema}.exec_park(ring, slot, limit): move up to `limit` open attempts
-- that keep ring slot `slot` live out of the rings, into parked_attempts.
-- Called by ring_prune for the slot a ring must rotate onto next, so a job
-- that runs for hours never stops reclamation.
--
--   queue: open attempts whose body is in that queue slot
--   claim: open attempts whose receipt is in that claim slot
--   lease: open attempts whose lease is in that lease slot
--
-- The move, per attempt, in this one transaction: insert the closure
-- (receipt slot, job_id, run_lease) with outcome 'parked', and, only for the
-- closures this call inserted, a parked_attempts row with the receipt, the
-- lease's heartbeat and callback, and the job's body. The closure's primary
-- key is the same arbiter finish uses, so parking and finishing exclude each
-- other: a finisher that closed the attempt first makes the park do nothing;
-- once parked, finish can only win by deleting the parked row (see finish).
-- Either way the attempt has exactly one open piece of evidence at a time.
--
-- The worker's token (job_id, run_lease, claim_slot) stays valid: finish and
-- heartbeat look for a parked row when the receipt is closed or gone.
--
-- Returns how many attempts were parked.
CREATE OR REPLACE FUNCTION {schema}.exec_park(p_ring text, p_slot integer, p_limit integer)
RETURNS integer LANGUAGE plpgsql AS $fn$
#variable_conflict use_column
DECLARE
    v_slots  integer[];
    v_jobs   bigint[];
    v_leases bigint[];
    v_parked integer;
BEGIN
    -- Which attempts: one statement per ring, each shaped so the planner
    -- can prune to the partitions it names (claim: one claim slot; lease:
    -- one lease slot, then receipts by primary key).
    IF p_ring = 'claim' THEN
        SELECT array_agg(r.slot), array_agg(r.job_id), array_agg(r.run_lease)
          INTO v_slots, v_jobs, v_leases
          FROM (SELECT r.slot, r.job_id, r.run_lease FROM {schema}.claim_receipts r
                 WHERE r.slot = p_slot
                   AND NOT EXISTS (SELECT 1 FROM {schema}.claim_closures c
                                    WHERE c.slot = r.slot AND c.job_id = r.job_id AND c.run_lease = r.run_lease)
                 ORDER BY r.job_id LIMIT p_limit) r;
    ELSIF p_ring = 'lease' THEN
        SELECT array_agg(r.slot), array_agg(r.job_id), array_agg(r.run_lease)
          INTO v_slots, v_jobs, v_leases
          FROM (SELECT DISTINCT r.slot, r.job_id, r.run_lease
                  FROM {schema}.leases l
                  JOIN {schema}.claim_receipts r
                    ON r.slot = l.claim_slot AND r.job_id = l.job_id AND r.run_lease = l.run_lease
                 WHERE l.slot = p_slot
                   AND NOT EXISTS (SELECT 1 FROM {schema}.claim_closures c
                                    WHERE c.slot = r.slot AND c.job_id = r.job_id AND c.run_lease = r.run_lease)
                 ORDER BY r.job_id LIMIT p_limit) r;
    ELSE
        -- Receipts are not indexed by body slot; this is the same scan
        -- exec_slot_live('queue') makes, and runs only for a live slot.
        SELECT array_agg(r.slot), array_agg(r.job_id), array_agg(r.run_lease)
          INTO v_slots, v_jobs, v_leases
          FROM (SELECT r.slot, r.job_id, r.run_lease FROM {schema}.claim_receipts r
                 WHERE r.ready_slot = p_slot
                   AND NOT EXISTS (SELECT 1 FROM {schema}.claim_closures c
                                    WHERE c.slot = r.slot AND c.job_id = r.job_id AND c.run_lease = r.run_lease)
                 ORDER BY r.job_id LIMIT p_limit) r;
    END IF;
    IF v_jobs IS NULL THEN
        RETURN 0;
    END IF;

    WITH open AS (
        -- Inner join with the body: an open receipt always has it (the
        -- queue slot is not reclaimed while the receipt is open), and a
        -- closure is never written for an attempt that is not then parked.
        SELECT r.slot, r.job_id, r.run_lease, r.queue, r.attempt, r.claimed_at,
               r.deadline_at, r.instance_id, r.ready_seq,
               e.kind, e.args, e.priority, e.max_attempts, e.created_at, e.unique_key, e.metadata
          FROM unnest(v_slots, v_jobs, v_leases) AS k(slot, job_id, run_lease)
          JOIN {schema}.claim_receipts r
            ON r.slot = k.slot AND r.job_id = k.job_id AND r.run_lease = k.run_lease
          JOIN {schema}.ready_entries e
            ON e.slot = r.ready_slot AND e.job_id = r.job_id AND e.lane_seq = r.ready_seq
    ),
    closed AS (
        INSERT INTO {schema}.claim_closures AS c (slot, job_id, run_lease, outcome)
        SELECT o.slot, o.job_id, o.run_lease, 'parked' FROM open o
        ON CONFLICT DO NOTHING
        RETURNING c.slot, c.job_id, c.run_lease
    ),
    parked AS (
        INSERT INTO {schema}.parked_attempts
            (job_id, run_lease, claim_slot, queue, attempt, claimed_at, deadline_at, instance_id,
             heartbeat_at, callback_id, callback_timeout,
             ready_seq, kind, args, priority, max_attempts, created_at, unique_key, metadata)
        SELECT o.job_id, o.run_lease, o.slot, o.queue, o.attempt, o.claimed_at,
               coalesce(l.deadline_at, o.deadline_at), o.instance_id,
               l.heartbeat_at, l.callback_id, l.callback_timeout,
               o.ready_seq, o.kind, o.args, o.priority, o.max_attempts, o.created_at,
               o.unique_key, o.metadata
          FROM open o
          JOIN closed c ON c.slot = o.slot AND c.job_id = o.job_id AND c.run_lease = o.run_lease
          LEFT JOIN LATERAL (
                SELECT l.heartbeat_at, l.deadline_at, l.callback_id, l.callback_timeout
                  FROM {schema}.leases l
                 WHERE l.claim_slot = o.slot AND l.job_id = o.job_id AND l.run_lease = o.run_lease
                 ORDER BY l.heartbeat_at DESC
                 LIMIT 1) l ON true
        RETURNING 1
    )
    SELECT count(*)::integer INTO v_parked FROM parked;
    RETURN v_parked;
END
$fn$;
