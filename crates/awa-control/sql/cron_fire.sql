-- cron::record_fire: the guard of exactly-once firing, in the transaction
-- that enqueued the tick's job (which is rolled back when this matches no
-- row). Matches only while the schedule is enabled, still has the
-- definition the tick was computed from, the tick is after fire_from, and
-- last_tick is before it: last_tick only ever increases, so each tick is
-- fired by at most one committed transaction. A concurrent firer of the
-- same tick waits for this row lock and then matches nothing. A fire
-- clears the error a failed pass recorded (cron_record_error.sql).
UPDATE awa.cron_jobs
   SET last_tick = $2, last_job_id = $3, last_enqueued_at = now(),
       error = NULL, error_since = NULL
 WHERE name = $1 AND enabled AND cron_expr = $4 AND timezone = $5
   AND $2 > fire_from AND (last_tick IS NULL OR last_tick < $2)
RETURNING name
