-- cron::remove: delete a schedule by name; its jobs already enqueued stay.
DELETE FROM awa.cron_jobs WHERE name = $1 RETURNING name
