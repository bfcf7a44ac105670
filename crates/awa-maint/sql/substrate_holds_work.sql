-- Whether substrate {schema} holds an unfinished job or a dead letter
-- (dropping it would lose them).
SELECT EXISTS (SELECT 1 FROM {schema}.live_jobs)
    OR EXISTS (SELECT 1 FROM {schema}.dlq_entries)
