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
--
-- enable_sort and jit off, as in ready_take and for its reasons
-- (fn_ready_take.sql, "Plans that cannot degrade"): the hot path below
-- reads a lane of two slots, in order only as a merge of their indexes.
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
) LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan SET enable_sort = off SET jit = off AS $fn$
#variable_conflict use_column
DECLARE
    v_claim_slot integer;
    v_aging      interval;
    v_paused     boolean;
    v_limited    boolean;
    v_at         timestamptz;  -- a limited claim's admission instant
    v_taken      jsonb;        -- a limited claim's rows (limit_take)
    -- ready_lock's result (an unlimited claim)
    v_idle       boolean;
    v_seq        bigint;
    v_xid        xid8;
    v_frontier   bigint;
    v_seen       bigint;
    v_gen        bigint;
    v_s1         integer;
    v_s2         integer;
    v_prios      smallint[];
    v_shards     smallint[];
    v_heads      bigint[];
    v_lows       bigint[];
    v_n          integer;
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

    IF NOT v_limited THEN
        SELECT l.o_idle, l.o_seq, l.o_xid, l.o_frontier, l.o_seen, l.o_gen, l.o_s1, l.o_s2,
               l.o_prios, l.o_shards, l.o_heads, l.o_lows
          INTO v_idle, v_seq, v_xid, v_frontier, v_seen, v_gen, v_s1, v_s2,
               v_prios, v_shards, v_heads, v_lows
          FROM {schema}.ready_lock(p_queue, p_limit, p_cand_seq, p_cand_xid, v_aging) l;
        IF v_idle THEN
            -- Nothing visible past any lane head: the old candidate back.
            RETURN QUERY SELECT NULL::bigint, NULL::bigint, NULL::integer, NULL::bigint, NULL::integer,
                                NULL::integer, NULL::bigint,
                                NULL::text, NULL::jsonb, NULL::smallint, NULL::integer, NULL::integer,
                                NULL::timestamptz, NULL::timestamptz, NULL::text, NULL::jsonb,
                                p_cand_seq, p_cand_xid, false;
            RETURN;
        END IF;
    END IF;

    IF NOT v_limited AND cardinality(v_prios) = 1 AND v_lows[1] >= v_gen - 1 THEN
        -- The hot path: one lane, all of it in the newest two queue slots
        -- (a queue of one priority and shard, the usual case). ONE
        -- statement reads the lane, writes the batch, moves the head and
        -- returns the rows, which are copied once (into cand) instead of
        -- through ready_take's statement, its result, this function's
        -- take and two sorts: a claim of 512 cost half as much. The lane is
        -- read by ready_take's rules for one lane (fn_ready_take.sql, "Plans
        -- that cannot degrade" and the one-lane statement; keep the two
        -- alike): in lane order from its head up to the frontier, live
        -- entries only (the tombstone probe above the OFFSET 0 fence),
        -- nothing when the ledger has moved since ready_lock read it; at
        -- most p_limit jobs and 8 MiB (the first always); the head moves
        -- past what is taken, to the frontier when the lane is exhausted.
        --
        -- Item order. cand is stored in lane order (the lane scan feeds
        -- the window in order, so row_number is the position: no sort),
        -- and item i is the row numbered i. The batch's arrays and the
        -- returned rows are read from cand in that stored order, without
        -- an ORDER BY: a plain scan of a materialized CTE returns its rows
        -- in the order they were stored, and an aggregate over one scan
        -- (no join, no grouping) accumulates them in that order. (Nine
        -- ordered array_aggs and an ordered result cost a third of the
        -- claim, sorting what was already in order.) Should that ever
        -- fail, job_ids[item] would not name the row's job, and the finish
        -- guard would refuse its completion: no attempt is lost or
        -- finished twice (tests/maint/claim_items.rs holds every returned
        -- row to its item).
        RETURN QUERY
        WITH fresh AS MATERIALIZED (
            -- The ledger as this statement sees it: no newer slot than v_s1.
            SELECT l.generation = v_gen AS ok
              FROM {schema}.ring_ledger l
             WHERE l.ring = 'queue' ORDER BY l.generation DESC LIMIT 1
        ),
        tombs AS MATERIALIZED (
            SELECT EXISTS (SELECT 1 FROM {schema}.ready_tombstones t
                            WHERE t.slot IN (v_s1, v_s2)) AS any
        ),
        cand AS MATERIALIZED (
            SELECT y.*, row_number() OVER w AS rn,
                   sum(pg_column_size(y.args) + coalesce(pg_column_size(y.metadata), 0)) OVER w AS bytes
              FROM (SELECT x.*
                      FROM (SELECT e.slot, e.lane_seq, e.job_id, e.kind, e.args, e.priority, e.shard,
                                   e.attempt, e.max_attempts, e.run_lease, e.created_at, e.ready_at,
                                   e.unique_key, e.metadata
                              FROM {schema}.ready_entries e
                             WHERE e.slot IN (v_s1, v_s2)
                               AND e.queue = p_queue AND e.priority = v_prios[1] AND e.shard = v_shards[1]
                               AND e.lane_seq > v_heads[1] AND e.lane_seq <= v_frontier
                               AND (SELECT f.ok FROM fresh f)
                             ORDER BY e.lane_seq
                            OFFSET 0) x
                     WHERE (NOT (SELECT b.any FROM tombs b)
                            OR (SELECT true FROM {schema}.ready_tombstones t
                                 WHERE t.slot IN (v_s1, v_s2)
                                   AND t.slot = x.slot AND t.job_id = x.job_id
                                   AND t.lane_seq = x.lane_seq) IS NULL)
                     -- (in order already: tells the window so, no sort)
                     ORDER BY x.lane_seq
                     LIMIT p_limit) y
            WINDOW w AS (ORDER BY y.lane_seq ROWS UNBOUNDED PRECEDING)
        ),
        bid AS MATERIALIZED (
            SELECT nextval('{schema}.claim_batch_seq') AS id WHERE EXISTS (SELECT 1 FROM cand)
        ),
        batch AS (
            INSERT INTO {schema}.claim_batches
                (slot, batch_id, queue, claimed_at, instance_id, body_slots,
                 job_ids, run_leases, attempts, ready_slots, ready_seqs, priorities, shards, keyed)
            SELECT v_claim_slot, (SELECT b.id FROM bid b), p_queue, now(), p_instance,
                   (SELECT array_agg(f.slot ORDER BY f.first)
                      FROM (SELECT c2.slot, min(c2.rn) AS first FROM cand c2
                             WHERE c2.rn = 1 OR c2.bytes <= 8388608 GROUP BY c2.slot) f),
                   -- In cand's order, item i the i-th (see "Item order").
                   array_agg(c.job_id), array_agg(c.run_lease + 1), array_agg(c.attempt + 1),
                   array_agg(c.slot), array_agg(c.lane_seq), array_agg(c.priority),
                   array_agg(c.shard),
                   array_agg(c.rn::integer) FILTER (WHERE c.unique_key IS NOT NULL)
              FROM cand c
             WHERE c.rn = 1 OR c.bytes <= 8388608
            HAVING count(*) > 0
            RETURNING 1
        ),
        lane AS MATERIALIZED (
            SELECT count(*) AS n, max(c.lane_seq) AS last_seq,
                   max(c.lane_seq) FILTER (WHERE c.rn = 1 OR c.bytes <= 8388608) AS last_taken,
                   coalesce(bool_or(NOT (c.rn = 1 OR c.bytes <= 8388608)), false) AS cut
              FROM cand c
        ),
        moved AS (
            -- Past what was taken when the byte bound left some; to the
            -- frontier when the lane is exhausted; else past the last
            -- entry read. Not when the ledger moved: nothing was read.
            UPDATE {schema}.lane_heads h
               SET head_seq = n.head
              FROM (SELECT CASE WHEN l.cut THEN l.last_taken
                                WHEN l.n < p_limit THEN v_frontier
                                ELSE l.last_seq END AS head
                      FROM lane l) n
             WHERE h.queue = p_queue AND h.priority = v_prios[1] AND h.shard = v_shards[1]
               AND n.head > h.head_seq
               AND (SELECT f.ok FROM fresh f)
            RETURNING 1
        )
        SELECT c.job_id, c.run_lease + 1, v_claim_slot, (SELECT b.id FROM bid b), c.rn::integer,
               c.slot, c.lane_seq, c.kind, c.args, c.priority, c.attempt + 1, c.max_attempts,
               c.created_at, c.ready_at, c.unique_key, c.metadata,
               v_seq, v_xid, coalesce(v_seen < v_seq, false)
          FROM cand c
         WHERE c.rn = 1 OR c.bytes <= 8388608;
        GET DIAGNOSTICS v_n = ROW_COUNT;
        IF v_n = 0 AND v_gen <> (SELECT l.generation FROM {schema}.ring_ledger l
                                  WHERE l.ring = 'queue' ORDER BY l.generation DESC LIMIT 1) THEN
            -- The ledger moved: nothing was taken; look again at once.
            v_seen := 0;
        END IF;
        IF v_gen > ANY (v_lows) THEN
            PERFORM {schema}.ready_lift(p_queue, v_prios, v_shards, v_n, p_limit);
        END IF;
        IF v_n = 0 THEN
            RETURN QUERY SELECT NULL::bigint, NULL::bigint, NULL::integer, NULL::bigint, NULL::integer,
                                NULL::integer, NULL::bigint,
                                NULL::text, NULL::jsonb, NULL::smallint, NULL::integer, NULL::integer,
                                NULL::timestamptz, NULL::timestamptz, NULL::text, NULL::jsonb,
                                v_seq, v_xid, coalesce(v_seen < v_seq, false);
        END IF;
        RETURN;
    END IF;

    -- Every other claim: the rows of ready_take_locked (the lanes
    -- ready_lock locked above) or of limit_take, in their order: item i
    -- of the batch is the i-th job. Each is returned as it comes (a
    -- set-returning function's rows reach the caller only when it
    -- returns, so after the batch row below is written); the batch's
    -- arrays are built on the way. (A limited claim's rows come from
    -- limit_take instead; the branch not taken is not run.)
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
                  FROM {schema}.ready_take_locked(p_queue, p_limit, v_aging, v_seq, v_xid, v_frontier,
                                                  v_seen, v_gen, v_s1, v_s2, v_prios, v_shards,
                                                  v_heads, v_lows)
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
