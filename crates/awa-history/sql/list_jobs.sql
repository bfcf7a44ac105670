-- HistoryPlane::list: newest first, optionally one queue and one state.
SELECT id, queue, kind, args, priority, state, attempt, max_attempts, run_lease,
       created_at, at, last_error, metadata
  FROM {schema}.jobs
 WHERE ($1::text IS NULL OR queue = $1) AND ($2::text IS NULL OR state = $2)
 ORDER BY id DESC
 LIMIT $3
