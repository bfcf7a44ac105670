-- storage_status: the substrate's unfinished jobs by state (available,
-- running, scheduled, retryable, snoozed), and its dead letters. Reads
-- every live job once (live_jobs never reads history).
SELECT j.state, count(*)::bigint AS jobs
  FROM {schema}.live_jobs j
 GROUP BY j.state
UNION ALL
SELECT 'dead_lettered', count(*)::bigint FROM {schema}.dlq_entries HAVING count(*) > 0
