-- HistoryPlane::list_page: one page of jobs, newest first (admin API, `awa
-- job list`). $1 queue, $2 state, $3 kind, $4 args containment (jsonb @>),
-- each NULL: any; $5 cursor: only ids below it (NULL: from the newest), $6
-- page size (the caller caps it). The id order makes the cursor stable
-- while jobs are added. The containment is served by the GIN indexes of
-- the tables that keep jobs for days (failure_entries, dlq_entries); the
-- rings are bounded by their retention and are read as they are (an index
-- there would cost every job WAL).
-- A running job names its holder: the runtime that claimed it, with its
-- host, pid and how long ago it last reported itself alive (NULL host:
-- the registry has forgotten it).
SELECT j.id, j.queue, j.kind, j.args, j.priority, j.state, j.attempt, j.max_attempts,
       j.run_lease, j.created_at, j.at, j.last_error, j.metadata,
       j.holder, r.host AS holder_host, r.pid AS holder_pid, r.last_seen_at AS holder_seen_at,
       extract(epoch FROM now() - r.last_seen_at)::float8 AS holder_age_secs
  FROM (SELECT id, queue, kind, args, priority, state, attempt, max_attempts, run_lease,
               created_at, at, last_error, metadata, holder
          FROM {schema}.jobs
         WHERE ($1::text IS NULL OR queue = $1) AND ($2::text IS NULL OR state = $2)
           AND ($3::text IS NULL OR kind = $3)
           AND ($4::jsonb IS NULL OR args @> $4::jsonb)
           AND ($5::bigint IS NULL OR id < $5)
         ORDER BY id DESC
         LIMIT $6) j
  LEFT JOIN awa.runtimes r ON r.instance_id = j.holder
 ORDER BY j.id DESC
