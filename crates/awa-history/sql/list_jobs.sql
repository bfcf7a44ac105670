-- HistoryPlane::list: newest first, optionally one queue and one state
-- (jobs_page: live jobs plus a window of history, never the whole view).
-- A running job names its holder: the runtime that claimed it, with its
-- host, pid and how long ago it last reported itself alive (NULL host:
-- the registry has forgotten it).
SELECT j.id, j.queue, j.kind, j.args, j.priority, j.state, j.attempt, j.max_attempts,
       j.run_lease, j.created_at, j.at, j.last_error, j.metadata,
       j.holder, r.host AS holder_host, r.pid AS holder_pid, r.last_seen_at AS holder_seen_at,
       (extract(epoch FROM now()) - extract(epoch FROM r.last_seen_at))::float8 AS holder_age_secs
  FROM {schema}.jobs_page($1::text, $2::text, NULL, NULL, NULL, $3::integer) j
  LEFT JOIN awa.runtimes r ON r.instance_id = j.holder
 ORDER BY j.id DESC
