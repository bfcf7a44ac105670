-- routing::release_drained, step 2: stop routing to substrate $1 once none
-- of the transactions open when it stopped receiving writes is still open
-- (fence_vxids; see storage_draining in control_schema.sql). Each
-- transaction holds an exclusive lock on its virtual transaction id for
-- its whole life, and pg_locks is readable by every role. Returns the row
-- when it was removed. Listeners get NOTIFY awa_storage.
WITH released AS (
    DELETE FROM awa.storage_draining d
     WHERE d.schema_name = $1
       AND NOT EXISTS (SELECT 1 FROM pg_catalog.pg_locks l
                        WHERE l.locktype = 'virtualxid' AND l.mode = 'ExclusiveLock' AND l.granted
                          AND l.virtualxid::text = ANY (d.fence_vxids))
    RETURNING d.schema_name
)
SELECT r.schema_name, pg_notify('awa_storage', 'drained') IS NOT NULL AS notified
  FROM released r
