-- HistoryPlane::queue_ages: per queue with waiting work, how long its
-- oldest runnable job has waited. Reads live_job_states (each lane's
-- entries past its head and the deferred rows: O(lanes + live jobs),
-- whatever history is kept; view_jobs.sql).
SELECT queue,
       (extract(epoch FROM now()) - extract(epoch FROM min(at)))::float8 AS oldest_available_secs
  FROM {schema}.live_job_states
 WHERE state = 'available'
 GROUP BY queue
 ORDER BY queue
