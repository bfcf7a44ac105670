-- PgReadyPlane::enqueue_copy, step 3: append what copy_staging_in.sql put
-- in the session's staging table, in one statement; the staged rows are
-- consumed (deleted) by it. The same statement as call_enqueue_now.sql
-- (keep the two in step), reading the staging table instead of arrays: a
-- batch with no unique key and no run_at. Batches with either go through
-- {schema}.enqueue instead, so uniqueness and scheduling are those of
-- enqueue exactly.
--
-- One parameter: $1 routed boolean (see `fence`). Input: pg_temp.awa_enqueue_staging (ord = input order,
-- queue, kind, args, priority, max_attempts NULL = the queue's default from
-- awa.queue_meta else 25, metadata). Returns (job_id, inserted = true,
-- scheduled = false) per staged row, in ord order; job ids ascend in that
-- order and lane positions follow it.
--
-- The ordering rule that must not be broken (ready_append's): the
-- transaction id is assigned and the queue's producer advisory lock taken
-- BEFORE any lane position is drawn from ready_seq. Forced as in
-- call_enqueue_now.sql: the MATERIALIZED CTE `fence` computes the xid, the
-- locks, the notifications and the size check once; each position is
-- `CASE WHEN <fence values> THEN nextval(ready_seq) END`, whose condition
-- (evaluated first, a documented CASE guarantee) needs the fence row.
-- The staging rows come from the DELETE's RETURNING (a data-modifying CTE
-- is executed exactly once; its output is what the rest reads).
--
-- Size limit: as call_enqueue_now.sql; the first job over
-- substrate_info.max_job_bytes raises SQLSTATE 54000 (enqueue_oversized)
-- and the whole statement, delete included, is undone.
--
-- One NOTIFY awa_ready per queue, as call_enqueue_now.sql.
WITH staged AS (
    DELETE FROM pg_temp.awa_enqueue_staging RETURNING *
),
fence AS MATERIALIZED (
    SELECT pg_current_xact_id() AS xid,
           (SELECT count(pg_advisory_xact_lock_shared(6387554, hashtext(d.q)))
                 + count(pg_notify('awa_ready', d.q))
              FROM (SELECT DISTINCT g.queue AS q FROM staged g) d) AS announced,
           (SELECT count({schema}.enqueue_oversized(b.ord, b.queue, b.kind,
                                                    b.bytes, s.max_job_bytes))
              FROM (SELECT i.ord, i.queue, i.kind, i.bytes
                      FROM (SELECT i.ord, i.queue, i.kind, octet_length(i.a::text) + coalesce(octet_length(i.md::text), 0) AS bytes
                              FROM (SELECT g.ord, g.queue, g.kind, g.args AS a, g.metadata AS md FROM staged g) i
                             WHERE (coalesce(pg_column_size(i.a), 0) + coalesce(pg_column_size(i.md), 0))::bigint * 8
                                       > s.max_job_bytes
                                OR pg_column_compression(i.a) IS NOT NULL
                                OR pg_column_compression(i.md) IS NOT NULL) i
                     WHERE i.bytes > s.max_job_bytes
                     ORDER BY i.ord
                     LIMIT 1) b) AS refused,
           (SELECT l.slot
              FROM {schema}.ring_ledger l
             WHERE l.ring = 'queue'
             ORDER BY l.generation DESC
             LIMIT 1) AS slot,
           -- Routing, when $1::boolean (routed) is true: false when this
           -- substrate does not receive writes now (see
           -- fn_enqueue_routed.sql). Then nothing is written and no row
           -- comes back; the caller goes through {schema}.enqueue, which
           -- forwards to the substrate that does. Pinned ($1 false):
           -- always this substrate.
           (SELECT NOT $1::boolean OR to_regnamespace(CASE WHEN t.state = 'mixed' THEN t.target_schema
                                        ELSE t.active_schema END)
                   = to_regnamespace('{schema}')
              FROM awa.storage_transition_state t) AS routed
      -- A singleton table; LIMIT 1 says so to the planner, which would
      -- otherwise guess about a thousand rows (it is never analyzed) and,
      -- multiplied by the batch, a cost high enough to JIT-compile the
      -- statement (measured: ~600 ms per call).
      FROM (SELECT si.max_job_bytes FROM {schema}.substrate_info si LIMIT 1) s
),
input AS MATERIALIZED (
    SELECT i.ord, i.job_id, i.queue, i.kind, i.args, i.priority, i.metadata,
           coalesce(i.max_attempts, m.max_attempts, 25) AS max_attempts,
           (i.job_id % coalesce(m.shard_count, 1))::smallint AS shard
      FROM (SELECT u.*, nextval('awa.job_id_seq') AS job_id
              FROM staged u
             ORDER BY u.ord) i
      LEFT JOIN awa.queue_meta m ON m.queue = i.queue
     WHERE (SELECT f.routed FROM fence f)
),
-- Lanes are created on first use (ready_append's rule: ON CONFLICT DO
-- NOTHING, the one moment producers of a lane wait for each other).
lanes AS (
    INSERT INTO {schema}.lane_heads (queue, priority, shard)
    SELECT DISTINCT i.queue, i.priority, i.shard FROM input i
    ON CONFLICT DO NOTHING
),
appended AS (
    INSERT INTO {schema}.ready_entries
        (slot, queue, priority, shard, lane_seq, job_id, kind, args, attempt,
         max_attempts, run_lease, created_at, ready_at, unique_key, metadata)
    SELECT f.slot, i.queue, i.priority, i.shard,
           CASE WHEN f.xid IS NOT NULL AND f.announced >= 0 AND f.refused = 0
                THEN nextval('{schema}.ready_seq') END,
           i.job_id, i.kind, i.args, 0, i.max_attempts, 0::bigint,
           now(), clock_timestamp(), NULL, i.metadata
      FROM input i CROSS JOIN fence f
     ORDER BY i.ord
)
SELECT i.job_id, true AS inserted, false AS scheduled
  FROM input i
 ORDER BY i.ord
