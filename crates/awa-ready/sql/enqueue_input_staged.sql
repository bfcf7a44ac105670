-- The input of call_enqueue_append.sql for PgReadyPlane::enqueue_copy
-- (step 3): what copy_staging_in.sql put in the session's staging table,
-- consumed (deleted) by the append, so rows never outlive the call that
-- copied them. No parameters of its own.
-- Yields (ord, queue, kind, args, priority, max_attempts, metadata).
DELETE FROM pg_temp.awa_enqueue_staging
RETURNING ord, queue, kind, args, priority, max_attempts, metadata
