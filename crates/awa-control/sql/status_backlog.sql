-- storage_status: the substrate's unfinished jobs by state (available,
-- running, buffered, scheduled, retryable, snoozed), and its dead letters.
-- Reads every live job once and no body (live_job_states: O(lanes + live
-- jobs), whatever history is kept; awa-history view_jobs.sql).
SELECT j.state, count(*)::bigint AS jobs
  FROM {schema}.live_job_states j
 GROUP BY j.state
UNION ALL
SELECT 'dead_lettered', count(*)::bigint FROM {schema}.dlq_entries HAVING count(*) > 0
