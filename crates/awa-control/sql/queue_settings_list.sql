-- queues::list: the settings of every configured queue (a queue nobody
-- configured has none and uses the defaults).
SELECT queue, dlq_enabled, max_attempts, shard_count,
       extract(epoch FROM priority_aging_interval)::float8 AS aging_secs,
       extract(epoch FROM dlq_retention)::float8 AS dlq_retention_secs, paused
  FROM awa.queue_meta
 ORDER BY queue
