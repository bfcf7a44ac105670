-- {schema}.ready_relocate(slot, limit): move up to `limit` jobs still
-- waiting in queue-ring slot `slot` to the current slot, keeping each one's
-- lane and lane position. Called by ring_prune for the slot the ring must
-- rotate onto next, so one unclaimed job (an unserved or paused queue)
-- never stops reclamation of the ring for every queue.
--
-- The move, per job, in this one transaction: insert a copy of the entry
-- (same lane, same lane_seq, same ready_at) into the current slot, and a
-- tombstone for the old copy. Every snapshot therefore sees exactly one
-- live copy: the old one before this commits, the new one after.
--
-- Rules that must not be broken:
-- * The lanes are locked FOR UPDATE (SKIP LOCKED: a lane being claimed or
--   cancelled right now is left for the next pass) in one statement, and
--   the entries are read in a LATER statement. Claim (ready_take) and
--   cancel (ready_tombstone) hold the same lane lock while they move the
--   head or add a tombstone, so the later statement's snapshot sees all of
--   their effects: a job claimed or cancelled meanwhile is not copied (a
--   copy of a cancelled job would bring it back).
-- * That needs a new snapshot per statement, i.e. READ COMMITTED; under
--   snapshot isolation nothing is moved (returns 0 and the slot stays
--   live, so the ring waits rather than risk it).
-- * FIFO: lane_seq is kept, and ready_take orders a lane by lane_seq over
--   all slots, so the job keeps its place before every later job of its
--   lane. It draws no new position, so the frontier rule (ready_append)
--   does not apply: the position was settled when the job was first
--   committed. A claimer racing the move skips the locked lane.
--
-- Returns how many jobs were moved. A slot that is not the queue ring's,
-- or a limit outside 1..10000 (awa_core::bounds::MAINT_LIMIT), is refused
-- (SQLSTATE 22023).
CREATE OR REPLACE FUNCTION {schema}.ready_relocate(p_slot integer, p_limit integer)
RETURNS integer LANGUAGE plpgsql AS $fn$
#variable_conflict use_column
DECLARE
    v_cur     integer;
    v_queues  text[];
    v_prios   smallint[];
    v_shards  smallint[];
    v_moved   integer;
BEGIN
    -- A slot of this ring (ring_slot_count refuses an unknown ring).
    IF p_slot IS NULL OR p_slot NOT BETWEEN 0 AND {schema}.ring_slot_count('queue') - 1 THEN
        RAISE EXCEPTION 'slot % is not a slot of the % ring', coalesce(p_slot::text, 'NULL'), 'queue'
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'Slots are numbered from 0 to the ring''s slot count - 1 (substrate_info).';
    END IF;
    IF p_limit IS NULL OR p_limit NOT BETWEEN 1 AND 10000 THEN
        RAISE EXCEPTION 'ready_relocate: limit must be 1 to 10000 (got %)', coalesce(p_limit::text, 'NULL')
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'Rows one maintenance call moves (awa_core::bounds::MAINT_LIMIT); prune moves 1000 at a time.';
    END IF;
    IF current_setting('transaction_isolation') <> 'read committed' THEN
        RETURN 0;
    END IF;
    SELECT l.slot INTO v_cur FROM {schema}.ring_ledger l
     WHERE l.ring = 'queue' ORDER BY l.generation DESC LIMIT 1;
    IF v_cur = p_slot THEN
        RETURN 0;
    END IF;

    -- Statement 1: lock the lanes that still wait on this slot.
    SELECT array_agg(h.queue), array_agg(h.priority), array_agg(h.shard)
      INTO v_queues, v_prios, v_shards
      FROM (SELECT h.queue, h.priority, h.shard
              FROM {schema}.lane_heads h
             WHERE EXISTS (SELECT 1 FROM {schema}.ready_entries e
                            WHERE e.slot = p_slot AND e.queue = h.queue AND e.priority = h.priority
                              AND e.shard = h.shard AND e.lane_seq > h.head_seq)
               FOR UPDATE SKIP LOCKED) h;
    IF v_queues IS NULL THEN
        RETURN 0;
    END IF;

    -- Statement 2: a new snapshot, taken after the locks were granted.
    WITH lanes AS (
        SELECT l.queue, l.priority, l.shard, h.head_seq
          FROM unnest(v_queues, v_prios, v_shards) AS l(queue, priority, shard)
          JOIN {schema}.lane_heads h ON h.queue = l.queue AND h.priority = l.priority AND h.shard = l.shard
    ),
    moving AS (
        SELECT e.*
          FROM lanes l
          JOIN {schema}.ready_entries e
            ON e.slot = p_slot AND e.queue = l.queue AND e.priority = l.priority AND e.shard = l.shard
         WHERE e.lane_seq > l.head_seq
           AND NOT EXISTS (SELECT 1 FROM {schema}.ready_tombstones t
                            WHERE t.slot = e.slot AND t.job_id = e.job_id AND t.lane_seq = e.lane_seq)
         ORDER BY e.lane_seq
         LIMIT p_limit
    ),
    copied AS (
        INSERT INTO {schema}.ready_entries
            (slot, queue, priority, shard, lane_seq, job_id, kind, args, attempt,
             max_attempts, run_lease, created_at, ready_at, unique_key, metadata, attempts)
        SELECT v_cur, m.queue, m.priority, m.shard, m.lane_seq, m.job_id, m.kind, m.args, m.attempt,
               m.max_attempts, m.run_lease, m.created_at, m.ready_at, m.unique_key, m.metadata,
               m.attempts
          FROM moving m
        RETURNING 1
    ),
    buried AS (
        INSERT INTO {schema}.ready_tombstones (slot, job_id, lane_seq)
        SELECT p_slot, m.job_id, m.lane_seq FROM moving m
        RETURNING 1
    )
    SELECT count(*) INTO v_moved FROM copied;
    RETURN v_moved;
END
$fn$;
