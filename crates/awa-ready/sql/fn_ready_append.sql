-- {schema}.ready_append(...): append runnable jobs to the current queue-ring
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
