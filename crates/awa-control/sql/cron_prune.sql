-- cron::sync with prune: delete every schedule not named in $1.
DELETE FROM awa.cron_jobs WHERE name <> ALL ($1::text[]) RETURNING name
