-- awa_exec::cancel_matching with dry_run: how many unfinished jobs match
-- the filter. Parameters as cancel_matching.sql's $1 to $4.
SELECT count(*) AS n
  FROM {schema}.live_jobs
 WHERE queue = $1
   AND ($2::text IS NULL OR state = $2)
   AND ($3::text IS NULL OR kind = $3)
   AND ($4::jsonb IS NULL OR args @> $4::jsonb)
