-- {schema}.ready_take(queue, limit, cand_seq, cand_xid, aging): take up to
-- `limit` runnable jobs of a queue, and at most 8 MiB of args + metadata
-- (stored size; at least one job), in order, advancing the lane heads past
-- them. Called only from the execution plane's claim, in the same
-- statement that writes the claim batch.
--
-- Order: priority 1 first, 4 last (docs/adr/0008), after aging, then lane
-- position. Aging moves a waiting job one step towards 1 per aging
-- interval (the effective priority may go below 1). Within one lane the
-- effective priority is made non-decreasing (a running maximum: a newer
-- job never ranks ahead of an older one of its lane), so what is taken
-- from a lane is always a prefix of it and the head can move past exactly
-- what was taken.
--
-- Concurrent claimers skip each other: lanes are locked FOR UPDATE SKIP
-- LOCKED, so a lane being claimed by someone else is simply not offered.
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
    v_prios    smallint[];
    v_shards   smallint[];
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
    SELECT s.last_value INTO v_seq FROM {schema}.ready_seq s;
    -- Nothing visible past any lane head: return at once, keeping the old
    -- candidate. No xid is assigned, so an idle poll commits nothing (no
    -- WAL flush).
    IF NOT EXISTS (
            SELECT 1
              FROM {schema}.lane_heads h
             CROSS JOIN LATERAL (
                    SELECT 1 FROM {schema}.ready_entries e
                     WHERE e.queue = h.queue AND e.priority = h.priority AND e.shard = h.shard
                       AND e.lane_seq > h.head_seq
                     LIMIT 1) w
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
    SELECT coalesce(array_agg(l.priority), '{}'), coalesce(array_agg(l.shard), '{}')
      INTO v_prios, v_shards
      FROM (SELECT h.priority, h.shard
              FROM {schema}.lane_heads h
             WHERE h.queue = p_queue
             ORDER BY h.priority, h.shard
               FOR UPDATE SKIP LOCKED) l;

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
        -- A job moved by ready_relocate has two entries with one lane_seq:
        -- the tombstoned old copy and the live new one. The live copy sorts
        -- first, so the LIMIT never keeps the dead twin while cutting off
        -- the live one (the head would then pass a job nobody took).
        SELECT r.*
          FROM lanes l
         CROSS JOIN frontier f
         CROSS JOIN LATERAL (
                SELECT e.slot, e.lane_seq, e.job_id, e.kind, e.args, e.priority, e.shard,
                       e.attempt, e.max_attempts, e.run_lease, e.created_at, e.ready_at,
                       e.unique_key, e.metadata, t.job_id IS NOT NULL AS dead
                  FROM {schema}.ready_entries e
                  LEFT JOIN {schema}.ready_tombstones t
                    ON t.slot = e.slot AND t.job_id = e.job_id AND t.lane_seq = e.lane_seq
                 WHERE e.queue = p_queue AND e.priority = l.priority AND e.shard = l.shard
                   AND e.lane_seq > l.head_seq AND e.lane_seq <= f.seq
                 ORDER BY e.lane_seq, t.job_id IS NOT NULL
                 LIMIT p_limit) r
    ),
    aged AS (
        SELECT c.*,
               max(c.priority - CASE WHEN p_aging IS NULL OR p_aging <= interval '0' THEN 0
                                     ELSE floor(extract(epoch FROM now() - c.ready_at)
                                                / extract(epoch FROM p_aging)) END)
                   OVER (PARTITION BY c.priority, c.shard ORDER BY c.lane_seq) AS effective
          FROM cand c
         WHERE NOT c.dead
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
               r.metadata, r.rn, r.shard
          FROM chosen r WHERE r.take
    )
    SELECT t.job_id, t.slot, t.lane_seq, t.kind, t.args, t.priority, t.attempt,
           t.max_attempts, t.run_lease, t.created_at, t.ready_at, t.unique_key, t.metadata,
           v_frontier, v_seq, v_xid, t.shard
      FROM taken t
     ORDER BY t.rn;
    -- (moved, a data-modifying CTE, runs to completion although unread.)

    IF NOT FOUND THEN
        RETURN QUERY SELECT NULL::bigint, NULL::integer, NULL::bigint, NULL::text, NULL::jsonb,
                            NULL::smallint, NULL::integer, NULL::integer, NULL::bigint,
                            NULL::timestamptz, NULL::timestamptz, NULL::text, NULL::jsonb,
                            v_frontier, v_seq, v_xid, NULL::smallint;
    END IF;
END
$fn$;
