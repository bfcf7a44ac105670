-- {schema}.enqueue_local(...): the producer's work, inside the caller's
-- transaction (commit makes the jobs visible, rollback leaves no trace).
-- Parallel arrays, one element per job; many jobs per call.
--
-- * max_attempts NULL takes the queue's default (awa.queue_meta, else 25).
-- * run_at NULL or not in the future: runnable now, appended to the ready
--   ring in array order; otherwise held by the deferred plane.
-- * unique_key: at most one non-terminal job per key (unique_take). A job
--   whose key is taken is not inserted; its row reports the owner's id and
--   inserted = false. A job is created exactly when this call inserted its
--   key row, so a key never commits without its job. A concurrent enqueue
--   of the same key waits for the first to commit or roll back (the primary
--   key of job_uniques). Within one call the first element with a key wins;
--   later ones report it. Under REPEATABLE READ / SERIALIZABLE, a key taken
--   by a transaction that committed after the caller's snapshot is refused
--   with SQLSTATE 40001 (retry the transaction).
-- * unique (optional, a trailing argument: callers of contract version 1
--   leave it out): per element NULL, or a key spec (unique_derive): the
--   element's key is then derived from the spec, its kind, queue, args
--   and unique_key, and may keep holding after the job finished until
--   its period ends. Elements without a spec use unique_key as given.
--
-- * size: args + metadata of one job, as JSON text (jsonb::text), must not
--   exceed the substrate's max_job_bytes (substrate_info, default 1 MiB).
--   A larger job refuses the whole call (SQLSTATE 54000,
--   program_limit_exceeded) before anything is written: workers hold a
--   claimed job in memory, and every producer path comes through here.
--
-- * substrate: exactly this one, whatever the routing says. The routed
--   entry point is {schema}.enqueue (fn_enqueue_routed.sql), which calls
--   this on the substrate that receives writes; PgReadyPlane pinned to a
--   schema calls this directly.
--
-- * bounds (awa_core::bounds), checked before anything is written or an
--   id drawn, with the SQLSTATEs of the producer contract
--   (docs/sql-producer.md): a NULL queue, kind, args or priority 23502; a
--   priority outside 1..4 or max attempts outside 1..1000 23514; a run_at
--   that is not NULL and not from 1970-01-01 00:00:00+00 up to (not
--   including) 10000-01-01 00:00:00+00 (awa_core::time::WRITABLE:
--   infinity, -infinity, year 10000 and later, before 1970) 23514, so no
--   reader meets a time it cannot show (issue 36).
--
-- Returns one row per input element, in input order.
CREATE OR REPLACE FUNCTION {schema}.enqueue_local(
    p_queues       text[],
    p_kinds        text[],
    p_args         jsonb[],
    p_priorities   smallint[],
    p_run_at       timestamptz[],
    p_max_attempts integer[],
    p_unique_keys  text[],
    p_metadata     jsonb[],
    p_unique       jsonb[] DEFAULT NULL
) RETURNS TABLE (job_id bigint, inserted boolean, scheduled boolean)
LANGUAGE plpgsql AS $fn$
#variable_conflict use_column
DECLARE
    v_n      integer := coalesce(array_length(p_queues, 1), 0);
    v_ids    bigint[];
    v_owners bigint[];
    v_max    integer[];
    v_keys   text[] := p_unique_keys;
    v_holds  jsonb[];
    v_now_runnable boolean;
    v_limit     integer;
    v_big_ord   bigint;
    v_big_bytes bigint;
    v_bad       text;
    a_ids bigint[]; a_queues text[]; a_priorities smallint[]; a_kinds text[]; a_args jsonb[];
    a_max integer[]; a_run_at timestamptz[]; a_keys text[]; a_meta jsonb[];
BEGIN
    IF v_n = 0 THEN
        RETURN;
    END IF;
    IF array_length(p_kinds, 1) IS DISTINCT FROM v_n OR array_length(p_args, 1) IS DISTINCT FROM v_n
       OR array_length(p_priorities, 1) IS DISTINCT FROM v_n OR array_length(p_run_at, 1) IS DISTINCT FROM v_n
       OR array_length(p_max_attempts, 1) IS DISTINCT FROM v_n OR array_length(p_unique_keys, 1) IS DISTINCT FROM v_n
       OR array_length(p_metadata, 1) IS DISTINCT FROM v_n
       OR (p_unique IS NOT NULL AND array_length(p_unique, 1) IS DISTINCT FROM v_n) THEN
        RAISE EXCEPTION 'enqueue arrays differ in length' USING ERRCODE = 'invalid_parameter_value',
              HINT = 'Send one element per job in every array.';
    END IF;
    -- The bounds, before any id is drawn (sequences do not roll back).
    SELECT b.ord, b.what INTO v_big_ord, v_bad
      FROM (SELECT i.ord,
                   CASE WHEN i.q IS NULL THEN 'queue' WHEN i.k IS NULL THEN 'kind'
                        WHEN i.a IS NULL THEN 'args' WHEN i.p IS NULL THEN 'priority'
                        WHEN i.p NOT BETWEEN 1 AND 4 THEN 'priority ' || i.p
                        WHEN i.m NOT BETWEEN 1 AND 1000 THEN 'max attempts ' || i.m
                        WHEN i.r < '1970-01-01 00:00:00+00' OR i.r >= '10000-01-01 00:00:00+00'
                             THEN 'run_at ' || (i.r AT TIME ZONE 'UTC')::text || ' UTC' END AS what
              FROM unnest(p_queues, p_kinds, p_args, p_priorities, p_max_attempts, p_run_at)
                   WITH ORDINALITY AS i(q, k, a, p, m, r, ord)) b
     WHERE b.what IS NOT NULL
     ORDER BY b.ord
     LIMIT 1;
    IF FOUND AND v_bad IN ('queue', 'kind', 'args', 'priority') THEN
        RAISE EXCEPTION 'job % of this enqueue has no %', v_big_ord, v_bad
            USING ERRCODE = 'not_null_violation',
                  HINT = 'Every job needs a queue, a kind, args (any JSON) and a priority (1 to 4).';
    ELSIF FOUND AND v_bad LIKE 'run_at %' THEN
        RAISE EXCEPTION 'job % of this enqueue has % (run_at is from 1970-01-01 00:00:00 UTC to 9999-12-31 23:59:59.999999 UTC, or NULL)',
                        v_big_ord, v_bad
            USING ERRCODE = 'check_violation',
                  HINT = 'Send a finite run_at from 1970 up to year 9999 (a time in the past runs now), or NULL to run now.';
    ELSIF FOUND THEN
        RAISE EXCEPTION 'job % of this enqueue has % (priority is 1 to 4, max attempts 1 to 1000)',
                        v_big_ord, v_bad
            USING ERRCODE = 'check_violation',
                  HINT = 'Send a priority of 1 (runs first) to 4 (runs last) and max attempts of 1 to 1000, or NULL for the queue''s default.';
    END IF;

    -- The size limit. Rendering to text costs, so only values whose stored
    -- size could reach the limit are measured (JSON text is at most ~6x the
    -- binary jsonb size: a control character, 1 byte stored, is 6 as
    -- \u0001; we allow 8x), plus any compressed value, whose stored size
    -- says nothing.
    SELECT s.max_job_bytes INTO v_limit FROM {schema}.substrate_info s;
    SELECT b.ord, b.bytes INTO v_big_ord, v_big_bytes
      FROM (SELECT i.ord, octet_length(i.a::text) + coalesce(octet_length(i.md::text), 0) AS bytes
              FROM unnest(p_args, p_metadata) WITH ORDINALITY AS i(a, md, ord)
             WHERE (coalesce(pg_column_size(i.a), 0) + coalesce(pg_column_size(i.md), 0))::bigint * 8 > v_limit
                OR pg_column_compression(i.a) IS NOT NULL
                OR pg_column_compression(i.md) IS NOT NULL) b
     WHERE b.bytes > v_limit
     ORDER BY b.ord
     LIMIT 1;
    IF FOUND THEN
        PERFORM {schema}.enqueue_oversized(v_big_ord, p_queues[v_big_ord], p_kinds[v_big_ord],
                                           v_big_bytes, v_limit);
    END IF;

    -- ready_append's ordering rule: xid before any lane position.
    PERFORM pg_current_xact_id();

    v_ids := ARRAY(SELECT nextval('awa.job_id_seq') FROM generate_series(1, v_n));
    v_max := ARRAY(SELECT coalesce(i.max_attempts, m.max_attempts, 25)
                     FROM unnest(p_queues, p_max_attempts) WITH ORDINALITY AS i(queue, max_attempts, ord)
                     LEFT JOIN awa.queue_meta m ON m.queue = i.queue
                    ORDER BY i.ord);

    -- Key specs become keys (and holds) here, for every producer alike.
    -- A call without specs pays one NULL test.
    IF p_unique IS NOT NULL AND EXISTS (SELECT 1 FROM unnest(p_unique) s WHERE s IS NOT NULL) THEN
        v_holds := ARRAY(SELECT CASE WHEN i.spec IS NOT NULL
                                     THEN {schema}.unique_derive(i.key, i.spec, i.q, i.k, i.a) END
                           FROM unnest(p_unique_keys, p_unique, p_queues, p_kinds, p_args)
                                WITH ORDINALITY AS i(key, spec, q, k, a, ord)
                          ORDER BY i.ord);
        v_keys := ARRAY(SELECT coalesce(i.derived ->> 'key', i.key)
                          FROM unnest(v_holds, p_unique_keys) WITH ORDINALITY AS i(derived, key, ord)
                         ORDER BY i.ord);
    END IF;

    -- The common case, everything runnable now and no unique keys, goes
    -- straight to the ready ring without splitting the arrays.
    IF NOT EXISTS (SELECT 1 FROM unnest(v_keys, p_run_at) AS k(key, run_at)
                    WHERE k.key IS NOT NULL OR k.run_at > now()) THEN
        PERFORM 1 FROM {schema}.ready_append(
            v_ids, p_queues, p_priorities, p_kinds, p_args,
            array_fill(0, ARRAY[v_n]), v_max, array_fill(0::bigint, ARRAY[v_n]),
            array_fill(now(), ARRAY[v_n]), v_keys, p_metadata);
        RETURN QUERY SELECT i.id, true, false FROM unnest(v_ids) WITH ORDINALITY AS i(id, ord) ORDER BY i.ord;
        RETURN;
    END IF;

    -- Ownership of every key is decided by what unique_take inserted for
    -- it; an element is created below only when it owns its key.
    IF EXISTS (SELECT 1 FROM unnest(v_keys) k WHERE k IS NOT NULL) THEN
        v_owners := {schema}.unique_take(v_keys, v_ids, v_holds);
    ELSE
        v_owners := v_ids;
    END IF;

    -- Split the jobs that are ours to insert into runnable and scheduled,
    -- keeping input order (array_agg ... ORDER BY ord).
    FOR v_now_runnable IN SELECT true UNION ALL SELECT false LOOP
        SELECT array_agg(i.id ORDER BY i.ord), array_agg(i.q ORDER BY i.ord),
               array_agg(i.p ORDER BY i.ord), array_agg(i.k ORDER BY i.ord),
               array_agg(i.a ORDER BY i.ord), array_agg(i.m ORDER BY i.ord),
               array_agg(i.run_at ORDER BY i.ord), array_agg(i.u ORDER BY i.ord),
               array_agg(i.md ORDER BY i.ord)
          INTO a_ids, a_queues, a_priorities, a_kinds, a_args, a_max, a_run_at, a_keys, a_meta
          FROM unnest(v_ids, v_owners, p_run_at, p_queues, p_priorities, p_kinds, p_args,
                      v_max, v_keys, p_metadata)
               WITH ORDINALITY AS i(id, owner, run_at, q, p, k, a, m, u, md, ord)
         WHERE i.id = i.owner
           AND (i.run_at IS NULL OR i.run_at <= now()) = v_now_runnable;
        CONTINUE WHEN a_ids IS NULL;
        IF v_now_runnable THEN
            PERFORM 1 FROM {schema}.ready_append(
                a_ids, a_queues, a_priorities, a_kinds, a_args,
                array_fill(0, ARRAY[cardinality(a_ids)]), a_max,
                array_fill(0::bigint, ARRAY[cardinality(a_ids)]),
                array_fill(now(), ARRAY[cardinality(a_ids)]), a_keys, a_meta);
        ELSE
            PERFORM {schema}.deferred_schedule(
                a_ids, a_queues, a_priorities, a_kinds, a_args, a_max, a_run_at, a_keys, a_meta);
        END IF;
    END LOOP;

    RETURN QUERY
    SELECT i.owner, i.id = i.owner, i.run_at IS NOT NULL AND i.run_at > now()
      FROM unnest(v_ids, v_owners, p_run_at) WITH ORDINALITY AS i(id, owner, run_at, ord)
     ORDER BY i.ord;
END
$fn$;
