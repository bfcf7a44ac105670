-- cron::create: a new schedule only; nothing is written when the name is
-- taken (`awa cron add` without --replace).
INSERT INTO awa.cron_jobs
       (name, cron_expr, timezone, queue, kind, args, priority, max_attempts, metadata,
        missed_policy, catch_up_limit)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)
ON CONFLICT (name) DO NOTHING
RETURNING name
