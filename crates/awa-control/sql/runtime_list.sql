-- runtimes::list: every registered process, most recently seen first.
-- Entries not refreshed for a while are removed by maintenance.
SELECT instance_id, host, pid, role, queues, started_at, last_seen_at,
       (extract(epoch FROM now()) - extract(epoch FROM last_seen_at))::float8 AS seen_secs_ago
  FROM awa.runtimes
 ORDER BY last_seen_at DESC, instance_id
