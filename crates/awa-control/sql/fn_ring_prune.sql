-- {schema}.ring_prune(ring, lock_timeout_ms): reclaim the oldest sealed slot
-- of a ring, in two phases, one per call:
--
-- 1. retire: find the oldest non-current slot that holds rows; prove it
--    holds nothing live (ready_slot_live / exec_slot_live); fold its count
--    deltas into the rollups; commit a retirement marker. From then on the
--    read views leave the slot out for every snapshot that sees the marker.
-- 2. truncate (a later call): once no snapshot in this database predates the
--    marker (TRUNCATE is not MVCC-safe, so an older snapshot would see rows
--    vanish), take ACCESS EXCLUSIVE locks on the slot's tables under a short
--    lock_timeout (a writer that picked the slot before it was sealed and
--    has not committed holds a conflicting lock: we time out and retry
--    later), prove again that nothing is live (the late writer may have
--    committed meanwhile), and TRUNCATE every table of the slot together.
--    A slot found live again is un-retired.
--
-- Returns one row: outcome ('retired', 'pruned', 'nothing_to_prune',
-- 'live_rows', 'snapshot_pinned', 'busy', 'horizon_unknown'), the slot, and
-- a detail for operators. Anything unproven is a skip, never a truncate.
CREATE OR REPLACE FUNCTION {schema}.ring_prune(p_ring text, p_lock_timeout_ms integer)
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
    k integer;
BEGIN
    v_slots := {schema}.ring_slot_count(p_ring);
    SELECT l.slot INTO v_cur FROM {schema}.ring_ledger l WHERE l.ring = p_ring
     ORDER BY l.generation DESC LIMIT 1;

    SELECT x.slot, x.retired_xid INTO v_slot, v_xid
      FROM {schema}.ring_retirements x WHERE x.ring = p_ring
     ORDER BY x.retired_at LIMIT 1;

    IF v_slot IS NULL THEN
        -- Phase 1: the oldest sealed slot that holds rows.
        FOR k IN 1 .. v_slots - 1 LOOP
            IF NOT {schema}.ring_slot_empty(p_ring, (v_cur + k) % v_slots) THEN
                v_slot := (v_cur + k) % v_slots;
                EXIT;
            END IF;
        END LOOP;
        IF v_slot IS NULL THEN
            outcome := 'nothing_to_prune';
        ELSE
            v_live := coalesce(CASE WHEN p_ring = 'queue' THEN {schema}.ready_slot_live(v_slot) END,
                               {schema}.exec_slot_live(p_ring, v_slot));
            IF v_live IS NOT NULL THEN
                outcome := 'live_rows';
                detail := v_live;
            ELSE
                IF p_ring = 'queue' THEN
                    PERFORM {schema}.history_retire_slot(v_slot);
                END IF;
                INSERT INTO {schema}.ring_retirements (ring, slot, retired_xid)
                VALUES (p_ring, v_slot, pg_current_xact_id());
                outcome := 'retired';
            END IF;
        END IF;
    ELSE
        -- Phase 2. Other roles' snapshots are only visible with
        -- pg_read_all_stats; without it we cannot prove snapshot safety.
        IF NOT (pg_has_role('pg_read_all_stats', 'MEMBER')
                OR (SELECT rolsuper FROM pg_roles WHERE rolname = current_user)) THEN
            outcome := 'horizon_unknown';
            detail := 'the maintenance role needs pg_read_all_stats to see other sessions'' snapshots';
        ELSE
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
                IF outcome IS NULL THEN
                    v_live := coalesce(CASE WHEN p_ring = 'queue' THEN {schema}.ready_slot_live(v_slot) END,
                                       {schema}.exec_slot_live(p_ring, v_slot));
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
