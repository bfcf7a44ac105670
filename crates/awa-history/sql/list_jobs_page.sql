-- HistoryPlane::list_page: one page of jobs, newest first, for the admin
-- API. $1 queue, $2 state, $3 kind (each NULL: any), $4 cursor: only ids
-- below it (NULL: from the newest), $5 page size (the caller caps it).
-- The id order makes the cursor stable while jobs are added.
SELECT id, queue, kind, args, priority, state, attempt, max_attempts, run_lease,
       created_at, at, last_error, metadata
  FROM {schema}.jobs
 WHERE ($1::text IS NULL OR queue = $1) AND ($2::text IS NULL OR state = $2)
   AND ($3::text IS NULL OR kind = $3) AND ($4::bigint IS NULL OR id < $4)
 ORDER BY id DESC
 LIMIT $5
