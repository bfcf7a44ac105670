-- HistoryPlane::queue_ages: per queue with waiting work, how long its
-- oldest runnable job has waited. Reads live_jobs (bounded by live work).
SELECT queue,
       extract(epoch FROM now() - min(at))::float8 AS oldest_available_secs
  FROM {schema}.live_jobs
 WHERE state = 'available'
 GROUP BY queue
 ORDER BY queue
