-- Runtimes::register: announce a worker or maintenance process.
INSERT INTO awa.runtimes (instance_id, host, pid, role, queues)
VALUES ($1, $2, $3, $4, $5)
ON CONFLICT (instance_id) DO UPDATE
   SET last_seen_at = now(), queues = EXCLUDED.queues
