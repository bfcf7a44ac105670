-- SubstrateSettings::apply. Each value NULL keeps the current one, except
-- the retention, where $1 = true says "set it" (NULL: automatic, (queue
-- slots - 2) x the leader's rotate interval) and $2 is the value. The
-- columns' CHECKs bound both (history_retention 0 .. 3650 days,
-- max_job_bytes 1 KiB .. 256 MiB). Run as the migrator.
UPDATE {schema}.substrate_info
   SET history_retention = CASE WHEN $1 THEN $2 ELSE history_retention END,
       max_job_bytes = coalesce($3, max_job_bytes)
RETURNING extract(epoch FROM history_retention)::double precision AS history_retention_secs,
          max_job_bytes
