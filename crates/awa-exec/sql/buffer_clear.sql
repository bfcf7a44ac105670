-- PgExecPlane::clear_buffer($1 instance_id): a stopping worker engine
-- holds nothing buffered any more.
DELETE FROM {schema}.worker_buffers WHERE instance_id = $1
