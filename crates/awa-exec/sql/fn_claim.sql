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
    v_limited    boolean;
    v_at         timestamptz;  -- a limited claim's admission instant
    v_taken      jsonb;        -- a limited claim's rows (limit_take)
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
    -- One statement: the rows taken (in the order ready_take returns
    -- them: item i is the i-th job), ONE claim batch row for all of them,
    -- and the rows returned. A loop over the rows in PL/pgSQL (a dozen
    -- assignments and seven array appends per job) cost more than the
    -- take itself.
    RETURN QUERY
    WITH t AS MATERIALIZED (
        -- it: the item number. Both takes return either the rows taken
        -- or one row without a job (carrying only the frontier), never
        -- both, so the i-th row is item i. (A running count over the rows
        -- sorted them, args and all, once more per claim.)
        SELECT x.*, x.n AS it
          FROM (SELECT r.*, r.ord AS n
                  FROM {schema}.ready_take(p_queue, p_limit, p_cand_seq, p_cand_xid, v_aging)
                       WITH ORDINALITY AS r(job_id, slot, lane_seq, kind, args, priority, attempt,
                                            max_attempts, run_lease, created_at, ready_at,
                                            unique_key, metadata, frontier, next_seq, next_xid,
                                            shard, ord)
                 WHERE NOT v_limited
                UNION ALL
                SELECT r.*, r.ord
                  FROM ROWS FROM (jsonb_to_recordset(v_taken) AS (
                           job_id bigint, slot integer, lane_seq bigint, kind text, args jsonb,
                           priority smallint, attempt integer, max_attempts integer, run_lease bigint,
                           created_at timestamptz, ready_at timestamptz, unique_key text, metadata jsonb,
                           frontier bigint, next_seq bigint, next_xid xid8, shard smallint))
                       WITH ORDINALITY AS r(job_id, slot, lane_seq, kind, args, priority, attempt,
                                            max_attempts, run_lease, created_at, ready_at,
                                            unique_key, metadata, frontier, next_seq, next_xid,
                                            shard, ord)
                 WHERE v_limited) x
    ),
    b AS MATERIALIZED (
        SELECT nextval('{schema}.claim_batch_seq') AS id
         WHERE EXISTS (SELECT 1 FROM t WHERE t.job_id IS NOT NULL)
    ),
    batch AS (
        INSERT INTO {schema}.claim_batches
            (slot, batch_id, queue, claimed_at, instance_id, body_slots,
             job_ids, run_leases, attempts, ready_slots, ready_seqs, priorities, shards, keyed)
        SELECT v_claim_slot, b.id, p_queue, coalesce(v_at, now()), p_instance,
               -- The distinct queue slots of the bodies, in order of first use.
               (SELECT array_agg(f.slot ORDER BY f.first)
                  FROM (SELECT t2.slot, min(t2.it) AS first FROM t t2
                         WHERE t2.job_id IS NOT NULL GROUP BY t2.slot) f),
               array_agg(t.job_id ORDER BY t.it), array_agg(t.run_lease + 1 ORDER BY t.it),
               array_agg(t.attempt + 1 ORDER BY t.it), array_agg(t.slot ORDER BY t.it),
               array_agg(t.lane_seq ORDER BY t.it), array_agg(t.priority ORDER BY t.it),
               array_agg(t.shard ORDER BY t.it),
               array_agg(t.it::integer ORDER BY t.it) FILTER (WHERE t.unique_key IS NOT NULL)
          FROM t CROSS JOIN b
         WHERE t.job_id IS NOT NULL
         GROUP BY b.id
        RETURNING 1
    )
    SELECT t.job_id, t.run_lease + 1,
           CASE WHEN t.job_id IS NOT NULL THEN v_claim_slot END,
           CASE WHEN t.job_id IS NOT NULL THEN (SELECT b.id FROM b) END,
           CASE WHEN t.job_id IS NOT NULL THEN t.it::integer END,
           t.slot, t.lane_seq, t.kind, t.args, t.priority, t.attempt + 1, t.max_attempts,
           t.created_at, t.ready_at, t.unique_key, t.metadata,
           t.next_seq, t.next_xid, coalesce(t.frontier < t.next_seq, false)
      FROM t
     ORDER BY t.n;

    IF v_limited AND jsonb_array_length(v_taken) > 0 THEN
        PERFORM {schema}.limit_record(p_queue, v_at, v_claim_slot,
                                      currval('{schema}.claim_batch_seq'), v_taken);
    END IF;
END
$fn$;
