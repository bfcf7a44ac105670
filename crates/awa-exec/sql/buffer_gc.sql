-- PgExecPlane::gc_buffers($1 seconds): drop the rows of worker engines
-- that have not refreshed them for that long (they died; their attempts
-- were rescued long since). A live engine with a non-empty buffer
-- refreshes its row every few minutes. Run by each engine as it starts.
DELETE FROM {schema}.worker_buffers WHERE updated_at < now() - make_interval(secs => $1)
