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
-- Resuming (ready_relocated): in a sealed slot (no entry can be added to
-- it any more) the jobs a pass moves are the first live ones of each lane,
-- so after a pass every entry of the lane up to the last one moved is
-- behind the head or tombstoned. The pass records that position, and the
-- next one starts past it: without it each pass stepped over every copy
-- the earlier passes had tombstoned, and moving a backlog of n cost
-- n^2 / 2,000 tombstone probes (0.5 s a pass at 100,000). In a slot not
-- yet sealed a late writer may still add an entry below that position, so
-- nothing is recorded or used there and each pass starts at the head.
--
-- Every read of ready_entries is one lane's range in lane order with a
-- LIMIT (ready_take, "Plans that cannot degrade").
--
-- Returns how many jobs were moved. A slot that is not the queue ring's,
-- or a limit outside 1..10000 (awa_core::bounds::MAINT_LIMIT), is refused
-- (SQLSTATE 22023).
CREATE OR REPLACE FUNCTION {schema}.ready_relocate(p_slot integer, p_limit integer)
RETURNS integer LANGUAGE plpgsql AS $fn$
#variable_conflict use_column
DECLARE
    v_cur     integer;
    v_slots   integer := {schema}.ring_slot_count('queue');
    v_queues  text[];
    v_prios   smallint[];
    v_shards  smallint[];
    v_moved   integer;
    v_gen     bigint;
    v_sealed  boolean;
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

    -- The slot's generation, and whether it is sealed: only then is a
    -- recorded position valid (see "Resuming").
    SELECT c.generation - ((c.slot - p_slot + v_slots) % v_slots)
      INTO v_gen
      FROM (SELECT l.generation, l.slot FROM {schema}.ring_ledger l
             WHERE l.ring = 'queue' ORDER BY l.generation DESC LIMIT 1) c;
    v_sealed := v_gen <= (SELECT z.generation FROM {schema}.ready_sealed z);

    -- Statement 1: lock the lanes that still wait on this slot: a lane
    -- with an entry past its head (and past what was already moved).
    SELECT array_agg(h.queue), array_agg(h.priority), array_agg(h.shard)
      INTO v_queues, v_prios, v_shards
      FROM (SELECT h.queue, h.priority, h.shard
              FROM {schema}.lane_heads h
              LEFT JOIN {schema}.ready_relocated r
                ON v_sealed AND r.slot = p_slot AND r.generation = v_gen
               AND r.queue = h.queue AND r.priority = h.priority AND r.shard = h.shard
             WHERE (SELECT e.lane_seq FROM {schema}.ready_entries e
                     WHERE e.slot = p_slot AND e.queue = h.queue AND e.priority = h.priority
                       AND e.shard = h.shard
                       AND e.lane_seq > greatest(h.head_seq, r.moved_through)
                     ORDER BY e.lane_seq LIMIT 1) IS NOT NULL
               FOR UPDATE OF h SKIP LOCKED) h;
    IF v_queues IS NULL THEN
        RETURN 0;
    END IF;

    -- Statement 2: a new snapshot, taken after the locks were granted.
    -- Each lane's first live entries past its head (and past what was
    -- moved), then the first p_limit of those.
    WITH lanes AS (
        SELECT l.queue, l.priority, l.shard, greatest(h.head_seq, r.moved_through) AS from_seq
          FROM unnest(v_queues, v_prios, v_shards) AS l(queue, priority, shard)
          JOIN {schema}.lane_heads h ON h.queue = l.queue AND h.priority = l.priority AND h.shard = l.shard
          LEFT JOIN {schema}.ready_relocated r
            ON v_sealed AND r.slot = p_slot AND r.generation = v_gen
           AND r.queue = l.queue AND r.priority = l.priority AND r.shard = l.shard
    ),
    moving AS (
        SELECT m.*
          FROM lanes l
         CROSS JOIN LATERAL (
                SELECT e.*
                  FROM {schema}.ready_entries e
                 WHERE e.slot = p_slot AND e.queue = l.queue AND e.priority = l.priority
                   AND e.shard = l.shard AND e.lane_seq > l.from_seq
                   AND (SELECT true FROM {schema}.ready_tombstones t
                         WHERE t.slot = e.slot AND t.job_id = e.job_id
                           AND t.lane_seq = e.lane_seq) IS NULL
                 ORDER BY e.lane_seq
                 LIMIT p_limit) m
         ORDER BY m.lane_seq
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
    ),
    -- Where each lane got to (sealed slots only, see "Resuming"). A lane
    -- whose moved jobs this pass did not reach keeps its position.
    reached AS (
        INSERT INTO {schema}.ready_relocated AS r
            (slot, queue, priority, shard, generation, moved_through)
        SELECT p_slot, m.queue, m.priority, m.shard, v_gen, max(m.lane_seq)
          FROM moving m
         WHERE v_sealed
         GROUP BY m.queue, m.priority, m.shard
        ON CONFLICT (slot, queue, priority, shard) DO UPDATE
           SET generation = EXCLUDED.generation, moved_through = EXCLUDED.moved_through
        RETURNING 1
    )
    SELECT count(*) INTO v_moved FROM copied;
    RETURN v_moved;
END
$fn$;
