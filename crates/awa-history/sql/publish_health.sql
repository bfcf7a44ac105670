-- HistoryPlane::publish_health: measure every queue of this substrate and
-- overwrite its row in awa.queue_health. $1 is the substrate's schema name.
-- Reads live_job_states: each lane's entries past its head, the open claim
-- batches (after the health task's claim_floor_advance, the few claimed
-- since) and the parked and deferred rows, no body: O(lanes + live jobs),
-- whatever history the rings keep (view_jobs.sql).
-- `running` there counts every claimed job (running or buffered): the
-- health row says how much work workers hold, not how much has started.
INSERT INTO awa.queue_health AS h
       (schema_name, queue, available, running, deferred, oldest_available_secs, measured_at)
SELECT $1, j.queue,
       count(*) FILTER (WHERE j.state = 'available'),
       count(*) FILTER (WHERE j.state IN ('running', 'buffered')),
       count(*) FILTER (WHERE j.state IN ('scheduled', 'retryable', 'snoozed')),
       extract(epoch FROM now() - min(j.at) FILTER (WHERE j.state = 'available')),
       now()
  FROM {schema}.live_job_states j
 GROUP BY j.queue
ON CONFLICT (schema_name, queue) DO UPDATE
   SET available = EXCLUDED.available, running = EXCLUDED.running, deferred = EXCLUDED.deferred,
       oldest_available_secs = EXCLUDED.oldest_available_secs, measured_at = EXCLUDED.measured_at
