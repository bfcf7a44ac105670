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
-- waiting: work is visible in the queue that this call could not take
-- yet: the frontier has not settled past it, the ledger moved, or another
-- transaction (usually another worker's claim) held one of its lanes. The
-- caller should look again shortly rather than wait for a notification
-- that already came, or never comes (a standing backlog).
--
-- A paused queue hands out nothing.
--
-- Limits (docs/adr/0015): a queue with a row in awa.queue_limits takes
-- through limit_take (ready_take's rows cut to what its rate limits and
-- global concurrency admit, under the queue's limit lock) and records what
-- it admitted through limit_record; its batch's claimed_at is the
-- admission instant. Any other queue pays one probe of that table's
-- primary key, in the statement that reads its settings.
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
    v_batch      bigint;
    v_slots      integer[] := '{}';  -- the distinct queue slots of the bodies
    v_ids        bigint[] := '{}';
    v_leases     bigint[] := '{}';
    v_attempts   integer[] := '{}';
    v_rslots     integer[] := '{}';
    v_seqs       bigint[] := '{}';
    v_prios      smallint[] := '{}';
    v_shards     smallint[] := '{}';
    v_keyed      integer[];
    v_limited    boolean;
    v_at         timestamptz;  -- a limited claim's admission instant
    v_taken      jsonb;        -- a limited claim's rows (limit_take)
    t            record;
BEGIN
    IF p_limit IS NULL OR p_limit NOT BETWEEN 1 AND 1024 THEN
        RAISE EXCEPTION 'claim limit must be 1 to 1024 (got %)', coalesce(p_limit::text, 'NULL')
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'Claim at most a claim batch (awa_core::bounds::CLAIM_BATCH) per call.';
    END IF;
    SELECT m.priority_aging_interval, m.paused,
           (SELECT l.slot FROM {schema}.ring_ledger l
             WHERE l.ring = 'claim' ORDER BY l.generation DESC LIMIT 1),
           EXISTS (SELECT 1 FROM awa.queue_limits q WHERE q.queue = p_queue)
      INTO v_aging, v_paused, v_claim_slot, v_limited
      FROM (SELECT 1) one
      LEFT JOIN awa.queue_meta m ON m.queue = p_queue;
    IF v_limited AND NOT coalesce(v_paused, false) THEN
        SELECT x.admitted_at, x.taken INTO v_at, v_taken
          FROM {schema}.limit_take(p_queue, p_limit, p_cand_seq, p_cand_xid, v_aging) x;
    END IF;
    IF coalesce(v_paused, false) OR (v_limited AND v_taken IS NULL) THEN
        RETURN QUERY SELECT NULL::bigint, NULL::bigint, NULL::integer, NULL::bigint, NULL::integer,
                            NULL::integer, NULL::bigint,
                            NULL::text, NULL::jsonb, NULL::smallint, NULL::integer, NULL::integer,
                            NULL::timestamptz, NULL::timestamptz, NULL::text, NULL::jsonb,
                            p_cand_seq, p_cand_xid, false;
        RETURN;
    END IF;

    -- ready_take's rows, in its order: item i of the batch is the i-th job.
    -- Each is returned as it comes (a set-returning function's rows reach
    -- the caller only when it returns, so after the batch row below is
    -- written); the batch's arrays are built on the way.
    -- (A limited claim's rows come from limit_take instead; the branch not
    -- taken is not run.)
    FOR t IN
        SELECT * FROM {schema}.ready_take(p_queue, p_limit, p_cand_seq, p_cand_xid, v_aging)
         WHERE NOT v_limited
        UNION ALL
        SELECT * FROM jsonb_to_recordset(v_taken) AS x(
                   job_id bigint, slot integer, lane_seq bigint, kind text, args jsonb,
                   priority smallint, attempt integer, max_attempts integer, run_lease bigint,
                   created_at timestamptz, ready_at timestamptz, unique_key text, metadata jsonb,
                   frontier bigint, next_seq bigint, next_xid xid8, shard smallint)
         WHERE v_limited
    LOOP
        next_seq := t.next_seq;
        next_xid := t.next_xid;
        waiting := coalesce(t.frontier < t.next_seq, false);
        IF t.job_id IS NULL THEN
            -- No job: only the frontier candidate.
            job_id := NULL; run_lease := NULL; claim_slot := NULL; batch_id := NULL; item := NULL;
            ready_slot := NULL; ready_seq := NULL; kind := NULL; args := NULL; priority := NULL;
            attempt := NULL; max_attempts := NULL; created_at := NULL; ready_at := NULL;
            unique_key := NULL; metadata := NULL;
            RETURN NEXT;
            CONTINUE;
        END IF;
        IF v_batch IS NULL THEN
            v_batch := nextval('{schema}.claim_batch_seq');
        END IF;
        v_ids := v_ids || t.job_id;
        v_leases := v_leases || (t.run_lease + 1);
        v_attempts := v_attempts || (t.attempt + 1);
        v_rslots := v_rslots || t.slot;
        v_seqs := v_seqs || t.lane_seq;
        v_prios := v_prios || t.priority;
        v_shards := v_shards || t.shard;
        IF NOT (t.slot = ANY (v_slots)) THEN
            v_slots := v_slots || t.slot;
        END IF;
        IF t.unique_key IS NOT NULL THEN
            v_keyed := coalesce(v_keyed, '{}') || cardinality(v_ids);
        END IF;
        job_id := t.job_id; run_lease := t.run_lease + 1; claim_slot := v_claim_slot;
        batch_id := v_batch; item := cardinality(v_ids); ready_slot := t.slot; ready_seq := t.lane_seq;
        kind := t.kind; args := t.args; priority := t.priority; attempt := t.attempt + 1;
        max_attempts := t.max_attempts; created_at := t.created_at; ready_at := t.ready_at;
        unique_key := t.unique_key; metadata := t.metadata;
        RETURN NEXT;
    END LOOP;

    -- One batch row for all of them; nothing when nothing was taken.
    IF v_batch IS NOT NULL THEN
        INSERT INTO {schema}.claim_batches
            (slot, batch_id, queue, claimed_at, instance_id, body_slots,
             job_ids, run_leases, attempts, ready_slots, ready_seqs, priorities, shards, keyed)
        VALUES (v_claim_slot, v_batch, p_queue, coalesce(v_at, now()), p_instance, v_slots,
                v_ids, v_leases, v_attempts, v_rslots, v_seqs, v_prios, v_shards, v_keyed);
        IF v_limited THEN
            PERFORM {schema}.limit_record(p_queue, v_at, v_claim_slot, v_batch, v_taken);
        END IF;
    END IF;
END
$fn$;
