-- {schema}.claim(queue, limit, cand_seq, cand_xid, instance): claim up to
-- `limit` jobs of a queue in one statement: take them from the ready plane
-- (which advances the lane heads) and write ONE claim batch row for all of
-- them in the current claim-ring slot (item i = the i-th job returned).
-- Each claim issues run_lease + 1 and counts the attempt (the first run is
-- attempt 1). The attempt token is (job_id, run_lease, claim_slot,
-- batch_id, item): finishing goes straight to its item.
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
--
-- Bounds: limit within awa_core::bounds::CLAIM_BATCH, 1 to 1024 (SQLSTATE
-- 22023, before anything is read).
CREATE OR REPLACE FUNCTION {schema}.claim(
    p_queue     text,
    p_limit     integer,
    p_cand_seq  bigint,
    p_cand_xid  xid8,
    p_instance  uuid
) RETURNS TABLE (
    job_id bigint, run_lease bigint, claim_slot integer, batch_id bigint, item integer,
    ready_slot integer, ready_seq bigint,
    kind text, args jsonb, priority smallint, attempt integer, max_attempts integer,
    created_at timestamptz, ready_at timestamptz, unique_key text, metadata jsonb,
    next_seq bigint, next_xid xid8, waiting boolean
) LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan AS $fn$
#variable_conflict use_column
DECLARE
    v_claim_slot integer;
    v_aging      interval;
    v_paused     boolean;
BEGIN
    IF p_limit IS NULL OR p_limit NOT BETWEEN 1 AND 1024 THEN
        RAISE EXCEPTION 'claim limit must be 1 to 1024 (got %)', coalesce(p_limit::text, 'NULL')
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'Claim at most a claim batch (awa_core::bounds::CLAIM_BATCH) per call.';
    END IF;
    SELECT m.priority_aging_interval, m.paused INTO v_aging, v_paused
      FROM awa.queue_meta m WHERE m.queue = p_queue;
    IF coalesce(v_paused, false) THEN
        RETURN QUERY SELECT NULL::bigint, NULL::bigint, NULL::integer, NULL::bigint, NULL::integer,
                            NULL::integer, NULL::bigint,
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
    WITH taken AS MATERIALIZED (
        SELECT t.*, row_number() OVER () AS ord
          FROM {schema}.ready_take(p_queue, p_limit, p_cand_seq, p_cand_xid, v_aging) t
    ),
    items AS (
        SELECT t.*, row_number() OVER (ORDER BY t.ord)::integer AS item
          FROM taken t
         WHERE t.job_id IS NOT NULL
    ),
    batch AS (
        -- One row for the whole claim; nothing when nothing was taken.
        INSERT INTO {schema}.claim_batches
            (slot, batch_id, queue, instance_id, body_slots,
             job_ids, run_leases, attempts, ready_slots, ready_seqs, priorities, shards, keyed)
        SELECT v_claim_slot, nextval('{schema}.claim_batch_seq'), p_queue, p_instance,
               ARRAY(SELECT DISTINCT i2.slot FROM items i2),
               array_agg(i.job_id ORDER BY i.item), array_agg(i.run_lease + 1 ORDER BY i.item),
               array_agg(i.attempt + 1 ORDER BY i.item), array_agg(i.slot ORDER BY i.item),
               array_agg(i.lane_seq ORDER BY i.item), array_agg(i.priority ORDER BY i.item),
               array_agg(i.shard ORDER BY i.item),
               array_agg(i.item ORDER BY i.item) FILTER (WHERE i.unique_key IS NOT NULL)
          FROM items i
        HAVING count(*) > 0
        RETURNING batch_id
    )
    SELECT t.job_id, t.run_lease + 1, v_claim_slot, b.batch_id, i.item, t.slot, t.lane_seq,
           t.kind, t.args, t.priority, t.attempt + 1, t.max_attempts,
           t.created_at, t.ready_at, t.unique_key, t.metadata,
           t.next_seq, t.next_xid, coalesce(t.frontier < t.next_seq, false)
      FROM taken t
      LEFT JOIN items i ON i.ord = t.ord
      LEFT JOIN batch b ON t.job_id IS NOT NULL
     ORDER BY t.ord;
END
$fn$;
