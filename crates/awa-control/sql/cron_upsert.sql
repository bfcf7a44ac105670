-- cron::upsert: create or change a schedule by name. A change of
-- expression or time zone moves fire_from to now, so ticks of the old
-- definition that were never due are not fired as "missed"; any change
-- clears the error the leader recorded (it described the old
-- definition; the next pass records it again if it still holds). Returns
-- whether the row was created, and whether anything changed.
INSERT INTO awa.cron_jobs AS c
       (name, cron_expr, timezone, queue, kind, args, priority, max_attempts, metadata,
        missed_policy, catch_up_limit)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)
ON CONFLICT (name) DO UPDATE
   SET cron_expr      = EXCLUDED.cron_expr,
       timezone       = EXCLUDED.timezone,
       queue          = EXCLUDED.queue,
       kind           = EXCLUDED.kind,
       args           = EXCLUDED.args,
       priority       = EXCLUDED.priority,
       max_attempts   = EXCLUDED.max_attempts,
       metadata       = EXCLUDED.metadata,
       missed_policy  = EXCLUDED.missed_policy,
       catch_up_limit = EXCLUDED.catch_up_limit,
       fire_from      = CASE WHEN (c.cron_expr, c.timezone) IS DISTINCT FROM
                                  (EXCLUDED.cron_expr, EXCLUDED.timezone)
                             THEN now() ELSE c.fire_from END,
       error          = NULL,
       error_since    = NULL,
       updated_at     = now()
 WHERE (c.cron_expr, c.timezone, c.queue, c.kind, c.args, c.priority, c.max_attempts,
        c.metadata, c.missed_policy, c.catch_up_limit)
       IS DISTINCT FROM
       (EXCLUDED.cron_expr, EXCLUDED.timezone, EXCLUDED.queue, EXCLUDED.kind, EXCLUDED.args,
        EXCLUDED.priority, EXCLUDED.max_attempts, EXCLUDED.metadata, EXCLUDED.missed_policy,
        EXCLUDED.catch_up_limit)
RETURNING (xmax = 0) AS created
