-- {schema}.deferred_schedule(...): hold jobs that are not runnable yet.
-- Parallel arrays, one element per job; run_at is when it becomes due.
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
) RETURNS void LANGUAGE sql AS $fn$
    INSERT INTO {schema}.deferred_jobs
        (job_id, queue, priority, kind, args, attempt, max_attempts, run_lease, run_at,
         reason, created_at, unique_key, metadata)
    SELECT i.job_id, i.queue, i.priority, i.kind, i.args, 0, i.max_attempts, 0, i.run_at,
           'scheduled', now(), i.unique_key, i.metadata
      FROM unnest(p_job_ids, p_queues, p_priorities, p_kinds, p_args, p_max_attempts,
                  p_run_at, p_unique_keys, p_metadata)
           AS i(job_id, queue, priority, kind, args, max_attempts, run_at, unique_key, metadata)
$fn$;
