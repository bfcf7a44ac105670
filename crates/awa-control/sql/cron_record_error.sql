-- cron::record_error: why the leader could not fire schedule $1 (a bad
-- expression, zone or queue written by SQL, args over max_job_bytes, ...),
-- shown by `awa cron list`, /api/cron and the dashboard; the leader skips
-- the schedule and fires the others. Written only when the text is new,
-- so a schedule failing the same way every pass is not rewritten (nor
-- logged) every pass, and error_since keeps the first failure. Cleared by
-- the next fire (cron_fire.sql) and by a change (cron_upsert.sql).
UPDATE awa.cron_jobs
   SET error = $2, error_since = now()
 WHERE name = $1 AND error IS DISTINCT FROM $2
RETURNING name
