-- Leadership check on the lock's own connection: the lock is still ours.
SELECT EXISTS (SELECT 1 FROM pg_locks
                WHERE locktype = 'advisory' AND classid = 6387553 AND objid = 2
                  AND pid = pg_backend_pid() AND granted)
