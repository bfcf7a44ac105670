-- ReadyPlane::enqueue's fast paths: a batch with no unique key and no
-- run_at (everything runnable now), appended in ONE statement and without
-- PL/pgSQL unless a job is over the size limit. Anything else goes through
-- {schema}.enqueue (call_enqueue.sql); the rows written here are exactly
-- those {schema}.enqueue -> ready_append would write for such a batch.
--
-- One statement for both ways a batch arrives: the placeholder `input`
-- in braces in CTE `staged` (below) is replaced, in producer.rs, by the
-- query that yields the batch (a constant file of this crate), with
-- columns (ord = input order, queue, kind, args, priority, max_attempts
-- NULL = the queue's default from awa.queue_meta else 25, metadata):
--   * enqueue_input_arrays.sql: parallel arrays bound as $2..$7
--     (`enqueue`);
--   * enqueue_input_staged.sql: the rows COPY put in the session's staging
--     table, consumed (deleted) here (`enqueue_copy`, step 3).
--
-- Parameters: $1 routed boolean (see `fence`), then the input's.
-- Returns (job_id, inserted = true, scheduled = false) per job, in input
-- order; job ids ascend in input order, lane positions follow it.
--
-- The ordering rule that must not be broken (ready_append's): the
-- transaction id is assigned and the queue's producer advisory lock taken
-- BEFORE any lane position is drawn from ready_seq. The sub-statements of
-- one WITH run concurrently, in no documented order, so the order is forced
-- by data dependency, with documented guarantees only:
--   1. `fence` is a MATERIALIZED CTE: computed once, separately from the
--      rest of the query. Its one row holds the transaction id
--      (pg_current_xact_id), the count of producer locks taken and of
--      notifications queued, and the count of refusals.
--   2. The position is `CASE WHEN <those fence values> THEN
--      nextval(ready_seq) END`. CASE evaluates its condition before its
--      result, and only then the result ("When it is essential to force
--      evaluation order, a CASE construct can be used", Expression
--      Evaluation Rules); the condition reads the fence's values, which
--      exist only once the fence row has been computed. No aggregate or
--      constant sits in the THEN branch (the documented exceptions).
--   lane_seq is NOT NULL, so a NULL from the CASE could only fail the call.
-- Job ids (job_id_seq) carry no ordering rule. The batch is read once
-- (`staged` is referenced more than once, so materialized; a DELETE in a
-- WITH is executed exactly once anyway).
--
-- Size limit: args + metadata as JSON text at most substrate_info's
-- max_job_bytes (the same measurement as {schema}.enqueue: only values whose
-- stored size could reach the limit, or that are compressed, are
-- rendered). The first job over it makes enqueue_oversized raise SQLSTATE
-- 54000 inside this statement, which undoes all of it (a staged batch's
-- delete included): nothing written.
--
-- One NOTIFY awa_ready per queue (PostgreSQL folds duplicates within a
-- transaction and delivers them at commit, so queueing them in the fence,
-- before the rows, changes nothing a listener sees).
WITH staged AS (
    {input}
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
