-- DlqPlane::prune_expired: retention per queue (awa.queue_meta.dlq_retention,
-- default 14 days). Bounded per call so one pass never holds locks long.
DELETE FROM {schema}.dlq_entries d
 WHERE d.job_id IN (
        SELECT e.job_id FROM {schema}.dlq_entries e
          LEFT JOIN awa.queue_meta m ON m.queue = e.queue
         WHERE e.dead_at < now() - coalesce(m.dlq_retention, interval '14 days')
         LIMIT $1)
