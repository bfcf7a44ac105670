-- ExecPlane::checkpoint: the checkpoint the job's attempts saved with
-- their heartbeats, kept across retries (attempt_state is keyed by job and
-- dropped only when the job ends). An attempt reads it at start to resume
-- where the previous one stopped. No row or a NULL: nothing was saved.
SELECT checkpoint
  FROM {schema}.attempt_state
 WHERE job_id = $1
