-- {schema}.ready_take(queue, limit, cand_seq, cand_snap, aging): take up to
-- `limit` runnable jobs of a queue, in order, advancing the lane heads past
-- them. Called only from the execution plane's claim, in the same
-- statement that writes the receipts.
--
-- Order: higher (aged) priority first, then lane position. Within one lane
-- the effective priority is made non-increasing (a running minimum), so
-- what is taken from a lane is always a prefix of it and the head can move
-- past exactly what was taken.
--
-- Concurrent claimers skip each other: lanes are locked FOR UPDATE SKIP
-- LOCKED, so a lane being claimed by someone else is simply not offered.
--
-- The frontier. A lane position is safe to pass only once no transaction
-- can still commit a row at or below it, otherwise a later producer's job
-- would overtake (and the head would strand) an earlier, still
-- uncommitted one. We read M = ready_seq.last_value, then take snapshot S.
-- Every position <= M was drawn by a transaction whose xid was assigned
-- before (ready_append's rule), hence before S: it had ended by S or is in
-- S's xip. Once every xid in S's xip is finished in the snapshot we read
-- with, everything <= M is final. The caller passes the candidate (M, S)
-- of its previous call, which has usually settled by now, and gets this
-- call's candidate back (next_seq, next_snap) in every row; when no job is
-- taken, one row with job_id NULL still carries it.
--
-- When both candidates still wait on some transaction (a long-running
-- writer anywhere in the cluster, say), a slow path reads pg_locks once:
-- the frontier is settled if each such transaction is still running and
-- does not hold this queue's producer lock (ready_append takes it before
-- drawing a position). So an unrelated long transaction, or a long producer
-- of another queue, does not hold this queue back.
CREATE OR REPLACE FUNCTION {schema}.ready_take(
    p_queue     text,
    p_limit     integer,
    p_cand_seq  bigint,
    p_cand_snap pg_snapshot,
    p_aging     interval
) RETURNS TABLE (
    job_id bigint, slot integer, lane_seq bigint, kind text, args jsonb,
    priority smallint, attempt integer, max_attempts integer, run_lease bigint,
    created_at timestamptz, ready_at timestamptz, unique_key text, metadata jsonb,
    frontier bigint, next_seq bigint, next_snap pg_snapshot
) LANGUAGE plpgsql AS $fn$
#variable_conflict use_column
DECLARE
    v_seq  bigint;
    v_snap pg_snapshot;
BEGIN
    SELECT s.last_value INTO v_seq FROM {schema}.ready_seq s;
    v_snap := pg_current_snapshot();

    RETURN QUERY
    WITH locks AS MATERIALIZED (
        -- One read of the lock table, only if the slow path below needs it
        -- (a CTE is read lazily; an unreached CASE branch never reads it):
        -- the lock every live top-level transaction holds on its own xid,
        -- and this queue's producer locks (see ready_append).
        SELECT k.locktype, k.pid, k.transactionid
          FROM pg_locks k
         WHERE (k.locktype = 'transactionid' AND k.mode = 'ExclusiveLock' AND k.granted)
            OR (k.locktype = 'advisory' AND k.classid = 6387554
                AND k.objid = hashtext(p_queue)::oid AND k.objsubid = 2
                AND k.database = (SELECT d.oid FROM pg_database d WHERE d.datname = current_database()))
    ),
    frontier AS (
        -- pg_current_snapshot() here is this statement's snapshot, the one
        -- the rows below are read with.
        SELECT CASE
            WHEN NOT EXISTS (SELECT 1 FROM pg_snapshot_xip(v_snap) AS x
                              WHERE NOT pg_visible_in_snapshot(x, pg_current_snapshot()))
                THEN v_seq
            WHEN p_cand_snap IS NOT NULL
             AND NOT EXISTS (SELECT 1 FROM pg_snapshot_xip(p_cand_snap) AS x
                              WHERE NOT pg_visible_in_snapshot(x, pg_current_snapshot()))
                THEN least(p_cand_seq, v_seq)
            -- Slow path, only when both snapshots still wait on someone:
            -- settled if every transaction we would wait for is still
            -- running and is not a producer of this queue. (One that has
            -- ended but is not visible to our snapshot might have committed
            -- a position we cannot see: not settled.)
            WHEN NOT EXISTS (
                    SELECT 1 FROM pg_snapshot_xip(v_snap) AS x
                     WHERE NOT pg_visible_in_snapshot(x, pg_current_snapshot())
                       AND (NOT EXISTS (SELECT 1 FROM locks t
                                         WHERE t.locktype = 'transactionid' AND t.transactionid = x::xid)
                            OR EXISTS (SELECT 1 FROM locks t JOIN locks a ON a.pid = t.pid
                                        WHERE t.locktype = 'transactionid' AND t.transactionid = x::xid
                                          AND a.locktype = 'advisory')))
                THEN v_seq
            ELSE 0
        END AS seq
    ),
    lanes AS MATERIALIZED (
        SELECT h.priority, h.shard, h.head_seq
          FROM {schema}.lane_heads h
         WHERE h.queue = p_queue
         ORDER BY h.priority DESC, h.shard
           FOR UPDATE SKIP LOCKED
    ),
    cand AS MATERIALIZED (
        SELECT r.*, t.job_id IS NOT NULL AS dead
          FROM lanes l
         CROSS JOIN frontier f
         CROSS JOIN LATERAL (
                SELECT e.slot, e.lane_seq, e.job_id, e.kind, e.args, e.priority, e.shard,
                       e.attempt, e.max_attempts, e.run_lease, e.created_at, e.ready_at,
                       e.unique_key, e.metadata
                  FROM {schema}.ready_entries e
                 WHERE e.queue = p_queue AND e.priority = l.priority AND e.shard = l.shard
                   AND e.lane_seq > l.head_seq AND e.lane_seq <= f.seq
                 ORDER BY e.lane_seq
                 LIMIT p_limit) r
          LEFT JOIN {schema}.ready_tombstones t
            ON t.slot = r.slot AND t.job_id = r.job_id AND t.lane_seq = r.lane_seq
    ),
    aged AS (
        SELECT c.*,
               min(c.priority + CASE WHEN p_aging IS NULL OR p_aging <= interval '0' THEN 0
                                     ELSE floor(extract(epoch FROM now() - c.ready_at)
                                                / extract(epoch FROM p_aging)) END)
                   OVER (PARTITION BY c.priority, c.shard ORDER BY c.lane_seq) AS effective
          FROM cand c
         WHERE NOT c.dead
    ),
    ranked AS (
        SELECT a.*, row_number() OVER (ORDER BY a.effective DESC, a.lane_seq) AS rn
          FROM aged a
    ),
    first_left AS (
        SELECT r.priority, r.shard, min(r.lane_seq) AS seq
          FROM ranked r WHERE r.rn > p_limit
         GROUP BY r.priority, r.shard
    ),
    new_heads AS (
        SELECT c.priority, c.shard, max(c.lane_seq) AS head
          FROM cand c
          LEFT JOIN first_left fl ON fl.priority = c.priority AND fl.shard = c.shard
         WHERE fl.seq IS NULL OR c.lane_seq < fl.seq
         GROUP BY c.priority, c.shard
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
               r.metadata, r.rn
          FROM ranked r WHERE r.rn <= p_limit
    )
    SELECT t.job_id, t.slot, t.lane_seq, t.kind, t.args, t.priority, t.attempt,
           t.max_attempts, t.run_lease, t.created_at, t.ready_at, t.unique_key, t.metadata,
           (SELECT f.seq FROM frontier f), v_seq, v_snap
      FROM taken t
     ORDER BY t.rn;
    -- (moved, a data-modifying CTE, runs to completion although unread.)

    IF NOT FOUND THEN
        RETURN QUERY SELECT NULL::bigint, NULL::integer, NULL::bigint, NULL::text, NULL::jsonb,
                            NULL::smallint, NULL::integer, NULL::integer, NULL::bigint,
                            NULL::timestamptz, NULL::timestamptz, NULL::text, NULL::jsonb,
                            NULL::bigint, v_seq, v_snap;
    END IF;
END
$fn$;
