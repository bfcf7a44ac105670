-- PgHistoryPlane::activity: the substrate's activity per queue and minute
-- over the last $2 minutes, oldest first, as the health task recorded it
-- (publish_activity.sql). $1 is the substrate's schema name. Minutes
-- without a row had no activity, or no maintenance leader to record it.
-- Served by the primary key (schema_name, queue, minute) of a table of at
-- most two hours of minutes per queue.
SELECT queue, minute, completed, failed, cancelled, dead_lettered, claims_sampled,
       pickup_avg_secs, pickup_max_secs, wait_max_secs, measured_at
  FROM awa.queue_minutes
 WHERE schema_name = $1
   AND minute > date_trunc('minute', now()) - make_interval(mins => $2)
 ORDER BY minute, queue
