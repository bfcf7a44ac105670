-- The oldest snapshot in this database: it bounds what prune may truncate.
-- Only sessions whose snapshot is older than a few seconds are reported.
-- The query text is what the session runs (or last ran, when idle in a
-- transaction), cut to 1000 characters; PostgreSQL shows it only to a
-- superuser, the same role or pg_read_all_stats.
SELECT a.pid, a.usename::text AS usename, a.state,
       extract(epoch FROM now() - coalesce(a.xact_start, a.backend_start))::float8 AS age_secs,
       left(a.query, 1000) AS query
  FROM pg_stat_activity a
 WHERE a.datname = current_database() AND a.pid <> pg_backend_pid()
   AND a.backend_xmin IS NOT NULL
   AND now() - coalesce(a.xact_start, a.backend_start) > interval '5 seconds'
 ORDER BY age(a.backend_xmin) DESC
 LIMIT 1
