-- HistoryPlane::pending: jobs of these queues that are not terminal yet
-- (available, running or deferred). `worker run` uses pending_by_state.
SELECT count(*) FROM {schema}.live_jobs
 WHERE queue = ANY($1::text[])
