-- cron::set_enabled: pause or resume. Resuming moves fire_from to now, so
-- the ticks of the pause are not fired as missed ones.
UPDATE awa.cron_jobs
   SET enabled    = $2,
       fire_from  = CASE WHEN $2 AND NOT enabled THEN now() ELSE fire_from END,
       updated_at = now()
 WHERE name = $1
RETURNING name
