-- HistoryPlane::pending_by_state: the unfinished jobs of these queues per
-- state, with the earliest `at` (for deferred states: when the next one is
-- due) and how many are runnable by `now() + $2 seconds` (all of them when
-- $2 is NULL; available, buffered and running jobs always count). Used by
-- `worker run --exit-when-idle / --exit-when-drained`, only once the worker
-- itself has seen nothing left to claim. live_job_states: only these
-- queues' lanes and live jobs, no body.
SELECT state,
       count(*) AS jobs,
       min(at) AS next_at,
       count(*) FILTER (WHERE state IN ('available', 'buffered', 'running')
                           OR $2::float8 IS NULL
                           OR at <= now() + make_interval(secs => $2::float8)) AS due
  FROM {schema}.live_job_states
 WHERE queue = ANY($1::text[])
 GROUP BY state
 ORDER BY state
