-- PgExecPlane::publish_buffer($1 instance_id, $2 job_ids): the jobs this
-- worker engine holds claimed and not started, replacing what it said
-- before (one row per engine, keyed by the instance id its claims carry in
-- claim_batches.instance_id). Called at most once a second per engine, not
-- per job. The read views (awa-history view_jobs.sql) show these jobs'
-- open items as 'buffered' instead of 'running'.
INSERT INTO {schema}.worker_buffers AS w (instance_id, job_ids, updated_at)
VALUES ($1, $2, now())
ON CONFLICT (instance_id) DO UPDATE
   SET job_ids = EXCLUDED.job_ids, updated_at = now()
