-- cron::list (and the leader's cron task, with $1 = true: enabled only).
SELECT name, cron_expr, timezone, queue, kind, args, priority, max_attempts, metadata,
       missed_policy, catch_up_limit, enabled, fire_from, last_tick, last_job_id,
       last_enqueued_at, error, error_since
  FROM awa.cron_jobs
 WHERE NOT $1 OR enabled
 ORDER BY name
