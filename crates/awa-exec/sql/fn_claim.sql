-- {schema}.claim(queue, limit, cand_seq, cand_xid, instance): claim up to
-- `limit` jobs of a queue in one statement: take them from the ready plane
-- (which advances the lane heads) and write one receipt per job in the
-- current claim-ring slot. Each claim issues run_lease + 1 and counts the
-- attempt (the first run is attempt 1).
--
-- cand_seq/cand_xid: the frontier candidate returned by the previous
-- call (NULL on the first); see ready_take. Every returned row carries the
-- next candidate; a row with job_id NULL carries only that.
--
-- waiting: work is visible in the queue but the frontier has not settled
-- past it yet; the caller should look again shortly rather than wait for a
-- notification that already came.
--
-- A paused queue hands out nothing.
CREATE OR REPLACE FUNCTION {schema}.claim(
    p_queue     text,
    p_limit     integer,
    p_cand_seq  bigint,
    p_cand_xid  xid8,
    p_instance  uuid
) RETURNS TABLE (
    job_id bigint, run_lease bigint, claim_slot integer, ready_slot integer, ready_seq bigint,
    kind text, args jsonb, priority smallint, attempt integer, max_attempts integer,
    created_at timestamptz, ready_at timestamptz, unique_key text, metadata jsonb,
    next_seq bigint, next_xid xid8, waiting boolean
) LANGUAGE plpgsql AS $fn$
#variable_conflict use_column
DECLARE
    v_claim_slot integer;
    v_aging      interval;
    v_paused     boolean;
BEGIN
    SELECT m.priority_aging_interval, m.paused INTO v_aging, v_paused
      FROM awa.queue_meta m WHERE m.queue = p_queue;
    IF coalesce(v_paused, false) THEN
        RETURN QUERY SELECT NULL::bigint, NULL::bigint, NULL::integer, NULL::integer, NULL::bigint,
                            NULL::text, NULL::jsonb, NULL::smallint, NULL::integer, NULL::integer,
                            NULL::timestamptz, NULL::timestamptz, NULL::text, NULL::jsonb,
                            p_cand_seq, p_cand_xid, false;
        RETURN;
    END IF;

    SELECT l.slot INTO v_claim_slot
      FROM {schema}.ring_ledger l
     WHERE l.ring = 'claim'
     ORDER BY l.generation DESC
     LIMIT 1;

    RETURN QUERY
    WITH taken AS (
        SELECT * FROM {schema}.ready_take(p_queue, p_limit, p_cand_seq, p_cand_xid, v_aging)
    ),
    receipts AS (
        INSERT INTO {schema}.claim_receipts
            (slot, job_id, run_lease, queue, attempt, ready_slot, ready_seq, instance_id)
        SELECT v_claim_slot, t.job_id, t.run_lease + 1, p_queue, t.attempt + 1,
               t.slot, t.lane_seq, p_instance
          FROM taken t
         WHERE t.job_id IS NOT NULL
    )
    SELECT t.job_id, t.run_lease + 1, v_claim_slot, t.slot, t.lane_seq,
           t.kind, t.args, t.priority, t.attempt + 1, t.max_attempts,
           t.created_at, t.ready_at, t.unique_key, t.metadata,
           t.next_seq, t.next_xid, coalesce(t.frontier < t.next_seq, false)
      FROM taken t;
END
$fn$;
