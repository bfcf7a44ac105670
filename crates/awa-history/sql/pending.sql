-- HistoryPlane::pending: jobs of these queues that are not terminal yet
-- (available, running or deferred). Used by --exit-when-idle.
SELECT count(*) FROM {schema}.live_jobs
 WHERE queue = ANY($1::text[])
