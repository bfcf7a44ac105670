-- HistoryPlane::list_page: one page of jobs, newest first (admin API, `awa
-- job list`). $1 queue, $2 state, $3 kind, $4 args containment (jsonb @>),
-- each NULL: any; $5 cursor: only ids below it (NULL: from the newest), $6
-- page size (the caller caps it). The id order makes the cursor stable
-- while jobs are added. jobs_page reads the live jobs and a window of
-- history just below the cursor, never all of it. The containment is
-- served by the GIN indexes of the tables that keep jobs for days
-- (failure_entries, dlq_entries); the rings are read as they are (an index
-- there would cost every job WAL).
-- A running job names its holder: the runtime that claimed it, with its
-- host, pid and how long ago it last reported itself alive (NULL host:
-- the registry has forgotten it).
SELECT j.id, j.queue, j.kind, j.args, j.priority, j.state, j.attempt, j.max_attempts,
       j.run_lease, j.created_at, j.at, j.last_error, j.metadata,
       j.holder, r.host AS holder_host, r.pid AS holder_pid, r.last_seen_at AS holder_seen_at,
       (extract(epoch FROM now()) - extract(epoch FROM r.last_seen_at))::float8 AS holder_age_secs
  FROM {schema}.jobs_page($1::text, $2::text, $3::text, $4::jsonb, $5::bigint, $6::integer) j
  LEFT JOIN awa.runtimes r ON r.instance_id = j.holder
 ORDER BY j.id DESC
