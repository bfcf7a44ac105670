-- HistoryPlane::job. Each branch of the view has a job_id index.
SELECT id, queue, kind, args, priority, state, attempt, max_attempts, run_lease,
       created_at, at, last_error, metadata
  FROM {schema}.jobs WHERE id = $1
 ORDER BY run_lease DESC
 LIMIT 1
