-- PgHistoryPlane::publish_activity, second half: activity older than two
-- hours leaves awa.queue_minutes (every substrate's rows, so a dropped
-- substrate's go too), which keeps the table at most two hours of minutes
-- per queue. A scan of a table that small; no index needed beyond its key.
DELETE FROM awa.queue_minutes WHERE minute < now() - interval '2 hours'
