-- {schema}.claim_floor_advance(): move claim_floor (install_exec_plane.sql)
-- up to the batches claimed now, so the read views read the open claim
-- batches and the few claimed since, never the closed ones the claim ring
-- still holds. The leader's health task calls it before it measures.
-- Returns the floor in force afterwards.
--
-- The promise: every batch with batch_id below `floor` is closed, gone
-- with its slot, or listed in (open_slots, open_batches). Batch ids come
-- from claim_batch_seq (CACHE 1: handed out in the order drawn), drawn by
-- the claim inside its transaction. A batch below a position read from
-- the sequence may still be uncommitted then, so a position is adopted in
-- two steps, the storage drain's fence (drain_release.sql):
--   propose: read the sequence's next id, then (a later statement) the
--     virtual transaction ids of this database's other running
--     transactions: each holds its own from its start, so one that drew an
--     id below the position is among them, or had ended;
--   adopt, in a statement that starts once none of them is still running:
--     every batch below the position that will ever commit has committed
--     and is seen, so the batches from the old floor to the position that
--     are still open, with the listed ones still open, are the new list.
-- A closed batch stays closed (links are only ever added), so a reader
-- whose snapshot sees the row sees every batch it leaves out as closed.
-- A proposal made here is waited for a few milliseconds (the transactions
-- running then are usually claims and finishes that end at once); one
-- still fenced is adopted by a later call. A transaction that stays open
-- holds the floor where it is: readers then read more batches, never
-- fewer. Each step needs a snapshot of its own, so under REPEATABLE READ
-- or SERIALIZABLE nothing moves; a racing caller skips (the row lock).
-- jit = off: a maintenance statement, planned once per session.
-- No arguments (nothing to bound).
CREATE OR REPLACE FUNCTION {schema}.claim_floor_advance()
RETURNS bigint LANGUAGE plpgsql SET jit = off AS $fn$
DECLARE
    f record;
    v_at bigint;
    v_fresh boolean;
BEGIN
    IF current_setting('transaction_isolation') <> 'read committed' THEN
        RETURN (SELECT c.floor FROM {schema}.claim_floor c);
    END IF;
    SELECT c.* INTO f FROM {schema}.claim_floor c FOR UPDATE SKIP LOCKED;
    IF NOT FOUND THEN
        RETURN (SELECT c.floor FROM {schema}.claim_floor c);
    END IF;
    FOR k IN 1 .. 2 LOOP
        v_fresh := f.pending_floor IS NULL;
        IF v_fresh THEN
            -- Propose: the position first, then who may still hold an id
            -- below it (pg_locks is read live; pg_stat_activity, read for
            -- the database only, keeps a transaction's first read unless
            -- cleared).
            v_at := (SELECT CASE WHEN s.is_called THEN s.last_value + 1 ELSE s.last_value END
                       FROM {schema}.claim_batch_seq s);
            PERFORM pg_stat_clear_snapshot();
            UPDATE {schema}.claim_floor c
               SET pending_floor = v_at,
                   pending_vxids = ARRAY(
                       SELECT l.virtualxid::text
                         FROM pg_catalog.pg_locks l
                         JOIN pg_catalog.pg_stat_activity a ON a.pid = l.pid
                        WHERE l.locktype = 'virtualxid' AND l.mode = 'ExclusiveLock' AND l.granted
                          AND a.datname = current_database() AND l.pid <> pg_backend_pid())
             RETURNING c.* INTO f;
            -- Those are mostly claims and finishes, which end at once.
            FOR i IN 1 .. 25 LOOP
                EXIT WHEN NOT EXISTS (SELECT 1 FROM pg_catalog.pg_locks l
                                       WHERE l.locktype = 'virtualxid' AND l.granted
                                         AND l.virtualxid::text = ANY (f.pending_vxids));
                PERFORM pg_sleep(0.002);
            END LOOP;
        END IF;
        IF EXISTS (SELECT 1 FROM pg_catalog.pg_locks l
                    WHERE l.locktype = 'virtualxid' AND l.granted
                      AND l.virtualxid::text = ANY (f.pending_vxids)) THEN
            -- Still fenced: a later call adopts it.
            EXIT;
        END IF;
        -- Adopt, in a statement (a snapshot) that starts after the fence.
        UPDATE {schema}.claim_floor c
           SET (open_slots, open_batches) = (
                   SELECT coalesce(array_agg(o.slot ORDER BY o.batch_id), '{}'),
                          coalesce(array_agg(o.batch_id ORDER BY o.batch_id), '{}')
                     FROM (SELECT b.slot, b.batch_id
                             FROM unnest(c.open_slots, c.open_batches) AS l(slot, batch_id)
                             JOIN {schema}.claim_batches b
                               ON b.slot = l.slot AND b.batch_id = l.batch_id
                           UNION ALL
                           SELECT b.slot, b.batch_id
                             FROM {schema}.claim_batches b
                            WHERE b.batch_id >= c.floor AND b.batch_id < c.pending_floor) o
                    WHERE NOT EXISTS (SELECT 1 FROM {schema}.claim_closures x
                                       WHERE x.slot = o.slot AND x.batch_id = o.batch_id
                                         AND x.open_after = 0)),
               floor = c.pending_floor, pending_floor = NULL, pending_vxids = NULL,
               moved_at = now()
         RETURNING c.* INTO f;
        -- An earlier call's proposal adopted: go round once for a new one.
        EXIT WHEN v_fresh;
    END LOOP;
    RETURN f.floor;
END
$fn$;
