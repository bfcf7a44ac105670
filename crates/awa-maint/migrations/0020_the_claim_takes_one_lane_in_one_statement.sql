-- Awa migration 20: the claim takes one lane in one statement
--
-- Drafted by `cargo xtask migration draft` (hand-written parts first, then
-- what the sources define), then reviewed. Frozen once on main: never edit
-- it, add a new step. Runs once, in one transaction, as the migrator.
--
-- The take splits into ready_lock (bounds, idle look, frontier, lane
-- locks), ready_take_locked (the reads and head moves) and ready_lift
-- (low_gen), which ready_take calls in turn; claim calls ready_lock
-- itself and, for one lane in the newest two slots, reads the lane,
-- writes its batch and moves the head in one statement (issue 33: a claim
-- of 512 at about half the cost). Function bodies only: no table changes.


-- Runtime function templates, as the sources define them.
INSERT INTO awa.substrate_functions (name, ord, body) VALUES ('claim', 14, $awa_template$-- {schema}.claim(queue, limit, cand_seq, cand_xid, instance): claim up to
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
$awa_template$)
ON CONFLICT (name) DO UPDATE SET ord = EXCLUDED.ord, body = EXCLUDED.body;
INSERT INTO awa.substrate_functions (name, ord, body) VALUES ('ready_take', 1, $awa_template$-- {schema}.ready_take(queue, limit, cand_seq, cand_xid, aging): take up to
-- `limit` runnable jobs of a queue, and at most 8 MiB of args + metadata
-- (stored size; at least one job), in order, advancing the lane heads past
-- them. Called from the execution plane (limit_take; claim takes through
-- ready_lock and ready_take_locked, below, or its own one-lane statement),
-- in the same call (transaction) that writes the claim batch.
--
-- Order: priority 1 first, 4 last (docs/adr/0012), after aging, then lane
-- position. Aging moves a waiting job one step towards 1 per aging
-- interval (the effective priority may go below 1). Within one lane the
-- effective priority is made non-decreasing (a running maximum: a newer
-- job never ranks ahead of an older one of its lane), so what is taken
-- from a lane is always a prefix of it and the head can move past exactly
-- what was taken.
--
-- Concurrent claimers skip each other: lanes are locked FOR UPDATE SKIP
-- LOCKED, so a lane being claimed by someone else is simply not offered;
-- the returned frontier is then 0 ("Busy lanes" below), so the caller
-- looks again soon.
--
-- Tombstoned entries (cancelled jobs, and the old copies relocation leaves
-- behind, one per move) are skipped by the scan itself, so they never use
-- up the limit: a call that takes fewer jobs than it was asked for, and
-- returns a non-zero frontier, has taken every runnable job up to the
-- frontier, and a worker relies on that to go idle until the next
-- notification. (Counting them once let a
-- backlog whose jobs had each been relocated a few times drain a quarter
-- of a claim per poll interval.) A lane found exhausted up to the
-- frontier has its head moved to the frontier, past any tombstoned tail:
-- nothing at or below the frontier can still appear in it (the lane is
-- locked, so no relocation or cancel of it runs meanwhile, and every
-- producer at or below the frontier has committed).
--
-- The frontier. A lane position is safe to pass only once no transaction
-- can still commit a row at or below it, otherwise a later producer's job
-- would overtake (and the head would strand) an earlier, still
-- uncommitted one. We read M = ready_seq.last_value, then take our own
-- transaction id X. Every position <= M was drawn by a producer whose xid
-- was assigned before (ready_append's rule), hence is older than X. So once
-- no transaction older than X is running (the xmin of a later snapshot is
-- at least X), everything <= M is final and visible to a later statement.
-- (A snapshot's xip alone is not enough: it omits running xids newer than
-- the newest completed one.) The caller passes the candidate (M, X) of its
-- previous call, which has usually settled by now, and gets this call's
-- candidate back (next_seq, next_xid) in every row; when no job is taken,
-- one row with job_id NULL still carries it.
--
-- Which slots. A lane's entries past its head can sit in any slot of the
-- queue ring (a producer that read the ledger before a rotation writes
-- the slot it read; relocation copies old entries into the current slot),
-- and a generic plan over ready_entries starts a scan of every partition,
-- which is most of the price of a claim of one job. So each lane carries
-- low_gen: every entry of the lane past its head is in a slot of
-- generation >= low_gen. When the call locks one lane whose low_gen is at
-- least the current generation - 1, it scans only the current slot and the
-- one before (`slot IN (..)` on two plain parameters: the executor prunes
-- the others when it starts), in a statement that also checks the ledger
-- has not moved since (a newer slot could hold positions below ones it
-- takes; if it moved, nothing is taken and the caller looks again at
-- once). Everything else takes the general statement over every slot.
-- low_gen only moves up, to ready_sealed.generation + 1, and only after a
-- statement that sees every entry those generations will ever hold (the
-- seal's promise) found none of the lane's past its head there; a new lane
-- starts at 0.
--
-- When neither candidate has settled (a long transaction is open
-- somewhere), a slow path reads pg_locks once: settled if no transaction
-- older than X holds this queue's producer lock (ready_append takes it
-- before drawing a position). Transactions that ended before that read are
-- visible to the statement that reads the rows, which starts after it. So
-- an unrelated long transaction, or a long producer of another queue, does
-- not hold this queue back. (Producers in prepared two-phase transactions
-- hold their locks without a backend and are not recognised: do not
-- enqueue inside PREPARE TRANSACTION.)
--
-- Plans that cannot degrade. Every read of ready_entries here asks for a
-- lane's entries past its head IN LANE ORDER with a LIMIT (`ORDER BY
-- e.lane_seq LIMIT n`), existence checks included: they ask for the
-- lane's first entry past its head, in a lateral subquery or as a scalar,
-- never as an `EXISTS`/`NOT EXISTS` directly over ready_entries, whose
-- LIMIT and ORDER BY the planner drops when it makes the check a semi- or
-- anti-join. Tombstones are probed per entry read, through their primary
-- key, by a scalar subquery (`(SELECT true FROM ready_tombstones t WHERE
-- <the entry's key>) IS NULL`), which the planner never turns into a
-- join: as a `NOT EXISTS` it became, once autovacuum had analyzed a slot
-- holding cancelled jobs, a hash anti-join over every tombstone of the
-- slot under a sort of the whole lane (2,121 pages to claim one job of a
-- backlog of 100,000 with one job in ten cancelled). (When the slots read
-- hold no tombstone at all, which one probe in the same statement, after
-- the lane lock, tells, no entry is probed.) With the ORDER BY and
-- nothing to join, the only plan that does not read the whole rest of the
-- lane before returning is the lane index walked from the head. Where the
-- lane spans slots (a merge of each slot's index), the probe sits in the
-- query above an `OFFSET 0` fence, which PostgreSQL never pushes a
-- condition through: pushed into each slot's scan, it made the merge find
-- each slot's first live entry before returning anything, stepping over
-- every tombstoned old copy relocation had left in a slot. Above the
-- fence the merged lane is read in order, and the probe and the LIMIT stop
-- it after what it takes. And the function runs with `enable_sort = off`:
-- a lane read from more than one slot is in lane order only as a merge of
-- the slots' index scans, and a generic plan, which cannot know how many
-- entries lie between the head and the frontier (it guesses a few
-- hundred), preferred appending the slots and sorting the result: every
-- waiting entry of the lane, sorted, to take one. Without the sort there
-- is no other way to produce lane order than the merge. (The sorts left,
-- of what a call already took, have no alternative and run regardless;
-- PostgreSQL 15 still charges each of them the disabled-node penalty of
-- 10^10, which would make every such plan pass jit_above_cost and compile
-- for 600 ms on each call in a session with JIT on, so the function also
-- runs with `jit = off`, as every session Awa opens does.)
-- So the
-- planner keeps to it whatever the statistics say: a generic plan
-- estimates `lane_seq > $head` at a third of the lane, and without the
-- ORDER BY it chose a bitmap scan (or a parallel sequential scan) of that
-- third for a one-row check, which made a claim's cost grow with the
-- backlog once the ring had been analyzed (issue 33: 49 ms per claim at a
-- backlog of 400,000). tests/maint/plan_bounds.rs holds every statement to
-- a buffer bound proportional to what it returns, after ANALYZE, over a
-- backlog of 100,000.
--
-- Bounds (SQLSTATE 22023): limit within awa_core::bounds::CLAIM_BATCH (1
-- to 1024); aging NULL (off) or within PRIORITY_AGING_STORED (1 ms to 30
-- days): a zero interval would divide by zero.
--
-- The take is three functions: ready_lock, ready_take_locked and
-- ready_lift (below), which ready_take calls in turn.

-- {schema}.ready_lock(queue, limit, cand_seq, cand_xid, aging): the first
-- half of a take, as described above: the bounds, the look for anything
-- visible past a lane head, the frontier and the lane locks. o_idle: there
-- is nothing to take, no xid was assigned and o_seq/o_xid are the caller's
-- candidate, to hand back. Otherwise the lanes it locked (ours until
-- commit: their heads as read are current), the frontier to read up to,
-- the frontier to return (o_seen: 0 when a lane was busy) and this call's
-- candidate. The second half, in the same transaction and after it (so
-- its statements' snapshots see every tombstone of the locked lanes), is
-- ready_take_locked, or the execution plane's claim, whose hot path (one
-- lane in the newest two slots) reads the lane by the same rules in the
-- statement that writes its claim batch; then ready_lift.
CREATE OR REPLACE FUNCTION {schema}.ready_lock(
    p_queue     text,
    p_limit     integer,
    p_cand_seq  bigint,
    p_cand_xid  xid8,
    p_aging     interval,
    OUT o_idle     boolean,
    OUT o_seq      bigint,
    OUT o_xid      xid8,
    OUT o_frontier bigint,
    OUT o_seen     bigint,
    OUT o_gen      bigint,
    OUT o_s1       integer,
    OUT o_s2       integer,
    OUT o_prios    smallint[],
    OUT o_shards   smallint[],
    OUT o_heads    bigint[],
    OUT o_lows     bigint[]
) LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan SET enable_sort = off SET jit = off AS $fn$
#variable_conflict use_column
DECLARE
    v_seq      bigint;
    v_xid      xid8;
    v_frontier bigint;
    v_seen     bigint;    -- the frontier as returned (see "Busy lanes")
    v_lanes    bigint;    -- the queue's lanes, as counted before locking
    v_pass     integer;
    v_timeout  text;      -- the caller's lock_timeout
    v_prios    smallint[];
    v_shards   smallint[];
    v_heads    bigint[];
    v_lows     bigint[];
    v_gen      bigint;    -- the current queue-ring generation
    v_s1       integer;   -- its slot
    v_s2       integer;   -- the previous generation's slot (v_s1 when none)
    v_fast     boolean;   -- every lane of the queue scans v_s1 and v_s2 only
BEGIN
    IF p_limit IS NULL OR p_limit NOT BETWEEN 1 AND 1024 THEN
        RAISE EXCEPTION 'claim limit must be 1 to 1024 (got %)', coalesce(p_limit::text, 'NULL')
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'Claim at most a claim batch (awa_core::bounds::CLAIM_BATCH) per call.';
    END IF;
    IF p_aging NOT BETWEEN interval '1 millisecond' AND interval '30 days' THEN
        RAISE EXCEPTION 'priority aging must be 1ms to 30days, or NULL for none (got %)', p_aging
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'A waiting job gains one priority step per this interval (awa queue configure --priority-aging).';
    END IF;
    SELECT s.last_value,
           (SELECT l.generation FROM {schema}.ring_ledger l
             WHERE l.ring = 'queue' ORDER BY l.generation DESC LIMIT 1),
           (SELECT l.slot FROM {schema}.ring_ledger l
             WHERE l.ring = 'queue' ORDER BY l.generation DESC LIMIT 1),
           (SELECT l.slot FROM {schema}.ring_ledger l
             WHERE l.ring = 'queue' ORDER BY l.generation DESC OFFSET 1 LIMIT 1)
      INTO v_seq, v_gen, v_s1, v_s2
      FROM {schema}.ready_seq s;
    v_s2 := coalesce(v_s2, v_s1);
    -- (The lanes counted here, before any is locked, tell the lock below
    -- whether it skipped one: "Busy lanes".)
    SELECT coalesce(bool_and(h.low_gen >= v_gen - 1), false), count(*) INTO v_fast, v_lanes
      FROM {schema}.lane_heads h WHERE h.queue = p_queue;
    -- Nothing visible past any lane head: return at once, keeping the old
    -- candidate. No xid is assigned, so an idle poll commits nothing (no
    -- WAL flush). With every lane fast, only the newest two slots are
    -- looked at, and anything this statement cannot vouch for counts as
    -- work: a ledger that moved since, or a lane that is not fast (new
    -- since).
    IF v_fast THEN
        IF NOT EXISTS (
                SELECT 1
                  FROM {schema}.lane_heads h
                 CROSS JOIN LATERAL (
                        SELECT 1 FROM {schema}.ready_entries e
                         WHERE e.slot IN (v_s1, v_s2)
                           AND e.queue = h.queue AND e.priority = h.priority AND e.shard = h.shard
                           AND e.lane_seq > h.head_seq
                         ORDER BY e.lane_seq LIMIT 1) w
                 WHERE h.queue = p_queue)
           AND NOT EXISTS (SELECT 1 FROM {schema}.lane_heads h
                            WHERE h.queue = p_queue AND h.low_gen < v_gen - 1)
           AND v_gen = (SELECT l.generation FROM {schema}.ring_ledger l
                         WHERE l.ring = 'queue' ORDER BY l.generation DESC LIMIT 1) THEN
            o_idle := true;
            o_seq := p_cand_seq;
            o_xid := p_cand_xid;
            RETURN;
        END IF;
    ELSIF NOT EXISTS (
            SELECT 1
              FROM {schema}.lane_heads h
             CROSS JOIN LATERAL (
                    SELECT 1 FROM {schema}.ready_entries e
                     WHERE e.queue = h.queue AND e.priority = h.priority AND e.shard = h.shard
                       AND e.lane_seq > h.head_seq
                     ORDER BY e.lane_seq LIMIT 1) w
             WHERE h.queue = p_queue) THEN
        o_idle := true;
        o_seq := p_cand_seq;
        o_xid := p_cand_xid;
        RETURN;
    END IF;
    v_xid := pg_current_xact_id();

    IF pg_snapshot_xmin(pg_current_snapshot()) >= v_xid THEN
        v_frontier := v_seq;
    ELSIF p_cand_xid IS NOT NULL AND pg_snapshot_xmin(pg_current_snapshot()) >= p_cand_xid THEN
        v_frontier := least(p_cand_seq, v_seq);
    ELSIF NOT EXISTS (
            SELECT 1
              FROM pg_locks a
              JOIN pg_locks t ON t.pid = a.pid
             WHERE a.locktype = 'advisory' AND a.classid = 6387554
               AND a.objid = hashtext(p_queue)::oid AND a.objsubid = 2 AND a.granted
               AND a.database = (SELECT d.oid FROM pg_database d WHERE d.datname = current_database())
               AND a.pid <> pg_backend_pid()
               AND t.locktype = 'transactionid' AND t.mode = 'ExclusiveLock' AND t.granted
               AND age(t.transactionid) > age(v_xid::xid)) THEN
        v_frontier := v_seq;
    ELSE
        v_frontier := 0;
    END IF;

    -- Lock the lanes in a statement of their own, BEFORE the statement that
    -- reads entries and tombstones. A canceller (ready_tombstone) holds the
    -- lane lock while it writes a tombstone, so every tombstone of a locked
    -- lane committed before we got the lock, and the next statement's
    -- snapshot sees it. Reading the tombstones in the locking statement
    -- itself used a snapshot older than the lock and handed out jobs that
    -- had just been cancelled (claimed and cancelled at once, their unique
    -- key released while they ran).
    FOR v_pass IN 1..2 LOOP
        SELECT coalesce(array_agg(l.priority), '{}'), coalesce(array_agg(l.shard), '{}'),
               coalesce(array_agg(l.head_seq), '{}'), coalesce(array_agg(l.low_gen), '{}')
          INTO v_prios, v_shards, v_heads, v_lows
          FROM (SELECT h.priority, h.shard, h.head_seq, h.low_gen
                  FROM {schema}.lane_heads h
                 WHERE h.queue = p_queue
                 ORDER BY h.priority, h.shard
                   FOR UPDATE SKIP LOCKED) l;
        EXIT WHEN cardinality(v_prios) > 0 OR v_lanes = 0 OR v_pass = 2;
        -- Every lane busy: almost always another worker's claim of this
        -- queue, which holds them all for its few milliseconds. Queue up
        -- behind it for the first lane (briefly: a lane can also be held
        -- by a cancel inside someone's long transaction), then lock what
        -- is free again. Claims of one queue then follow each other
        -- through the lock queue instead of coming back empty and trying
        -- again; with eight workers on a backlog, most claims did.
        BEGIN
            v_timeout := current_setting('lock_timeout');
            PERFORM set_config('lock_timeout', '50ms', true);
            PERFORM 1 FROM {schema}.lane_heads h
              WHERE h.queue = p_queue
              ORDER BY h.priority, h.shard LIMIT 1
                FOR UPDATE;
            PERFORM set_config('lock_timeout', v_timeout, true);
        EXCEPTION WHEN lock_not_available THEN
            -- Still held: reported busy below. (The subtransaction's
            -- rollback restored lock_timeout.)
            EXIT;
        END;
    END LOOP;
    -- Busy lanes: a lane another transaction holds (a concurrent claim,
    -- usually another worker's; a cancel or relocation of it) was skipped,
    -- so what this call takes says nothing about that lane: work may wait
    -- there the moment the holder commits. The frontier is then returned
    -- as 0, as when the ledger moved, so the caller looks again shortly
    -- instead of idling until a notification that a standing backlog never
    -- sends (with several workers on one queue, the loser of every
    -- overlapping claim idled a poll interval). v_frontier itself still
    -- bounds what is read and where heads move. (Lanes are never deleted;
    -- one made between the count and the lock can hide a busy lane from
    -- this comparison once, and the producer that made it notifies.)
    v_seen := CASE WHEN cardinality(v_prios) < v_lanes THEN 0 ELSE v_frontier END;
    o_idle := false;
    o_seq := v_seq;
    o_xid := v_xid;
    o_frontier := v_frontier;
    o_seen := v_seen;
    o_gen := v_gen;
    o_s1 := v_s1;
    o_s2 := v_s2;
    o_prios := v_prios;
    o_shards := v_shards;
    o_heads := v_heads;
    o_lows := v_lows;
END
$fn$;

-- {schema}.ready_lift(queue, prios, shards, taken, limit): after a take of
-- `taken` (asked for `limit`) from lanes of a queue (ready_lock locked
-- them), move their low_gen up where ready_sealed allows, so the next
-- claims of these lanes scan the newest two slots only. Worth it once per
-- lane and rotation: callers call it only when some lane's low_gen is
-- behind the generation ready_lock read. It reads the ledger, the seal
-- and the lanes' low_gen itself, and moves a low_gen only past
-- generations its own statement finds empty past the lane's head, so no
-- argument can make it strand an entry.
CREATE OR REPLACE FUNCTION {schema}.ready_lift(
    p_queue  text,
    p_prios  smallint[],
    p_shards smallint[],
    p_taken  integer,
    p_limit  integer
) RETURNS void LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan AS $fn$
#variable_conflict use_column
DECLARE
    v_sealed bigint;
    v_gen    bigint;
    v_s2     integer;
    v_lows   bigint[];
    v_prios  smallint[] := p_prios;
    v_shards smallint[] := p_shards;
    v_taken  integer := p_taken;
BEGIN
    SELECT (SELECT l.generation FROM {schema}.ring_ledger l
             WHERE l.ring = 'queue' ORDER BY l.generation DESC LIMIT 1),
           coalesce((SELECT l.slot FROM {schema}.ring_ledger l
                      WHERE l.ring = 'queue' ORDER BY l.generation DESC OFFSET 1 LIMIT 1),
                    (SELECT l.slot FROM {schema}.ring_ledger l
                      WHERE l.ring = 'queue' ORDER BY l.generation DESC LIMIT 1)),
           (SELECT array_agg(h.low_gen ORDER BY k.ord)
              FROM unnest(v_prios, v_shards) WITH ORDINALITY AS k(priority, shard, ord)
              JOIN {schema}.lane_heads h
                ON h.queue = p_queue AND h.priority = k.priority AND h.shard = k.shard)
      INTO v_gen, v_s2, v_lows;
    IF cardinality(v_lows) IS DISTINCT FROM cardinality(v_prios) OR NOT v_gen > ANY (v_lows) THEN
        RETURN;
    END IF;
    SELECT z.generation INTO v_sealed FROM {schema}.ready_sealed z;
    IF cardinality(v_prios) = 1 AND v_lows[1] = v_gen - 1 AND v_sealed = v_gen - 1 THEN
        -- The usual case after a rotation: the lane's entries past its
        -- head were all in the newest two slots; the older of them is
        -- sealed now. One slot to look at.
        UPDATE {schema}.lane_heads h
           SET low_gen = v_gen
         WHERE h.queue = p_queue AND h.priority = v_prios[1] AND h.shard = v_shards[1]
           AND h.low_gen = v_gen - 1
           AND (SELECT e.lane_seq FROM {schema}.ready_entries e
                 WHERE e.slot = v_s2
                   AND e.queue = h.queue AND e.priority = h.priority AND e.shard = h.shard
                   AND e.lane_seq > h.head_seq
                 ORDER BY e.lane_seq LIMIT 1) IS NULL;
    ELSIF v_taken < p_limit AND v_sealed >= (SELECT min(x) FROM unnest(v_lows) AS x) THEN
        -- A lane further behind (new, or after a backlog): look at
        -- every slot of the generations from its low_gen to the seal.
        -- The seal promises nothing more will be written there, and
        -- this statement sees everything that was (it runs after the
        -- seal was read). Tombstoned entries count as present.
        UPDATE {schema}.lane_heads h
           SET low_gen = v_sealed + 1
          FROM unnest(v_prios, v_shards) AS k(priority, shard)
         WHERE h.queue = p_queue AND h.priority = k.priority AND h.shard = k.shard
           AND h.low_gen <= v_sealed
           AND (SELECT e.lane_seq FROM {schema}.ready_entries e
                 WHERE e.queue = h.queue AND e.priority = h.priority AND e.shard = h.shard
                   AND e.lane_seq > h.head_seq
                   AND e.slot = ANY (ARRAY(
                         SELECT l.slot FROM {schema}.ring_ledger l
                          WHERE l.ring = 'queue'
                            AND l.generation BETWEEN h.low_gen AND v_sealed))
                 ORDER BY e.lane_seq LIMIT 1) IS NULL;
    END IF;
END
$fn$;

-- {schema}.ready_take_locked(queue, limit, aging, <ready_lock's lanes>):
-- the second half of a take: read the lanes ready_lock locked, in this
-- transaction, up to its frontier, move their heads past what is taken
-- (ready_lift after), and return the rows as ready_take does. Only valid
-- right after ready_lock, with what it returned.
CREATE OR REPLACE FUNCTION {schema}.ready_take_locked(
    p_queue     text,
    p_limit     integer,
    p_aging     interval,
    p_seq       bigint,
    p_xid       xid8,
    p_frontier  bigint,
    p_seen      bigint,
    p_gen       bigint,
    p_s1        integer,
    p_s2        integer,
    p_prios     smallint[],
    p_shards    smallint[],
    p_heads     bigint[],
    p_lows      bigint[]
) RETURNS TABLE (
    job_id bigint, slot integer, lane_seq bigint, kind text, args jsonb,
    priority smallint, attempt integer, max_attempts integer, run_lease bigint,
    created_at timestamptz, ready_at timestamptz, unique_key text, metadata jsonb,
    frontier bigint, next_seq bigint, next_xid xid8, shard smallint
) LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan SET enable_sort = off SET jit = off AS $fn$
#variable_conflict use_column
DECLARE
    v_seq      bigint := p_seq;
    v_xid      xid8 := p_xid;
    v_frontier bigint := p_frontier;
    v_seen     bigint := p_seen;
    v_prios    smallint[] := p_prios;
    v_shards   smallint[] := p_shards;
    v_heads    bigint[] := p_heads;
    v_lows     bigint[] := p_lows;
    v_gen      bigint := p_gen;
    v_s1       integer := p_s1;
    v_s2       integer := p_s2;
    v_taken    integer;
BEGIN
    IF p_limit IS NULL OR p_limit NOT BETWEEN 1 AND 1024 THEN
        RAISE EXCEPTION 'claim limit must be 1 to 1024 (got %)', coalesce(p_limit::text, 'NULL')
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'Claim at most a claim batch (awa_core::bounds::CLAIM_BATCH) per call.';
    END IF;
    IF p_aging NOT BETWEEN interval '1 millisecond' AND interval '30 days' THEN
        RAISE EXCEPTION 'priority aging must be 1ms to 30days, or NULL for none (got %)', p_aging
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'A waiting job gains one priority step per this interval (awa queue configure --priority-aging).';
    END IF;

    IF cardinality(v_prios) = 1 AND v_lows[1] >= v_gen - 1 THEN
        -- One lane, all of it in the newest two slots. Its head read
        -- above is current (the lane is ours until commit). One lane has
        -- one priority, so aging changes nothing: lane order is the order.
        RETURN QUERY
        WITH fresh AS MATERIALIZED (
            -- The ledger as this statement sees it: no newer slot than v_s1.
            SELECT l.generation = v_gen AS ok
              FROM {schema}.ring_ledger l
             WHERE l.ring = 'queue' ORDER BY l.generation DESC LIMIT 1
        ),
        -- Whether the two slots hold any tombstone at all (one probe of
        -- their primary keys, read after the lane lock like the probes
        -- below): without one, no entry is probed (a probe per entry,
        -- partitions pruned at each, was a tenth of a claim).
        tombs AS MATERIALIZED (
            SELECT EXISTS (SELECT 1 FROM {schema}.ready_tombstones t
                            WHERE t.slot IN (v_s1, v_s2)) AS any
        ),
        cand AS MATERIALIZED (
            -- Live entries only (see "Tombstoned entries" above), probed
            -- one by one as the lane is read in order (see "Plans that
            -- cannot degrade": the probe sits above the OFFSET 0 fence).
            SELECT x.*
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
                           AND t.slot = x.slot AND t.job_id = x.job_id AND t.lane_seq = x.lane_seq) IS NULL)
             LIMIT p_limit
        ),
        ranked AS (
            SELECT c.*, row_number() OVER w AS rn,
                   sum(pg_column_size(c.args) + coalesce(pg_column_size(c.metadata), 0)) OVER w AS bytes
              FROM cand c
            WINDOW w AS (ORDER BY c.lane_seq ROWS UNBOUNDED PRECEDING)
        ),
        -- Bounded by count (the LIMIT) and bytes, as the general statement:
        -- what is taken is a prefix of the lane. The head moves past
        -- exactly it when something was left, to the frontier when the
        -- lane is exhausted (fewer live entries than the limit), and past
        -- the last entry read otherwise. Not when the ledger moved: then
        -- nothing was read.
        chosen AS (
            SELECT r.*, r.rn = 1 OR r.bytes <= 8388608 AS take FROM ranked r
        ),
        moved AS (
            UPDATE {schema}.lane_heads h
               SET head_seq = n.head
              FROM (SELECT CASE
                             WHEN EXISTS (SELECT 1 FROM chosen x WHERE NOT x.take)
                                 THEN (SELECT max(x.lane_seq) FROM chosen x WHERE x.take)
                             WHEN (SELECT count(*) FROM cand c) < p_limit THEN v_frontier
                             ELSE (SELECT max(c.lane_seq) FROM cand c)
                           END AS head) n
             WHERE h.queue = p_queue AND h.priority = v_prios[1] AND h.shard = v_shards[1]
               AND n.head > h.head_seq
               AND (SELECT f.ok FROM fresh f)
            RETURNING 1
        )
        SELECT r.job_id, r.slot, r.lane_seq, r.kind, r.args, r.priority, r.attempt,
               r.max_attempts, r.run_lease, r.created_at, r.ready_at, r.unique_key, r.metadata,
               v_seen, v_seq, v_xid, r.shard
          FROM chosen r
         WHERE r.take
         ORDER BY r.rn;
        GET DIAGNOSTICS v_taken = ROW_COUNT;
        IF v_taken = 0 AND v_gen <> (SELECT l.generation FROM {schema}.ring_ledger l
                                      WHERE l.ring = 'queue' ORDER BY l.generation DESC LIMIT 1) THEN
            -- The ledger moved: nothing was taken; look again at once.
            v_seen := 0;
        END IF;
    ELSE
    RETURN QUERY
    WITH frontier AS (
        SELECT v_frontier AS seq
    ),
    lanes AS MATERIALIZED (
        -- Ours until commit: head_seq read here is current.
        SELECT h.priority, h.shard, h.head_seq
          FROM {schema}.lane_heads h
          JOIN unnest(v_prios, v_shards) AS k(priority, shard)
            ON k.priority = h.priority AND k.shard = h.shard
         WHERE h.queue = p_queue
    ),
    tombs AS MATERIALIZED (
        -- Whether any tombstone exists (as in the one-lane statement:
        -- without one, no entry is probed).
        SELECT EXISTS (SELECT 1 FROM {schema}.ready_tombstones t) AS any
    ),
    cand AS MATERIALIZED (
        -- Live entries only, up to the limit per lane. A job moved by
        -- ready_relocate has two entries with one lane_seq, the tombstoned
        -- old copy and the live new one; only the live one is read.
        SELECT r.*
          FROM lanes l
         CROSS JOIN frontier f
         CROSS JOIN LATERAL (
                SELECT x.*
                  FROM (SELECT e.slot, e.lane_seq, e.job_id, e.kind, e.args, e.priority, e.shard,
                               e.attempt, e.max_attempts, e.run_lease, e.created_at, e.ready_at,
                               e.unique_key, e.metadata
                          FROM {schema}.ready_entries e
                         WHERE e.queue = p_queue AND e.priority = l.priority AND e.shard = l.shard
                           AND e.lane_seq > l.head_seq AND e.lane_seq <= f.seq
                         ORDER BY e.lane_seq
                        OFFSET 0) x
                 WHERE (NOT (SELECT b.any FROM tombs b)
                        OR (SELECT true FROM {schema}.ready_tombstones t
                             WHERE t.slot = x.slot AND t.job_id = x.job_id AND t.lane_seq = x.lane_seq) IS NULL)
                 LIMIT p_limit) r
    ),
    aged AS (
        SELECT c.*,
               max(c.priority - CASE WHEN p_aging IS NULL OR p_aging <= interval '0' THEN 0
                                     ELSE floor(extract(epoch FROM now() - c.ready_at)
                                                / extract(epoch FROM p_aging)) END)
                   OVER (PARTITION BY c.priority, c.shard ORDER BY c.lane_seq) AS effective
          FROM cand c
    ),
    ranked AS (
        SELECT a.*, row_number() OVER w AS rn,
               -- Bytes handed out so far, this job included (as stored).
               sum(pg_column_size(a.args) + coalesce(pg_column_size(a.metadata), 0)) OVER w AS bytes
          FROM aged a
        WINDOW w AS (ORDER BY a.effective, a.lane_seq ROWS UNBOUNDED PRECEDING)
    ),
    -- A batch is bounded by count and by bytes (8 MiB; the first job is
    -- always taken, whatever its size). Both bounds cut ranked order, so
    -- what is taken is still a prefix of it and, per lane, a prefix of the
    -- lane: the heads below move past exactly what is taken.
    chosen AS (
        SELECT r.*, r.rn <= p_limit AND (r.rn = 1 OR r.bytes <= 8388608) AS take
          FROM ranked r
    ),
    first_left AS (
        SELECT r.priority, r.shard, min(r.lane_seq) AS seq
          FROM chosen r WHERE NOT r.take
         GROUP BY r.priority, r.shard
    ),
    -- Per locked lane: past what was taken when something was left; to
    -- the frontier when the lane is exhausted (fewer live entries than the
    -- limit, none at all included); else past the last entry read.
    per_lane AS (
        SELECT l.priority, l.shard, count(c.lane_seq) AS n, max(c.lane_seq) AS last_seq,
               max(c.lane_seq) FILTER (WHERE fl.seq IS NOT NULL AND c.lane_seq < fl.seq) AS before_left,
               bool_or(fl.seq IS NOT NULL) AS cut
          FROM lanes l
          LEFT JOIN cand c ON c.priority = l.priority AND c.shard = l.shard
          LEFT JOIN first_left fl ON fl.priority = l.priority AND fl.shard = l.shard
         GROUP BY l.priority, l.shard
    ),
    new_heads AS (
        SELECT p.priority, p.shard,
               CASE WHEN p.cut THEN p.before_left
                    WHEN p.n < p_limit THEN v_frontier
                    ELSE p.last_seq END AS head
          FROM per_lane p
    ),
    moved AS (
        UPDATE {schema}.lane_heads h
           SET head_seq = n.head
          FROM new_heads n
         WHERE h.queue = p_queue AND h.priority = n.priority AND h.shard = n.shard
           AND n.head > h.head_seq
        RETURNING 1
    ),
    taken AS (
        SELECT r.job_id, r.slot, r.lane_seq, r.kind, r.args, r.priority, r.attempt,
               r.max_attempts, r.run_lease, r.created_at, r.ready_at, r.unique_key,
               r.metadata, r.rn, r.shard
          FROM chosen r WHERE r.take
    )
    SELECT t.job_id, t.slot, t.lane_seq, t.kind, t.args, t.priority, t.attempt,
           t.max_attempts, t.run_lease, t.created_at, t.ready_at, t.unique_key, t.metadata,
           v_seen, v_seq, v_xid, t.shard
      FROM taken t
     ORDER BY t.rn;
    -- (moved, a data-modifying CTE, runs to completion although unread.)
    GET DIAGNOSTICS v_taken = ROW_COUNT;
    END IF;

    IF v_gen > ANY (v_lows) THEN
        PERFORM {schema}.ready_lift(p_queue, v_prios, v_shards, v_taken, p_limit);
    END IF;

    IF v_taken = 0 THEN
        RETURN QUERY SELECT NULL::bigint, NULL::integer, NULL::bigint, NULL::text, NULL::jsonb,
                            NULL::smallint, NULL::integer, NULL::integer, NULL::bigint,
                            NULL::timestamptz, NULL::timestamptz, NULL::text, NULL::jsonb,
                            v_seen, v_seq, v_xid, NULL::smallint;
    END IF;
END
$fn$;

CREATE OR REPLACE FUNCTION {schema}.ready_take(
    p_queue     text,
    p_limit     integer,
    p_cand_seq  bigint,
    p_cand_xid  xid8,
    p_aging     interval
) RETURNS TABLE (
    job_id bigint, slot integer, lane_seq bigint, kind text, args jsonb,
    priority smallint, attempt integer, max_attempts integer, run_lease bigint,
    created_at timestamptz, ready_at timestamptz, unique_key text, metadata jsonb,
    frontier bigint, next_seq bigint, next_xid xid8, shard smallint
) LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan AS $fn$
#variable_conflict use_column
DECLARE
    v record;
BEGIN
    SELECT * INTO v FROM {schema}.ready_lock(p_queue, p_limit, p_cand_seq, p_cand_xid, p_aging);
    IF v.o_idle THEN
        RETURN QUERY SELECT NULL::bigint, NULL::integer, NULL::bigint, NULL::text, NULL::jsonb,
                            NULL::smallint, NULL::integer, NULL::integer, NULL::bigint,
                            NULL::timestamptz, NULL::timestamptz, NULL::text, NULL::jsonb,
                            NULL::bigint, p_cand_seq, p_cand_xid, NULL::smallint;
        RETURN;
    END IF;
    RETURN QUERY
    SELECT * FROM {schema}.ready_take_locked(p_queue, p_limit, p_aging, v.o_seq, v.o_xid,
                                             v.o_frontier, v.o_seen, v.o_gen, v.o_s1, v.o_s2,
                                             v.o_prios, v.o_shards, v.o_heads, v.o_lows);
END
$fn$;
$awa_template$)
ON CONFLICT (name) DO UPDATE SET ord = EXCLUDED.ord, body = EXCLUDED.body;

-- Refresh every substrate after the step's changes (appended to each step by
-- `cargo xtask migration draft`): re-run the installer on each substrate
-- with its own shape, which creates the tables a changed installer added,
-- re-instantiates every runtime function template and revokes PUBLIC's
-- EXECUTE again; then give every role that was granted the runtime matrix
-- on a substrate (it holds USAGE there) the matrix as it is now, so new
-- tables and functions are covered without an operator step.
-- The installers' "already exists, skipping" notices are noise here.
SET LOCAL client_min_messages = warning;
DO $refresh$
DECLARE
    s record;
    r record;
BEGIN
    FOR s IN SELECT n.nspname AS schema_name
               FROM pg_catalog.pg_class c
               JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
              WHERE c.relname = 'substrate_info' AND c.relkind = 'r'
              ORDER BY n.nspname <> 'awa', n.nspname LOOP
        EXECUTE format('SELECT awa.install_queue_storage_substrate(%L, queue_slot_count, lease_slot_count, claim_slot_count) FROM %I.substrate_info',
                       s.schema_name, s.schema_name);
    END LOOP;
    FOR r IN SELECT DISTINCT ro.rolname AS role_name, n.nspname AS schema_name
               FROM pg_catalog.pg_namespace n
               CROSS JOIN LATERAL pg_catalog.aclexplode(n.nspacl) a
               JOIN pg_catalog.pg_roles ro ON ro.oid = a.grantee
              WHERE a.privilege_type = 'USAGE'
                AND a.grantee <> n.nspowner
                AND EXISTS (SELECT 1 FROM pg_catalog.pg_class c
                             WHERE c.relnamespace = n.oid AND c.relname = 'substrate_info' AND c.relkind = 'r')
              ORDER BY 1, 2 LOOP
        PERFORM awa.grant_runtime_role(r.role_name, r.schema_name);
    END LOOP;
END
$refresh$;
