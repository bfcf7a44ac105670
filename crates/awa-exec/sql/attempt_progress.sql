-- ExecPlane::attempt_progress: what the job's attempts reported with their
-- heartbeats (percent, message, checkpoint), for operators. No row: the
-- job never heartbeated, or has finished (the row goes with the job).
SELECT run_lease, percent, message, checkpoint, updated_at
  FROM {schema}.attempt_state
 WHERE job_id = $1
