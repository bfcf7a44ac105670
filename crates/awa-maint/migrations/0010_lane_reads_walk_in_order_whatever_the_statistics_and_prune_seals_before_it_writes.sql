-- Awa migration 10: lane reads walk in order whatever the statistics and prune seals before it writes
--
-- Drafted by `cargo xtask migration draft` (hand-written parts first, then
-- what the sources define), then reviewed. Frozen once on main: never edit
-- it, add a new step. Runs once, in one transaction, as the migrator.

-- Runtime function templates, as the sources define them.
INSERT INTO awa.substrate_functions (name, ord, body) VALUES ('ready_seal', 2, $awa_template$-- {schema}.ready_seal(): move ready_sealed forward, in two steps a pass
-- or more apart. Returns the sealed generation. Called by ring_prune and
-- ring_rotate for the queue ring, so on every pass of the leader's prune
-- task (every second by default).
--
-- The promise of ready_sealed.generation = S: no entry will ever be added
-- to a queue-ring slot of generation <= S, and every entry there is
-- committed or gone (visible to any snapshot that sees the seal).
-- ready_take builds on it (lane_heads.low_gen), so both steps are proofs:
--
-- 1. Propose S = G - 1 for the newest generation G such that no snapshot
--    in use predates the rotation onto G. Every writer of ready_entries
--    (ready_append, call_enqueue_append, ready_relocate)
--    reads its slot from the ledger and inserts into it within one
--    top-level statement, whose snapshot stays registered, and so in
--    pg_stat_activity.backend_xmin, until the statement ends. A writer that
--    can still insert into a slot of generation G - 1 or older read the
--    ledger with a snapshot that does not see the rotation onto G: taken
--    before it committed, so with an xmin at or below its xid (the ledger
--    row's xmin). When no backend of this database shows such an xmin,
--    every such writer has finished inserting, and holds the transaction id
--    it wrote with. The proposal records this transaction's own id,
--    assigned after that check, as the fence: every such writer's id is
--    below it. (Not a snapshot's xmax: that is the latest completed id
--    + 1, and a writer's id, assigned but not completed, can be above it.)
-- 2. A later call makes the proposal the seal once no transaction below
--    that id is running: the writers have committed or aborted.
--
-- Proposals are made only under READ COMMITTED (the fence needs a fresh
-- snapshot). Other roles' snapshots are only visible with
-- pg_read_all_stats; without it nothing is proposed (claims then scan every slot, as they always
-- could). Sealers racing (a second pruner) never wait for each other: the
-- seal only moves up, each proposal is proven on its own, and a sealer
-- that finds the row locked by another leaves the step to it (SKIP LOCKED),
-- so a prune never queues behind another pruner's open transaction here.
CREATE OR REPLACE FUNCTION {schema}.ready_seal()
RETURNS bigint LANGUAGE plpgsql AS $fn$
DECLARE
    v_sealed bigint;
    v_pgen   bigint;
    v_pxid   xid8;
    v_gen    bigint;
    v_xid    xid;
BEGIN
    SELECT z.generation, z.pending_generation, z.pending_xid
      INTO v_sealed, v_pgen, v_pxid
      FROM {schema}.ready_sealed z;
    IF v_pxid IS NOT NULL THEN
        IF pg_snapshot_xmin(pg_current_snapshot()) < v_pxid THEN
            -- A proposal waits for its writers to end.
            RETURN v_sealed;
        END IF;
        -- SKIP LOCKED: a racing sealer holds the row and does the same.
        UPDATE {schema}.ready_sealed z
           SET generation = greatest(z.generation, v_pgen), sealed_at = now(),
               pending_generation = NULL, pending_xid = NULL
         WHERE z.singleton IN (SELECT s.singleton FROM {schema}.ready_sealed s
                                WHERE s.pending_xid = v_pxid
                                  FOR UPDATE SKIP LOCKED);
        IF FOUND THEN
            v_sealed := greatest(v_sealed, v_pgen);
        END IF;
    END IF;

    -- Proposals only under READ COMMITTED, where every statement below
    -- reads the ledger and the fence afresh (a REPEATABLE READ snapshot
    -- may predate what the check saw). Sealing a proposal above is safe at
    -- any level: an older snapshot only makes it wait.
    IF current_setting('transaction_isolation') <> 'read committed' THEN
        RETURN v_sealed;
    END IF;
    -- The fence is this transaction's id, which must be assigned after the
    -- check below; a transaction that already has one (it wrote something,
    -- the seal above included) leaves proposing to a later call.
    IF pg_current_xact_id_if_assigned() IS NOT NULL THEN
        RETURN v_sealed;
    END IF;
    IF NOT (pg_has_role('pg_read_all_stats', 'MEMBER')
            OR (SELECT r.rolsuper FROM pg_roles r WHERE r.rolname = current_user)) THEN
        RETURN v_sealed;
    END IF;
    -- pg_stat_activity is read once per transaction and kept: a caller
    -- (ring_prune) may have read it before the ledger rows below were
    -- committed. Read it afresh, after them.
    PERFORM pg_stat_clear_snapshot();
    -- Newest generation first: proposing G - 1 covers everything older.
    -- Only committed rotations count: until the rotation onto G commits,
    -- new snapshots do not see it, so no check can rule out writers of
    -- G - 1 (a ledger row this transaction wrote is visible here first).
    FOR v_gen, v_xid IN
        SELECT l.generation, l.xmin
          FROM {schema}.ring_ledger l
         WHERE l.ring = 'queue' AND l.generation > v_sealed + 1
           AND l.xmin IS DISTINCT FROM xid(pg_current_xact_id_if_assigned())
         ORDER BY l.generation DESC
         LIMIT 2
    LOOP
        IF NOT EXISTS (
                SELECT 1 FROM pg_stat_activity a
                 WHERE a.datname = current_database()
                   AND a.pid <> pg_backend_pid()
                   AND a.backend_xmin IS NOT NULL
                   AND age(a.backend_xmin) >= age(v_xid)) THEN
            -- The fence: this transaction's id, assigned here (it had
            -- none, see above), so after the check.
            -- SKIP LOCKED: a racing sealer's proposal (or seal) holds the
            -- row; waiting for it would only make this one moot. The row
            -- lock assigns the id, after the check all the same.
            UPDATE {schema}.ready_sealed z
               SET pending_generation = v_gen - 1,
                   pending_xid = pg_current_xact_id()
             WHERE z.singleton IN (SELECT s.singleton FROM {schema}.ready_sealed s
                                    WHERE s.pending_xid IS NULL AND s.generation < v_gen - 1
                                      FOR UPDATE SKIP LOCKED);
            RETURN v_sealed;
        END IF;
    END LOOP;
    RETURN v_sealed;
END
$fn$;
$awa_template$)
ON CONFLICT (name) DO UPDATE SET ord = EXCLUDED.ord, body = EXCLUDED.body;
INSERT INTO awa.substrate_functions (name, ord, body) VALUES ('ready_slot_live', 10, $awa_template$-- {schema}.ready_slot_live(slot): why queue-ring slot `slot` still holds
-- runnable work, or NULL when it holds none: every entry is past its lane
-- head or tombstoned. Used by ring_prune before and after locking the slot.
-- A slot that is not one of the queue ring's is refused (22023).
CREATE OR REPLACE FUNCTION {schema}.ready_slot_live(p_slot integer)
RETURNS text LANGUAGE plpgsql STABLE AS $fn$
BEGIN
    -- A slot of this ring (ring_slot_count refuses an unknown ring).
    IF p_slot IS NULL OR p_slot NOT BETWEEN 0 AND {schema}.ring_slot_count('queue') - 1 THEN
        RAISE EXCEPTION 'slot % is not a slot of the % ring', coalesce(p_slot::text, 'NULL'), 'queue'
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'Slots are numbered from 0 to the ring''s slot count - 1 (substrate_info).';
    END IF;
    -- Lane by lane, the lane's first live entry past its head in this
    -- slot, in lane order (see ready_take, "Plans that cannot degrade"): a
    -- join of the slot's entries with the heads, which the planner made a
    -- scan of the whole slot once it had statistics, read every entry
    -- already claimed before finding a waiting one, on every prune pass
    -- of a slot that still held a backlog. This reads one index range per
    -- lane, plus the tombstoned entries at its head.
    RETURN (
        SELECT 'job ' || w.job_id || ' is still waiting to be claimed'
          FROM {schema}.lane_heads h
         CROSS JOIN LATERAL (
                SELECT e.job_id
                  FROM {schema}.ready_entries e
                 WHERE e.slot = p_slot
                   AND e.queue = h.queue AND e.priority = h.priority AND e.shard = h.shard
                   AND e.lane_seq > h.head_seq
                   AND NOT EXISTS (SELECT 1 FROM {schema}.ready_tombstones t
                                    WHERE t.slot = e.slot AND t.job_id = e.job_id
                                      AND t.lane_seq = e.lane_seq)
                 ORDER BY e.lane_seq
                 LIMIT 1) w
         LIMIT 1);
END
$fn$;
$awa_template$)
ON CONFLICT (name) DO UPDATE SET ord = EXCLUDED.ord, body = EXCLUDED.body;
INSERT INTO awa.substrate_functions (name, ord, body) VALUES ('ready_take', 1, $awa_template$-- {schema}.ready_take(queue, limit, cand_seq, cand_xid, aging): take up to
-- `limit` runnable jobs of a queue, and at most 8 MiB of args + metadata
-- (stored size; at least one job), in order, advancing the lane heads past
-- them. Called only from the execution plane's claim, in the same call
-- (transaction) that writes the claim batch.
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
-- anti-join. (Tombstones are probed per entry read, through their primary
-- key, by an anti-join under the same ORDER BY and LIMIT.) With
-- the ORDER BY, the only plan that does not read the whole rest of the
-- lane before returning is the lane index walked from the head, so the
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
    v_taken    integer;
    v_sealed   bigint;
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
            RETURN QUERY SELECT NULL::bigint, NULL::integer, NULL::bigint, NULL::text, NULL::jsonb,
                                NULL::smallint, NULL::integer, NULL::integer, NULL::bigint,
                                NULL::timestamptz, NULL::timestamptz, NULL::text, NULL::jsonb,
                                NULL::bigint, p_cand_seq, p_cand_xid, NULL::smallint;
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
        RETURN QUERY SELECT NULL::bigint, NULL::integer, NULL::bigint, NULL::text, NULL::jsonb,
                            NULL::smallint, NULL::integer, NULL::integer, NULL::bigint,
                            NULL::timestamptz, NULL::timestamptz, NULL::text, NULL::jsonb,
                            NULL::bigint, p_cand_seq, p_cand_xid, NULL::smallint;
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
        cand AS MATERIALIZED (
            -- Live entries only (see "Tombstoned entries" above).
            SELECT e.slot, e.lane_seq, e.job_id, e.kind, e.args, e.priority, e.shard,
                   e.attempt, e.max_attempts, e.run_lease, e.created_at, e.ready_at,
                   e.unique_key, e.metadata
              FROM {schema}.ready_entries e
             WHERE e.slot IN (v_s1, v_s2)
               AND e.queue = p_queue AND e.priority = v_prios[1] AND e.shard = v_shards[1]
               AND e.lane_seq > v_heads[1] AND e.lane_seq <= v_frontier
               AND NOT EXISTS (
                     SELECT 1 FROM {schema}.ready_tombstones t
                      WHERE t.slot IN (v_s1, v_s2)
                        AND t.slot = e.slot AND t.job_id = e.job_id AND t.lane_seq = e.lane_seq)
               AND (SELECT f.ok FROM fresh f)
             ORDER BY e.lane_seq
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
    cand AS MATERIALIZED (
        -- Live entries only, up to the limit per lane. A job moved by
        -- ready_relocate has two entries with one lane_seq, the tombstoned
        -- old copy and the live new one; only the live one is read.
        SELECT r.*
          FROM lanes l
         CROSS JOIN frontier f
         CROSS JOIN LATERAL (
                SELECT e.slot, e.lane_seq, e.job_id, e.kind, e.args, e.priority, e.shard,
                       e.attempt, e.max_attempts, e.run_lease, e.created_at, e.ready_at,
                       e.unique_key, e.metadata
                  FROM {schema}.ready_entries e
                 WHERE e.queue = p_queue AND e.priority = l.priority AND e.shard = l.shard
                   AND e.lane_seq > l.head_seq AND e.lane_seq <= f.seq
                   AND NOT EXISTS (
                         SELECT 1 FROM {schema}.ready_tombstones t
                          WHERE t.slot = e.slot AND t.job_id = e.job_id AND t.lane_seq = e.lane_seq)
                 ORDER BY e.lane_seq
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

    -- Move low_gen up where ready_sealed allows, so the next claims of
    -- these lanes scan the newest two slots only. Worth it once per lane
    -- and rotation; cheap when nothing changed (no statement runs).
    IF v_gen > ANY (v_lows) THEN
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
    END IF;

    IF v_taken = 0 THEN
        RETURN QUERY SELECT NULL::bigint, NULL::integer, NULL::bigint, NULL::text, NULL::jsonb,
                            NULL::smallint, NULL::integer, NULL::integer, NULL::bigint,
                            NULL::timestamptz, NULL::timestamptz, NULL::text, NULL::jsonb,
                            v_seen, v_seq, v_xid, NULL::smallint;
    END IF;
END
$fn$;
$awa_template$)
ON CONFLICT (name) DO UPDATE SET ord = EXCLUDED.ord, body = EXCLUDED.body;
INSERT INTO awa.substrate_functions (name, ord, body) VALUES ('ring_prune', 33, $awa_template$-- {schema}.ring_prune(ring, lock_timeout_ms, rotate_interval): reclaim a
-- sealed slot of a ring, in two phases, one per call:
--
-- 1. retire: walk the sealed slots that hold rows, oldest first, and retire
--    the first one proven to hold nothing live (ready_slot_live /
--    exec_slot_live): fold its count deltas into the rollups and commit a
--    retirement marker. From then on the read views leave the slot's
--    terminal facts out for every snapshot that sees the marker.
--    * A live slot is evacuated first when it is the one the ring rotates
--      onto next (the oldest), and, in the queue ring, whenever it is past
--      its retention: waiting jobs move to the current slot keeping their
--      lane position (ready_relocate), open attempts move out of the rings
--      (exec_park). So one straggler, an unserved queue or a job that runs
--      for hours, never stops the ring, and an idle queue ring does not
--      keep a slot of dead rows behind one.
--    * A younger slot that is still live is looked past: a dead slot behind
--      it is still reclaimed.
--    * Queue-ring slots hold terminal history, so one is retired only once
--      it has been sealed for the retention: substrate_info.history_retention
--      when set, else (queue slots - 2) x rotate_interval (history is kept
--      for about the whole ring and one slot is always ready for the next
--      rotation). A younger slot is younger still, so the walk stops there
--      ('retained').
-- 2. truncate (a later call): once no snapshot in this database predates the
--    marker (TRUNCATE is not MVCC-safe, so an older snapshot would see rows
--    vanish), take ACCESS EXCLUSIVE locks on the slot's tables under a short
--    lock_timeout (a writer that picked the slot before it was sealed and
--    has not committed holds a conflicting lock: we time out and retry
--    later), prove again that nothing is live (the late writer may have
--    committed meanwhile), and TRUNCATE every table of the slot together.
--    A slot found live again is un-retired.
--
-- Bounds (awa_core::bounds, refused with SQLSTATE 22023 before anything is
-- read): lock_timeout_ms within PRUNE_LOCK_TIMEOUT, 1 ms to 10 s (0 would
-- be no timeout: the ACCESS EXCLUSIVE request would queue every writer of
-- the ring behind it until the slot's last reader ends); rotate_interval
-- within ROTATE_INTERVAL, 10 ms to 1 day (it sets the default history
-- retention; set substrate_info.history_retention to keep none).
-- For the queue ring, every call also moves ready_sealed first (ready_seal).
--
-- Returns one row: outcome ('retired', 'pruned', 'nothing_to_prune',
-- 'retained', 'live_rows', 'snapshot_pinned', 'busy', 'horizon_unknown',
-- 'lost_race': another pruner retired the slot first), the slot, and a
-- detail for operators. Anything unproven is a skip, never a truncate.
CREATE OR REPLACE FUNCTION {schema}.ring_prune(
    p_ring text, p_lock_timeout_ms integer, p_rotate_interval interval
)
RETURNS TABLE (outcome text, slot integer, detail text)
LANGUAGE plpgsql AS $fn$
#variable_conflict use_column
DECLARE
    v_slots   integer;
    v_cur     integer;
    v_slot    integer;
    v_xid     xid8;
    v_live    text;
    v_blocker record;
    v_family  text;
    v_tables  text[] := '{}';
    v_old_timeout text;
    v_min_age interval := interval '0';
    v_s       integer;
    v_moved   integer := 0;
    v_parked  integer := 0;
    v_first   text;
    k integer;
BEGIN
    v_slots := {schema}.ring_slot_count(p_ring);
    IF p_lock_timeout_ms IS NULL OR p_lock_timeout_ms NOT BETWEEN 1 AND 10000 THEN
        RAISE EXCEPTION 'ring_prune: lock timeout must be 1 to 10000 ms (got %)',
                        coalesce(p_lock_timeout_ms::text, 'NULL')
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'Writers of the ring queue behind the truncation''s lock request while it waits; the leader uses 200 ms.';
    END IF;
    IF p_rotate_interval IS NULL
       OR p_rotate_interval NOT BETWEEN interval '10 milliseconds' AND interval '1 day' THEN
        RAISE EXCEPTION 'ring_prune: rotate interval must be 10ms to 1day (got %)',
                        coalesce(p_rotate_interval::text, 'NULL')
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'Pass the leader''s rotate interval (awa maint run --rotate-interval); it sets the default history retention. To keep no history, set substrate_info.history_retention to 0 (awa storage configure --history-retention 0s).';
    END IF;
    -- The queue ring's seal moves with each pass (ready_seal), before the
    -- pass writes anything: a proposal's fence is the id of a transaction
    -- that had none before the check, so a pass that relocated, parked or
    -- retired something first could never propose. With the seal called
    -- last, a backlog in a slot past its retention (relocated 1,000 jobs a
    -- pass) starved the seal for backlog / 1,000 passes, and with it
    -- low_gen, the claim's bound on the slots it reads.
    IF p_ring = 'queue' THEN
        PERFORM {schema}.ready_seal();
    END IF;

    SELECT l.slot INTO v_cur FROM {schema}.ring_ledger l WHERE l.ring = p_ring
     ORDER BY l.generation DESC LIMIT 1;

    SELECT x.slot, x.retired_xid INTO v_slot, v_xid
      FROM {schema}.ring_retirements x WHERE x.ring = p_ring
     ORDER BY x.retired_at LIMIT 1;

    IF v_slot IS NULL THEN
        -- Phase 1.
        IF p_ring = 'queue' THEN
            SELECT coalesce(i.history_retention, greatest(v_slots - 2, 0) * p_rotate_interval)
              INTO v_min_age FROM {schema}.substrate_info i;
        END IF;
        FOR k IN 1 .. v_slots - 1 LOOP
            v_s := (v_cur + k) % v_slots;
            CONTINUE WHEN {schema}.ring_slot_empty(p_ring, v_s);
            IF v_min_age > interval '0'
               AND {schema}.ring_slot_sealed_at(p_ring, v_s) > now() - v_min_age THEN
                IF v_first IS NULL THEN
                    outcome := 'retained';
                    v_slot := v_s;
                    detail := format('history is retained until %s',
                                     {schema}.ring_slot_sealed_at(p_ring, v_s) + v_min_age);
                END IF;
                EXIT;
            END IF;
            v_live := {schema}.ring_slot_live(p_ring, v_s);
            IF v_live IS NOT NULL AND (k = 1 OR p_ring = 'queue') THEN
                -- Move what keeps it live: always for the slot the ring
                -- rotates onto next; for the queue ring, for every slot
                -- past its retention, so an idle ring does not keep a
                -- slot of dead rows behind one straggler. (Relocated
                -- copies are not fresh, so this never makes the ring
                -- rotate by itself.)
                IF p_ring = 'queue' THEN
                    v_moved := {schema}.ready_relocate(v_s, 1000);
                END IF;
                v_parked := {schema}.exec_park(p_ring, v_s, 1000);
                v_live := {schema}.ring_slot_live(p_ring, v_s);
            END IF;
            IF v_live IS NULL THEN
                IF p_ring = 'queue' THEN
                    PERFORM {schema}.history_retire_slot(v_s);
                END IF;
                INSERT INTO {schema}.ring_retirements (ring, slot, retired_xid)
                VALUES (p_ring, v_s, pg_current_xact_id())
                ON CONFLICT DO NOTHING;
                v_slot := v_s;
                IF FOUND THEN
                    outcome := 'retired';
                    detail := nullif(concat_ws(', ',
                        CASE WHEN v_moved > 0 THEN format('moved %s waiting jobs to slot %s', v_moved, v_cur) END,
                        CASE WHEN v_parked > 0 THEN format('parked %s running attempts', v_parked) END,
                        CASE WHEN v_first IS NOT NULL THEN 'looked past ' || v_first END), '');
                ELSE
                    outcome := 'lost_race';
                    detail := 'another pruner retired it first';
                END IF;
                EXIT;
            END IF;
            v_first := coalesce(v_first, format('slot %s (%s)', v_s, v_live));
            IF outcome IS NULL THEN
                outcome := 'live_rows';
                v_slot := v_s;
                detail := v_live || CASE WHEN v_moved + v_parked > 0
                    THEN format(' (moved %s waiting jobs, parked %s attempts; more next time)', v_moved, v_parked)
                    ELSE '' END;
            END IF;
        END LOOP;
        IF outcome IS NULL THEN
            outcome := 'nothing_to_prune';
        END IF;
    ELSE
        -- Phase 2. Other roles' snapshots are only visible with
        -- pg_read_all_stats; without it we cannot prove snapshot safety.
        IF NOT (pg_has_role('pg_read_all_stats', 'MEMBER')
                OR (SELECT rolsuper FROM pg_roles WHERE rolname = current_user)) THEN
            outcome := 'horizon_unknown';
            detail := 'the maintenance role needs pg_read_all_stats to see other sessions'' snapshots';
        ELSE
            -- pg_stat_activity is read once per transaction and kept; this
            -- transaction may have read it before the marker committed
            -- (ready_seal above, or a caller), and a snapshot taken since
            -- then, older than the marker, would be missing from that copy.
            PERFORM pg_stat_clear_snapshot();
            SELECT a.pid, extract(epoch FROM now() - coalesce(a.xact_start, a.backend_start))::bigint AS age
              INTO v_blocker
              FROM pg_stat_activity a
             WHERE a.datname = current_database()
               AND a.pid <> pg_backend_pid()
               AND a.backend_xmin IS NOT NULL
               AND age(a.backend_xmin) >= age(v_xid::xid)
             ORDER BY age(a.backend_xmin) DESC
             LIMIT 1;
            IF v_blocker.pid IS NOT NULL THEN
                outcome := 'snapshot_pinned';
                detail := format('backend pid %s holds a snapshot %s s old', v_blocker.pid, v_blocker.age);
            ELSE
                FOREACH v_family IN ARRAY {schema}.ring_families(p_ring) LOOP
                    v_tables := v_tables || format('%s.%I', '{schema}', v_family || '_' || v_slot);
                END LOOP;
                v_old_timeout := current_setting('lock_timeout');
                PERFORM set_config('lock_timeout', p_lock_timeout_ms || 'ms', true);
                BEGIN
                    EXECUTE 'LOCK TABLE ' || array_to_string(v_tables, ', ') || ' IN ACCESS EXCLUSIVE MODE';
                    outcome := NULL;
                EXCEPTION WHEN lock_not_available THEN
                    outcome := 'busy';
                    detail := 'a writer still holds the slot; retrying later';
                END;
                PERFORM set_config('lock_timeout', v_old_timeout, true);
                -- Another pruner may have truncated the slot while we
                -- waited for the lock (and the ring may already write to
                -- it again): only a slot still marked retired is ours.
                IF outcome IS NULL AND NOT EXISTS (
                        SELECT 1 FROM {schema}.ring_retirements x
                         WHERE x.ring = p_ring AND x.slot = v_slot) THEN
                    outcome := 'lost_race';
                    detail := 'another pruner truncated it first';
                END IF;
                IF outcome IS NULL THEN
                    v_live := {schema}.ring_slot_live(p_ring, v_slot);
                    IF v_live IS NOT NULL THEN
                        DELETE FROM {schema}.ring_retirements x WHERE x.ring = p_ring AND x.slot = v_slot;
                        outcome := 'live_rows';
                        detail := v_live || ' (a late writer); slot un-retired';
                    ELSE
                        -- A late writer may have added count deltas since
                        -- the retirement folded them; fold those too.
                        IF p_ring = 'queue' THEN
                            PERFORM {schema}.history_retire_slot(v_slot);
                        END IF;
                        EXECUTE 'TRUNCATE ' || array_to_string(v_tables, ', ');
                        DELETE FROM {schema}.ring_retirements x WHERE x.ring = p_ring AND x.slot = v_slot;
                        outcome := 'pruned';
                    END IF;
                END IF;
            END IF;
        END IF;
    END IF;

    INSERT INTO {schema}.ring_outcomes AS o (ring, task, outcome, detail)
    VALUES (p_ring, 'prune', outcome, coalesce('slot ' || v_slot || ': ', '') || coalesce(detail, ''))
    ON CONFLICT (ring, task) DO UPDATE SET outcome = EXCLUDED.outcome, detail = EXCLUDED.detail, at = now();
    slot := v_slot;
    RETURN NEXT;
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
