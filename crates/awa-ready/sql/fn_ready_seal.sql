-- {schema}.ready_seal(): move ready_sealed forward, in two steps a pass
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
