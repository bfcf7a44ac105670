-- storage_status: which live runtimes use substrate $1, and how
-- (read_write: it writes there; drain: it only claims and finishes).
SELECT r.instance_id, r.role, r.host, r.pid, b.mode, b.updated_at, r.last_seen_at
  FROM awa.runtime_storage_backends b
  JOIN awa.runtimes r ON r.instance_id = b.instance_id
 WHERE b.schema_name = $1
 ORDER BY r.started_at, r.instance_id
