-- The maintenance leader as recorded, and whether its lock is held right
-- now by the backend that recorded it (a stale row means no leader).
SELECT l.instance_id, l.host, l.pid, l.backend_pid, l.since,
       EXISTS (SELECT 1 FROM pg_locks k
                WHERE k.locktype = 'advisory' AND k.classid = 6387553 AND k.objid = 2
                  AND k.granted AND k.pid = l.backend_pid) AS holding
  FROM awa.maintenance_leader l
