-- cron::run_now records a manual run: the job id and time, not a tick.
UPDATE awa.cron_jobs SET last_job_id = $2, last_enqueued_at = now()
 WHERE name = $1
RETURNING name
