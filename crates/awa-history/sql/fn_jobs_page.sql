-- {schema}.jobs_page(queue, state, kind, args, before, limit): the rows of
-- the `jobs` view a list shows, newest (highest id) first: at most `limit`
-- jobs with an id below `before` (NULL: from the newest), each filter NULL
-- for any (args: jsonb containment). What list_jobs.sql and
-- list_jobs_page.sql read, instead of ordering the whole view, whose
-- terminal history (every completion the rings retain, one probe of the
-- lane index each) cost seconds to sort (17 s for a page of 50 after a
-- million completions).
--
-- Live jobs (bounded by live work): every live job's id, queue, state and
-- `at` from live_jobs' parts (lane_entries, open_batch_items, the parked
-- and deferred rows), newest first, the tombstones of waiting entries
-- probed on that order until the page is full, and only the page's bodies
-- read; with a filter on kind or args, every live job's body (live_jobs).
-- Terminal history and dead letters are read through
-- their id indexes, in a window of ids [lo, before) that starts just below
-- the newest id (awa.job_id_seq, through pg_sequences, which USAGE is
-- enough for) and widens eightfold until it holds `limit` matching jobs or
-- reaches id 1: every job newer than lo is in the window, so the newest
-- `limit` of it are the newest of all. done_batches rows are found by the
-- id range they cover (done_batches_jobs_idx), done_entries,
-- failure_entries and dlq_entries by their job id; only the jobs returned
-- are hydrated from their body (a completion's is in its ready slot). So a
-- page costs its live jobs plus what its window holds: the newest page
-- reads the last few completions, whatever is retained. A filter that
-- matches little (a kind, args) widens the window until it has found a
-- page, as far as the history goes.
-- Retired slots are left out, as terminal_jobs does. STABLE: every
-- statement sees the caller's snapshot. Generic plans: each statement is
-- planned once per session (planning one over every partition of the
-- rings costs more than running it); jit = off: their estimates follow
-- the windows' guesses, not what a window holds.
--
-- Bounds (SQLSTATE 22023, before anything is read): limit within
-- awa_core::bounds::LIST_LIMIT, 1 to 10000.
CREATE OR REPLACE FUNCTION {schema}.jobs_page(
    p_queue text, p_state text, p_kind text, p_args jsonb, p_before bigint, p_limit integer
) RETURNS SETOF {schema}.jobs LANGUAGE plpgsql STABLE ROWS 50
SET plan_cache_mode = force_generic_plan SET jit = off AS $fn$
DECLARE
    v_newest bigint;
    v_lo     bigint;
    v_span   bigint;
    v_found  integer := 0;
    v_live   boolean := p_state IS NULL
                        OR p_state NOT IN ('completed', 'failed', 'cancelled', 'dead_lettered');
    v_done   boolean := p_state IS NULL
                        OR p_state IN ('completed', 'failed', 'cancelled', 'dead_lettered');
BEGIN
    IF p_limit IS NULL OR p_limit NOT BETWEEN 1 AND 10000 THEN
        RAISE EXCEPTION 'jobs_page: limit must be 1 to 10000 (got %)', coalesce(p_limit::text, 'NULL')
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'A page holds 1 to 10000 jobs (awa_core::bounds::LIST_LIMIT); page on with `before`.';
    END IF;
    IF v_done THEN
        v_newest := coalesce(p_before - 1,
                             (SELECT s.last_value FROM pg_catalog.pg_sequences s
                               WHERE s.schemaname = 'awa' AND s.sequencename = 'job_id_seq'));
        v_span := greatest(p_limit, 16)::bigint * 4;
        WHILE v_newest IS NOT NULL LOOP
            v_lo := greatest(v_newest - v_span + 1, 1);
            SELECT count(*) INTO v_found FROM (
                SELECT 1
                  FROM (SELECT d.job_id AS id
                          FROM {schema}.done_entries d
                         WHERE d.job_id >= v_lo AND (p_before IS NULL OR d.job_id < p_before)
                           AND (p_queue IS NULL OR d.queue = p_queue)
                           AND (p_state IS NULL OR d.state = p_state)
                           AND (p_kind IS NULL OR d.body ->> 'kind' = p_kind)
                           AND (p_args IS NULL OR d.body -> 'args' @> p_args)
                           AND NOT EXISTS (SELECT 1 FROM {schema}.ring_retirements x
                                            WHERE x.ring = 'queue' AND x.slot = d.slot)
                        UNION ALL
                        SELECT u.job_id
                          FROM {schema}.done_batches b
                         CROSS JOIN LATERAL unnest(b.job_ids, b.ready_seqs, b.priorities, b.shards)
                               AS u(job_id, ready_seq, priority, shard)
                         WHERE int8range(b.lo_job_id, b.hi_job_id, '[]') && int8range(v_lo, p_before)
                           AND u.job_id >= v_lo AND (p_before IS NULL OR u.job_id < p_before)
                           AND (p_queue IS NULL OR b.queue = p_queue)
                           AND (p_state IS NULL OR p_state = 'completed')
                           AND NOT EXISTS (SELECT 1 FROM {schema}.ring_retirements x
                                            WHERE x.ring = 'queue' AND x.slot = b.slot)
                           -- kind and args are in the body: looked up only
                           -- when asked for.
                           AND (p_kind IS NULL AND p_args IS NULL
                                OR (SELECT true FROM {schema}.ready_entries r
                                     WHERE r.slot = b.slot AND r.queue = b.queue
                                       AND r.priority = u.priority AND r.shard = u.shard
                                       AND r.lane_seq = u.ready_seq AND r.job_id = u.job_id
                                       AND (p_kind IS NULL OR r.kind = p_kind)
                                       AND (p_args IS NULL OR r.args @> p_args)
                                     LIMIT 1))
                        UNION ALL
                        SELECT f.job_id
                          FROM {schema}.failure_entries f
                         WHERE f.job_id >= v_lo AND (p_before IS NULL OR f.job_id < p_before)
                           AND (p_queue IS NULL OR f.queue = p_queue)
                           AND (p_state IS NULL OR f.state = p_state)
                           AND (p_kind IS NULL OR f.kind = p_kind)
                           AND (p_args IS NULL OR f.args @> p_args)
                        UNION ALL
                        SELECT q.job_id
                          FROM {schema}.dlq_entries q
                         WHERE q.job_id >= v_lo AND (p_before IS NULL OR q.job_id < p_before)
                           AND (p_queue IS NULL OR q.queue = p_queue)
                           AND (p_state IS NULL OR p_state = 'dead_lettered')
                           AND (p_kind IS NULL OR q.kind = p_kind)
                           AND (p_args IS NULL OR q.args @> p_args)) w
                 LIMIT p_limit) n;
            EXIT WHEN v_found >= p_limit OR v_lo = 1;
            v_span := least(v_span, v_newest) * 8;
        END LOOP;
    END IF;

    RETURN QUERY
    SELECT r.* FROM (
        -- Live jobs with a filter on kind or args: every row's body.
        (SELECT l.* FROM {schema}.live_jobs l
          WHERE v_live AND (p_kind IS NOT NULL OR p_args IS NOT NULL)
            AND (p_queue IS NULL OR l.queue = p_queue) AND (p_state IS NULL OR l.state = p_state)
            AND (p_kind IS NULL OR l.kind = p_kind) AND (p_args IS NULL OR l.args @> p_args)
            AND (p_before IS NULL OR l.id < p_before)
          ORDER BY l.id DESC
          LIMIT p_limit)
        UNION ALL
        -- Live jobs otherwise: live_jobs' branches, newest first by what
        -- each already has at hand, then the tombstone probe of waiting
        -- entries on that order until the page is full (above the OFFSET 0
        -- fence, so it is not run for every entry before the sort), then
        -- the bodies of the page's entries and claimed jobs.
        (SELECT k.id, k.queue,
                CASE WHEN k.src = 'row' THEN k.kind ELSE e.kind END,
                CASE WHEN k.src = 'row' THEN k.args ELSE e.args END,
                k.priority, k.state,
                CASE WHEN k.src = 'entry' THEN e.attempt ELSE k.attempt END,
                CASE WHEN k.src = 'row' THEN k.max_attempts ELSE e.max_attempts END,
                CASE WHEN k.src = 'entry' THEN e.run_lease ELSE k.run_lease END,
                CASE WHEN k.src = 'row' THEN k.created_at ELSE e.created_at END,
                k.at, k.last_error,
                CASE WHEN k.src = 'row' THEN k.metadata ELSE e.metadata END,
                CASE WHEN k.src = 'row' THEN k.attempts ELSE e.attempts END,
                k.holder
           FROM (SELECT c.* FROM (
                     SELECT x.* FROM (
                         SELECT e.job_id AS id, e.queue, 'available'::text AS state,
                                e.ready_at AS at, NULL::uuid AS holder, NULL::bigint AS run_lease,
                                NULL::integer AS attempt, NULL::text AS last_error,
                                NULL::text AS kind, NULL::jsonb AS args, e.priority,
                                NULL::integer AS max_attempts, NULL::timestamptz AS created_at,
                                NULL::jsonb AS metadata, NULL::jsonb AS attempts,
                                'entry'::text AS src, e.slot, e.shard, e.lane_seq
                           FROM {schema}.lane_entries e
                          WHERE (p_queue IS NULL OR e.queue = p_queue)
                            AND (p_state IS NULL OR p_state = 'available')
                            AND (p_before IS NULL OR e.job_id < p_before)
                         UNION ALL
                         SELECT i.job_id, i.queue, i.state, i.claimed_at, i.instance_id,
                                i.run_lease, i.attempt, NULL, NULL, NULL, i.priority, NULL, NULL,
                                NULL, NULL, 'item', i.ready_slot, i.shard, i.ready_seq
                           FROM {schema}.open_batch_items i
                          WHERE (p_queue IS NULL OR i.queue = p_queue)
                            AND (p_state IS NULL OR i.state = p_state)
                            AND (p_before IS NULL OR i.job_id < p_before)
                         UNION ALL
                         SELECT l.id, l.queue, l.state, l.at, l.holder, l.run_lease, l.attempt,
                                l.last_error, l.kind, l.args, l.priority, l.max_attempts,
                                l.created_at, l.metadata, l.attempts, 'row', NULL, NULL, NULL
                           FROM (SELECT p.job_id AS id, p.queue,
                                        CASE WHEN EXISTS (SELECT 1 FROM {schema}.worker_buffers w
                                                           WHERE w.instance_id = p.instance_id
                                                             AND p.job_id = ANY (w.job_ids))
                                             THEN 'buffered' ELSE 'running' END AS state,
                                        p.claimed_at AS at, p.instance_id AS holder, p.run_lease,
                                        p.attempt, NULL::text AS last_error, p.kind, p.args,
                                        p.priority, p.max_attempts, p.created_at, p.metadata,
                                        p.attempts
                                   FROM {schema}.parked_attempts p
                                 UNION ALL
                                 SELECT d.job_id, d.queue,
                                        CASE d.reason WHEN 'retry' THEN 'retryable'
                                                      WHEN 'released' THEN 'available'
                                                      ELSE d.reason END,
                                        d.run_at, NULL, d.run_lease, d.attempt, d.last_error,
                                        d.kind, d.args, d.priority, d.max_attempts, d.created_at,
                                        d.metadata, d.attempts
                                   FROM {schema}.deferred_jobs d) l
                          WHERE (p_queue IS NULL OR l.queue = p_queue)
                            AND (p_state IS NULL OR l.state = p_state)
                            AND (p_before IS NULL OR l.id < p_before)) x
                      WHERE v_live AND p_kind IS NULL AND p_args IS NULL
                      ORDER BY x.id DESC
                     OFFSET 0) c
                  WHERE c.src <> 'entry'
                     OR (SELECT true FROM {schema}.ready_tombstones t
                          WHERE t.slot = c.slot AND t.job_id = c.id AND t.lane_seq = c.lane_seq
                          LIMIT 1) IS NULL
                  LIMIT p_limit) k
           LEFT JOIN LATERAL (
                 SELECT e.* FROM {schema}.ready_entries e
                  WHERE k.src <> 'row' AND e.slot = k.slot AND e.queue = k.queue
                    AND e.priority = k.priority AND e.shard = k.shard
                    AND e.lane_seq = k.lane_seq AND e.job_id = k.id
                  LIMIT 1) e ON true)
        UNION ALL
        -- The window's newest, then their bodies.
        (SELECT k.id, k.queue, coalesce(k.kind, e.kind), coalesce(k.args, e.args),
                coalesce(k.priority, e.priority), k.state, k.attempt,
                coalesce(k.max_attempts, e.max_attempts), k.run_lease,
                coalesce(k.created_at, e.created_at), k.at, k.last_error,
                CASE WHEN k.batch THEN e.metadata ELSE k.metadata END,
                CASE WHEN k.batch
                     THEN coalesce(e.attempts, '[]'::jsonb) || jsonb_build_array(jsonb_build_object(
                              'attempt', k.attempt, 'ended_at', k.at, 'outcome', 'completed'))
                     ELSE k.attempts END,
                NULL::uuid
           FROM (SELECT w.* FROM (
                     SELECT d.job_id AS id, d.queue, d.body ->> 'kind' AS kind, d.body -> 'args' AS args,
                            (d.body ->> 'priority')::smallint AS priority, d.state, d.attempt,
                            (d.body ->> 'max_attempts')::integer AS max_attempts, d.run_lease,
                            (d.body ->> 'created_at')::timestamptz AS created_at, d.finalized_at AS at,
                            d.last_error, d.body -> 'metadata' AS metadata, d.attempts,
                            false AS batch, NULL::integer AS slot, NULL::smallint AS shard,
                            NULL::bigint AS ready_seq
                       FROM {schema}.done_entries d
                      WHERE v_done AND d.job_id >= v_lo AND (p_before IS NULL OR d.job_id < p_before)
                        AND (p_queue IS NULL OR d.queue = p_queue)
                        AND (p_state IS NULL OR d.state = p_state)
                        AND (p_kind IS NULL OR d.body ->> 'kind' = p_kind)
                        AND (p_args IS NULL OR d.body -> 'args' @> p_args)
                        AND NOT EXISTS (SELECT 1 FROM {schema}.ring_retirements x
                                         WHERE x.ring = 'queue' AND x.slot = d.slot)
                     UNION ALL
                     SELECT u.job_id, b.queue, NULL, NULL, u.priority, 'completed', u.attempt, NULL,
                            u.run_lease, NULL, b.finalized_at, NULL, NULL, NULL,
                            true, b.slot, u.shard, u.ready_seq
                       FROM {schema}.done_batches b
                      CROSS JOIN LATERAL unnest(b.job_ids, b.run_leases, b.attempts, b.ready_seqs,
                                                b.priorities, b.shards)
                            AS u(job_id, run_lease, attempt, ready_seq, priority, shard)
                      WHERE v_done
                        AND int8range(b.lo_job_id, b.hi_job_id, '[]') && int8range(v_lo, p_before)
                        AND u.job_id >= v_lo AND (p_before IS NULL OR u.job_id < p_before)
                        AND (p_queue IS NULL OR b.queue = p_queue)
                        AND (p_state IS NULL OR p_state = 'completed')
                        AND NOT EXISTS (SELECT 1 FROM {schema}.ring_retirements x
                                         WHERE x.ring = 'queue' AND x.slot = b.slot)
                        AND (p_kind IS NULL AND p_args IS NULL
                             OR (SELECT true FROM {schema}.ready_entries r
                                  WHERE r.slot = b.slot AND r.queue = b.queue
                                    AND r.priority = u.priority AND r.shard = u.shard
                                    AND r.lane_seq = u.ready_seq AND r.job_id = u.job_id
                                    AND (p_kind IS NULL OR r.kind = p_kind)
                                    AND (p_args IS NULL OR r.args @> p_args)
                                  LIMIT 1))
                     UNION ALL
                     SELECT f.job_id, f.queue, f.kind, f.args, f.priority, f.state, f.attempt,
                            f.max_attempts, f.run_lease, f.created_at, f.finalized_at, f.last_error,
                            f.metadata, f.attempts, false, NULL, NULL, NULL
                       FROM {schema}.failure_entries f
                      WHERE v_done AND f.job_id >= v_lo AND (p_before IS NULL OR f.job_id < p_before)
                        AND (p_queue IS NULL OR f.queue = p_queue)
                        AND (p_state IS NULL OR f.state = p_state)
                        AND (p_kind IS NULL OR f.kind = p_kind)
                        AND (p_args IS NULL OR f.args @> p_args)
                     UNION ALL
                     SELECT q.job_id, q.queue, q.kind, q.args, q.priority, 'dead_lettered', q.attempt,
                            q.max_attempts, q.run_lease, q.created_at, q.dead_at, q.last_error,
                            q.metadata, q.attempts, false, NULL, NULL, NULL
                       FROM {schema}.dlq_entries q
                      WHERE v_done AND q.job_id >= v_lo AND (p_before IS NULL OR q.job_id < p_before)
                        AND (p_queue IS NULL OR q.queue = p_queue)
                        AND (p_state IS NULL OR p_state = 'dead_lettered')
                        AND (p_kind IS NULL OR q.kind = p_kind)
                        AND (p_args IS NULL OR q.args @> p_args)) w
                  ORDER BY w.id DESC
                  LIMIT p_limit) k
           -- A completion's body, one probe of the lane index (LATERAL +
           -- LIMIT, as terminal_jobs).
           LEFT JOIN LATERAL (
                 SELECT e.* FROM {schema}.ready_entries e
                  WHERE k.batch AND e.slot = k.slot AND e.queue = k.queue
                    AND e.priority = k.priority AND e.shard = k.shard
                    AND e.lane_seq = k.ready_seq AND e.job_id = k.id
                  LIMIT 1) e ON true)
    ) r
    ORDER BY r.id DESC
    LIMIT p_limit;
END
$fn$;
