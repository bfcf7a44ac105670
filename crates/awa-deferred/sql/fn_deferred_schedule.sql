-- {schema}.deferred_schedule(...): hold jobs that are not runnable yet.
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
