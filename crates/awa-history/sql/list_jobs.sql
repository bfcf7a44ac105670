-- HistoryPlane::list: newest first, optionally one queue and one state.
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
         ORDER BY id DESC
         LIMIT $3) j
  LEFT JOIN awa.runtimes r ON r.instance_id = j.holder
 ORDER BY j.id DESC
