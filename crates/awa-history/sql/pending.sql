-- HistoryPlane::pending: jobs of these queues that are not terminal yet
-- (available, running or deferred). `worker run` uses pending_by_state.
-- live_job_states: only these queues' lanes, O(their live jobs).
SELECT count(*) FROM {schema}.live_job_states
 WHERE queue = ANY($1::text[])
