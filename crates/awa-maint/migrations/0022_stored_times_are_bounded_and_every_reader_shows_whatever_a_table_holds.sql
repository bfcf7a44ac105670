-- Awa migration 22: stored times are bounded and every reader shows whatever a table holds
--
-- Drafted by `cargo xtask migration draft` (hand-written parts first, then
-- what the sources define), then reviewed. Frozen once on main: never edit
-- it, add a new step. Runs once, in one transaction, as the migrator.

-- Hand-written: cron_times.sql
-- cron_jobs' times within awa_core::time::WRITABLE (issue 36): the runtime
-- role may write the table by SQL, and a time no reader can show
-- (infinity, a year past 262143) made `awa cron list` and the leader's
-- cron pass panic. A row that already holds such a time is first put
-- right: fire_from (and created_at, updated_at) become now(), so no tick
-- before it fires; last_tick, last_enqueued_at and error_since become NULL.
UPDATE awa.cron_jobs SET
    fire_from = CASE WHEN fire_from >= '1970-01-01 00:00:00+00' AND fire_from < '10000-01-01 00:00:00+00'
                     THEN fire_from ELSE now() END,
    last_tick = CASE WHEN last_tick >= '1970-01-01 00:00:00+00' AND last_tick < '10000-01-01 00:00:00+00'
                     THEN last_tick END,
    last_enqueued_at = CASE WHEN last_enqueued_at >= '1970-01-01 00:00:00+00'
                             AND last_enqueued_at < '10000-01-01 00:00:00+00'
                            THEN last_enqueued_at END,
    created_at = CASE WHEN created_at >= '1970-01-01 00:00:00+00' AND created_at < '10000-01-01 00:00:00+00'
                      THEN created_at ELSE now() END,
    updated_at = CASE WHEN updated_at >= '1970-01-01 00:00:00+00' AND updated_at < '10000-01-01 00:00:00+00'
                      THEN updated_at ELSE now() END,
    error_since = CASE WHEN error_since >= '1970-01-01 00:00:00+00' AND error_since < '10000-01-01 00:00:00+00'
                       THEN error_since END
 WHERE NOT coalesce(fire_from >= '1970-01-01 00:00:00+00' AND fire_from < '10000-01-01 00:00:00+00'
        AND last_tick >= '1970-01-01 00:00:00+00' AND last_tick < '10000-01-01 00:00:00+00'
        AND last_enqueued_at >= '1970-01-01 00:00:00+00'
        AND last_enqueued_at < '10000-01-01 00:00:00+00'
        AND created_at >= '1970-01-01 00:00:00+00' AND created_at < '10000-01-01 00:00:00+00'
        AND updated_at >= '1970-01-01 00:00:00+00' AND updated_at < '10000-01-01 00:00:00+00'
        AND error_since >= '1970-01-01 00:00:00+00' AND error_since < '10000-01-01 00:00:00+00', true);
ALTER TABLE awa.cron_jobs ADD CONSTRAINT cron_jobs_times_writable CHECK (
        fire_from >= '1970-01-01 00:00:00+00' AND fire_from < '10000-01-01 00:00:00+00'
        AND last_tick >= '1970-01-01 00:00:00+00' AND last_tick < '10000-01-01 00:00:00+00'
        AND last_enqueued_at >= '1970-01-01 00:00:00+00'
        AND last_enqueued_at < '10000-01-01 00:00:00+00'
        AND created_at >= '1970-01-01 00:00:00+00' AND created_at < '10000-01-01 00:00:00+00'
        AND updated_at >= '1970-01-01 00:00:00+00' AND updated_at < '10000-01-01 00:00:00+00'
        AND error_since >= '1970-01-01 00:00:00+00' AND error_since < '10000-01-01 00:00:00+00');

-- Runtime function templates, as the sources define them.
INSERT INTO awa.substrate_functions (name, ord, body) VALUES ('deferred_promote', 13, $awa_template$-- {schema}.deferred_promote(limit): move up to `limit` due jobs into the
-- ready ring, earliest first, with their attempt records. Returns how many
-- moved.
--
-- Safe with several promoters: rows are taken FOR UPDATE SKIP LOCKED, so
-- two promoters split the due work instead of moving a job twice; the
-- delete and the append commit together or not at all.
--
-- `limit` is 1 to 10000 (awa_core::bounds::MAINT_LIMIT; SQLSTATE 22023).
CREATE OR REPLACE FUNCTION {schema}.deferred_promote(p_limit integer)
RETURNS integer LANGUAGE plpgsql AS $fn$
#variable_conflict use_column
DECLARE
    v_count integer;
BEGIN
    IF p_limit IS NULL OR p_limit NOT BETWEEN 1 AND 10000 THEN
        RAISE EXCEPTION 'deferred_promote: limit must be 1 to 10000 (got %)', coalesce(p_limit::text, 'NULL')
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'Rows one maintenance call moves (awa_core::bounds::MAINT_LIMIT); the leader promotes 2000 at a time.';
    END IF;
    WITH due AS (
        DELETE FROM {schema}.deferred_jobs d
         WHERE d.job_id IN (SELECT x.job_id FROM {schema}.deferred_jobs x
                             WHERE x.run_at <= now()
                             ORDER BY x.run_at
                             LIMIT p_limit
                               FOR UPDATE SKIP LOCKED)
        RETURNING d.*
    ),
    ordered AS (
        SELECT * FROM due ORDER BY run_at, job_id
    )
    SELECT count(*) INTO v_count
      FROM {schema}.ready_append(
          ARRAY(SELECT job_id FROM ordered),
          ARRAY(SELECT queue FROM ordered),
          ARRAY(SELECT priority FROM ordered),
          ARRAY(SELECT kind FROM ordered),
          ARRAY(SELECT args FROM ordered),
          ARRAY(SELECT attempt FROM ordered),
          ARRAY(SELECT max_attempts FROM ordered),
          ARRAY(SELECT run_lease FROM ordered),
          -- A created_at outside what ready_append accepts (only a
          -- superuser's write can hold one) becomes now(), rather than
          -- refusing every promotion behind it.
          ARRAY(SELECT CASE WHEN created_at >= '1970-01-01 00:00:00+00'
                             AND created_at < '10000-01-01 00:00:00+00'
                            THEN created_at ELSE now() END FROM ordered),
          ARRAY(SELECT unique_key FROM ordered),
          ARRAY(SELECT metadata FROM ordered),
          ARRAY(SELECT attempts FROM ordered));
    RETURN v_count;
END
$fn$;
$awa_template$)
ON CONFLICT (name) DO UPDATE SET ord = EXCLUDED.ord, body = EXCLUDED.body;
INSERT INTO awa.substrate_functions (name, ord, body) VALUES ('deferred_schedule', 12, $awa_template$-- {schema}.deferred_schedule(...): hold jobs that are not runnable yet.
-- Parallel arrays, one element per job; run_at is when it becomes due.
-- Called by enqueue, which checks its input; the runtime role may call it
-- directly, so it refuses (SQLSTATE 22023) arrays of different lengths, a
-- NULL id, queue, kind, args or run_at, a priority outside 1..4
-- (awa_core::bounds::PRIORITY) and max attempts outside 1..1000
-- (MAX_ATTEMPTS), a run_at not from 1970-01-01 00:00:00+00 up to (not
-- including) 10000-01-01 00:00:00+00 (awa_core::time::WRITABLE: no
-- infinity, so no reader meets a time it cannot show), before anything is
-- written.
CREATE OR REPLACE FUNCTION {schema}.deferred_schedule(
    p_job_ids      bigint[],
    p_queues       text[],
    p_priorities   smallint[],
    p_kinds        text[],
    p_args         jsonb[],
    p_max_attempts integer[],
    p_run_at       timestamptz[],
    p_unique_keys  text[],
    p_metadata     jsonb[]
) RETURNS void LANGUAGE plpgsql AS $fn$
#variable_conflict use_column
BEGIN
    IF array_length(p_queues, 1) IS DISTINCT FROM array_length(p_job_ids, 1)
       OR array_length(p_priorities, 1) IS DISTINCT FROM array_length(p_job_ids, 1)
       OR array_length(p_kinds, 1) IS DISTINCT FROM array_length(p_job_ids, 1)
       OR array_length(p_args, 1) IS DISTINCT FROM array_length(p_job_ids, 1)
       OR array_length(p_max_attempts, 1) IS DISTINCT FROM array_length(p_job_ids, 1)
       OR array_length(p_run_at, 1) IS DISTINCT FROM array_length(p_job_ids, 1)
       OR array_length(p_unique_keys, 1) IS DISTINCT FROM array_length(p_job_ids, 1)
       OR array_length(p_metadata, 1) IS DISTINCT FROM array_length(p_job_ids, 1) THEN
        RAISE EXCEPTION 'deferred_schedule arrays differ in length' USING ERRCODE = 'invalid_parameter_value',
              HINT = 'Send one element per job in every array.';
    END IF;
    IF EXISTS (SELECT 1
                 FROM unnest(p_job_ids, p_queues, p_priorities, p_kinds, p_args, p_max_attempts, p_run_at)
                      AS i(id, q, p, k, a, m, r)
                WHERE i.id IS NULL OR i.q IS NULL OR i.k IS NULL OR i.a IS NULL OR i.r IS NULL
                   OR i.p IS NULL OR i.p NOT BETWEEN 1 AND 4
                   OR i.m IS NULL OR i.m NOT BETWEEN 1 AND 1000
                   OR i.r < '1970-01-01 00:00:00+00' OR i.r >= '10000-01-01 00:00:00+00') THEN
        RAISE EXCEPTION 'deferred_schedule: a job has no id, queue, kind, args or run_at, or a priority, max attempts or run_at out of range'
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'Priority is 1 to 4, max attempts 1 to 1000, run_at a finite time from 1970 up to year 9999. Producers call enqueue, which checks its input.';
    END IF;
    INSERT INTO {schema}.deferred_jobs
        (job_id, queue, priority, kind, args, attempt, max_attempts, run_lease, run_at,
         reason, created_at, unique_key, metadata)
    SELECT i.job_id, i.queue, i.priority, i.kind, i.args, 0, i.max_attempts, 0, i.run_at,
           'scheduled', now(), i.unique_key, i.metadata
      FROM unnest(p_job_ids, p_queues, p_priorities, p_kinds, p_args, p_max_attempts,
                  p_run_at, p_unique_keys, p_metadata)
           AS i(job_id, queue, priority, kind, args, max_attempts, run_at, unique_key, metadata);
END
$fn$;
$awa_template$)
ON CONFLICT (name) DO UPDATE SET ord = EXCLUDED.ord, body = EXCLUDED.body;
INSERT INTO awa.substrate_functions (name, ord, body) VALUES ('enqueue_local', 8, $awa_template$-- {schema}.enqueue_local(...): the producer's work, inside the caller's
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
$awa_template$)
ON CONFLICT (name) DO UPDATE SET ord = EXCLUDED.ord, body = EXCLUDED.body;
INSERT INTO awa.substrate_functions (name, ord, body) VALUES ('limit_record', 16, $awa_template$-- {schema}.limit_record(queue, admitted_at, claim_slot, batch_id, taken):
-- what a limited claim's jobs hold (docs/adr/0015). Called only by
-- {schema}.claim, after it wrote batch (claim_slot, batch_id) for the jobs
-- of `taken` (limit_take's rows, item i = the i-th job), in the same
-- transaction and under limit_take's lock.
--
-- Concurrency: one limit_holds row per job and concurrency limit it
-- counts against (its new run lease and batch item). Rate: per rate limit
-- and partition, one entry (admitted_at, jobs) appended to limit_rates,
-- the entries older than the limit's period dropped in the same write.
--
-- admitted_at must be a finite time from 1970-01-01 00:00:00+00 up to (not
-- including) 10000-01-01 00:00:00+00 (awa_core::time::WRITABLE), else
-- SQLSTATE 22023 before anything is written (the runtime role may call
-- this by hand).
CREATE OR REPLACE FUNCTION {schema}.limit_record(
    p_queue       text,
    p_admitted_at timestamptz,
    p_claim_slot  integer,
    p_batch       bigint,
    p_taken       jsonb
) RETURNS void LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan AS $fn$
BEGIN
    IF p_admitted_at IS NULL OR p_admitted_at < '1970-01-01 00:00:00+00'
       OR p_admitted_at >= '10000-01-01 00:00:00+00' THEN
        RAISE EXCEPTION 'limit_record: admitted_at % is not a time from 1970 up to year 9999',
                        coalesce(p_admitted_at::text, 'NULL')
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'claim passes now(); send a finite time from 1970-01-01 up to 9999-12-31 UTC.';
    END IF;
    INSERT INTO {schema}.limit_holds (queue, kind, part, job_id, run_lease, claim_slot, batch_id, item)
    SELECT p_queue, l.kind, coalesce(j.args #>> l.concurrency_by, ''), j.job_id, j.run_lease + 1,
           p_claim_slot, p_batch, j.item
      FROM (SELECT (x.r->>'job_id')::bigint AS job_id, (x.r->>'run_lease')::bigint AS run_lease,
                   x.r->>'kind' AS kind, x.r->'args' AS args,
                   row_number() OVER (ORDER BY x.n)::integer AS item
              FROM jsonb_array_elements(p_taken) WITH ORDINALITY AS x(r, n)
             WHERE x.r->>'job_id' IS NOT NULL) j
      JOIN awa.queue_limits l
        ON l.queue = p_queue AND l.kind IN ('', j.kind) AND l.concurrency_max IS NOT NULL;

    INSERT INTO {schema}.limit_rates AS r (queue, kind, part, at, n)
    SELECT p_queue, g.kind, g.part, ARRAY[p_admitted_at], ARRAY[g.jobs]
      FROM (SELECT l.kind, coalesce(x.r->'args' #>> l.rate_by, '') AS part, count(*)::integer AS jobs
              FROM jsonb_array_elements(p_taken) AS x(r)
              JOIN awa.queue_limits l
                ON l.queue = p_queue AND l.kind IN ('', x.r->>'kind') AND l.rate_max IS NOT NULL
             WHERE x.r->>'job_id' IS NOT NULL
             GROUP BY 1, 2) g
    ON CONFLICT (queue, kind, part) DO UPDATE
       SET at = ARRAY(SELECT e.at FROM unnest(r.at, r.n) WITH ORDINALITY AS e(at, c, o)
                       WHERE e.at > p_admitted_at - (SELECT l.rate_period FROM awa.queue_limits l
                                                      WHERE l.queue = r.queue AND l.kind = r.kind)
                       ORDER BY e.o) || excluded.at,
           n  = ARRAY(SELECT e.c FROM unnest(r.at, r.n) WITH ORDINALITY AS e(at, c, o)
                       WHERE e.at > p_admitted_at - (SELECT l.rate_period FROM awa.queue_limits l
                                                      WHERE l.queue = r.queue AND l.kind = r.kind)
                       ORDER BY e.o) || excluded.n;
END
$fn$;
$awa_template$)
ON CONFLICT (name) DO UPDATE SET ord = EXCLUDED.ord, body = EXCLUDED.body;
INSERT INTO awa.substrate_functions (name, ord, body) VALUES ('ready_append', 0, $awa_template$-- {schema}.ready_append(...): append runnable jobs to the current queue-ring
-- slot. Used by enqueue, promotion and release; nothing else inserts into
-- ready_entries.
--
-- Parameters are parallel arrays, one element per job, in lane order;
-- p_histories (the jobs' attempt records, ADR 11) may be left out: new
-- jobs have none. Returns each job's id, slot and lane position. Refused
-- with SQLSTATE 22023 before anything is written (the runtime role may
-- call this directly): arrays of different lengths, a NULL id, queue, kind
-- or args, a priority outside 1..4 (awa_core::bounds::PRIORITY), max
-- attempts outside 1..1000 (MAX_ATTEMPTS), a negative attempt or run lease,
-- a created_at that is NULL or not from 1970-01-01 00:00:00+00 up to (not
-- including) 10000-01-01 00:00:00+00 (awa_core::time::WRITABLE).
--
-- Ordering rule that must not be broken: the transaction id is assigned,
-- and the per-queue producer lock taken, BEFORE any lane position is drawn
-- from ready_seq. The claim frontier
-- (see ready_take) proves a position settled by waiting for every
-- transaction that was running when it read ready_seq; a writer that drew
-- a position before it had an xid would be invisible to that proof.
--
-- Lane heads are created here on first use; ON CONFLICT DO NOTHING finds
-- an existing lane in the index and writes nothing. Creating a lane is the
-- one moment two producers of the same lane wait for each other: the
-- second waits for the first one's transaction to end.
CREATE OR REPLACE FUNCTION {schema}.ready_append(
    p_job_ids      bigint[],
    p_queues       text[],
    p_priorities   smallint[],
    p_kinds        text[],
    p_args         jsonb[],
    p_attempts     integer[],
    p_max_attempts integer[],
    p_run_leases   bigint[],
    p_created_at   timestamptz[],
    p_unique_keys  text[],
    p_metadata     jsonb[],
    p_histories    jsonb[] DEFAULT NULL
) RETURNS TABLE (job_id bigint, slot integer, lane_seq bigint)
LANGUAGE plpgsql AS $fn$
#variable_conflict use_column
DECLARE
    v_slot integer;
    v_n    integer := coalesce(array_length(p_job_ids, 1), 0);
BEGIN
    IF array_length(p_queues, 1) IS DISTINCT FROM array_length(p_job_ids, 1)
       OR array_length(p_priorities, 1) IS DISTINCT FROM array_length(p_job_ids, 1)
       OR array_length(p_kinds, 1) IS DISTINCT FROM array_length(p_job_ids, 1)
       OR array_length(p_args, 1) IS DISTINCT FROM array_length(p_job_ids, 1)
       OR array_length(p_attempts, 1) IS DISTINCT FROM array_length(p_job_ids, 1)
       OR array_length(p_max_attempts, 1) IS DISTINCT FROM array_length(p_job_ids, 1)
       OR array_length(p_run_leases, 1) IS DISTINCT FROM array_length(p_job_ids, 1)
       OR array_length(p_created_at, 1) IS DISTINCT FROM array_length(p_job_ids, 1)
       OR array_length(p_unique_keys, 1) IS DISTINCT FROM array_length(p_job_ids, 1)
       OR array_length(p_metadata, 1) IS DISTINCT FROM array_length(p_job_ids, 1)
       OR (p_histories IS NOT NULL
           AND array_length(p_histories, 1) IS DISTINCT FROM array_length(p_job_ids, 1)) THEN
        RAISE EXCEPTION 'ready_append arrays differ in length' USING ERRCODE = 'invalid_parameter_value',
              HINT = 'Send one element per job in every array.';
    END IF;
    IF v_n = 0 THEN
        RETURN;
    END IF;
    IF EXISTS (SELECT 1
                 FROM unnest(p_job_ids, p_queues, p_priorities, p_kinds, p_args, p_attempts,
                             p_max_attempts, p_run_leases, p_created_at)
                      AS i(id, q, p, k, a, att, m, rl, c)
                WHERE i.id IS NULL OR i.q IS NULL OR i.k IS NULL OR i.a IS NULL
                   OR i.p IS NULL OR i.p NOT BETWEEN 1 AND 4
                   OR i.m IS NULL OR i.m NOT BETWEEN 1 AND 1000
                   OR i.att IS NULL OR i.att < 0
                   OR i.rl IS NULL OR i.rl < 0
                   OR i.c IS NULL OR i.c < '1970-01-01 00:00:00+00'
                   OR i.c >= '10000-01-01 00:00:00+00') THEN
        RAISE EXCEPTION 'ready_append: a job has no id, queue, kind or args, or a priority, max attempts, attempt, run lease or created_at out of range'
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'Priority is 1 to 4, max attempts 1 to 1000, attempt and run lease at least 0, created_at a finite time from 1970 up to year 9999. Producers call enqueue, which checks its input.';
    END IF;
    PERFORM pg_current_xact_id();
    -- Announce "this transaction may hold lane positions of these queues"
    -- until it ends (shared: producers never wait for each other). Lets
    -- ready_take tell a producer from any other long transaction.
    PERFORM pg_advisory_xact_lock_shared(6387554, hashtext(q))
       FROM (SELECT DISTINCT unnest(p_queues) AS q) s;

    SELECT l.slot INTO v_slot
      FROM {schema}.ring_ledger l
     WHERE l.ring = 'queue'
     ORDER BY l.generation DESC
     LIMIT 1;

    INSERT INTO {schema}.lane_heads (queue, priority, shard)
    SELECT DISTINCT i.queue, i.priority, (i.job_id % coalesce(m.shard_count, 1))::smallint
      FROM unnest(p_queues, p_priorities, p_job_ids) AS i(queue, priority, job_id)
      LEFT JOIN awa.queue_meta m ON m.queue = i.queue
    ON CONFLICT DO NOTHING;

    -- unnest preserves array order, so lane positions follow it.
    RETURN QUERY
    INSERT INTO {schema}.ready_entries AS r
        (slot, queue, priority, shard, lane_seq, job_id, kind, args, attempt,
         max_attempts, run_lease, created_at, ready_at, unique_key, metadata, attempts)
    SELECT v_slot, i.queue, i.priority,
           (i.job_id % coalesce(m.shard_count, 1))::smallint,
           nextval('{schema}.ready_seq'),
           i.job_id, i.kind, i.args, i.attempt, i.max_attempts, i.run_lease,
           i.created_at, clock_timestamp(), i.unique_key, i.metadata, i.history
      -- A multi-argument unnest pads a shorter (or NULL) array with NULLs.
      FROM unnest(p_job_ids, p_queues, p_priorities, p_kinds, p_args, p_attempts,
                  p_max_attempts, p_run_leases, p_created_at, p_unique_keys, p_metadata,
                  p_histories)
           WITH ORDINALITY
           AS i(job_id, queue, priority, kind, args, attempt, max_attempts, run_lease,
                created_at, unique_key, metadata, history, ord)
      LEFT JOIN awa.queue_meta m ON m.queue = i.queue
     ORDER BY i.ord
    RETURNING r.job_id, r.slot, r.lane_seq;

    -- One notification per queue per transaction: PostgreSQL folds
    -- identical notifications of a transaction into one, so a batch or a
    -- transaction of many enqueues wakes workers once.
    PERFORM pg_notify('awa_ready', q) FROM (SELECT DISTINCT unnest(p_queues) AS q) s;
END
$fn$;
$awa_template$)
ON CONFLICT (name) DO UPDATE SET ord = EXCLUDED.ord, body = EXCLUDED.body;

-- Refresh every substrate after the step's changes (appended to each step by
-- `cargo xtask migration draft`): re-run the installer on each substrate
-- with its own shape, which creates the tables a changed installer added,
-- re-instantiates every runtime function template and revokes PUBLIC's
-- EXECUTE again; then give every role that was granted the runtime matrix
-- on a substrate (it holds USAGE there) the matrix as it is now, so new
-- tables and functions are covered without an operator step.
-- The installers' "already exists, skipping" notices are noise here.
SET LOCAL client_min_messages = warning;
DO $refresh$
DECLARE
    s record;
    r record;
BEGIN
    FOR s IN SELECT n.nspname AS schema_name
               FROM pg_catalog.pg_class c
               JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
              WHERE c.relname = 'substrate_info' AND c.relkind = 'r'
              ORDER BY n.nspname <> 'awa', n.nspname LOOP
        EXECUTE format('SELECT awa.install_queue_storage_substrate(%L, queue_slot_count, lease_slot_count, claim_slot_count) FROM %I.substrate_info',
                       s.schema_name, s.schema_name);
    END LOOP;
    FOR r IN SELECT DISTINCT ro.rolname AS role_name, n.nspname AS schema_name
               FROM pg_catalog.pg_namespace n
               CROSS JOIN LATERAL pg_catalog.aclexplode(n.nspacl) a
               JOIN pg_catalog.pg_roles ro ON ro.oid = a.grantee
              WHERE a.privilege_type = 'USAGE'
                AND a.grantee <> n.nspowner
                AND EXISTS (SELECT 1 FROM pg_catalog.pg_class c
                             WHERE c.relnamespace = n.oid AND c.relname = 'substrate_info' AND c.relkind = 'r')
              ORDER BY 1, 2 LOOP
        PERFORM awa.grant_runtime_role(r.role_name, r.schema_name);
    END LOOP;
END
$refresh$;
