-- PgReadyPlane::enqueue_copy, step 2: COPY the batch into the staging
-- table (copy_staging_prepare.sql), text format, one line per job in input
-- order with ord = 1, 2, ... Columns as listed; \N is NULL. Nothing here
-- draws a lane position: that is call_enqueue_append.sql (enqueue_input_staged.sql), under the
-- ordering rule.
COPY pg_temp.awa_enqueue_staging (ord, queue, kind, args, priority, max_attempts, metadata)
FROM STDIN (FORMAT text)
