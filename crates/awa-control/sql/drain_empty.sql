-- routing::release_drained, step 1: whether {schema} holds no job that is
-- not terminal and no dead letter (both would be stranded once routing
-- stops reading it).
SELECT NOT EXISTS (SELECT 1 FROM {schema}.live_jobs)
   AND NOT EXISTS (SELECT 1 FROM {schema}.dlq_entries) AS empty
