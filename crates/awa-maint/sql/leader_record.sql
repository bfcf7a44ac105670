-- Describe the new leader for operators. The lock is the authority; this
-- row only says who holds it.
INSERT INTO awa.maintenance_leader (singleton, instance_id, host, pid, backend_pid, since)
VALUES (true, $1, $2, $3, pg_backend_pid(), now())
ON CONFLICT (singleton) DO UPDATE
   SET instance_id = EXCLUDED.instance_id, host = EXCLUDED.host, pid = EXCLUDED.pid,
       backend_pid = EXCLUDED.backend_pid, since = EXCLUDED.since
