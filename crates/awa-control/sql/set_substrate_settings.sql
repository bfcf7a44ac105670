-- SubstrateSettings::apply. Each value NULL keeps the current one, except
-- the history retention, where $1 = true says "set it" (NULL: automatic,
-- (queue slots - 2) x the leader's rotate interval) and $2 is the value.
-- $4: the failure retention. The columns' CHECKs bound them all
-- (history_retention 0 .. 3650 days, max_job_bytes 1 KiB .. 256 MiB,
-- failure_retention 1 s .. 3650 days). Run as the migrator.
UPDATE {schema}.substrate_info
   SET history_retention = CASE WHEN $1 THEN $2 ELSE history_retention END,
       max_job_bytes = coalesce($3, max_job_bytes),
       failure_retention = coalesce($4, failure_retention)
RETURNING extract(epoch FROM history_retention)::double precision AS history_retention_secs,
          max_job_bytes,
          extract(epoch FROM failure_retention)::double precision AS failure_retention_secs
