-- HistoryPlane::count_failures: how many kept failures match a filter (a
-- bulk retry's --dry-run). Parameters as failure_select.sql's $1 to $5.
SELECT count(*) AS n
  FROM {schema}.failure_entries f
 WHERE f.queue = $1 AND f.state = $2
   AND ($3::text IS NULL OR f.kind = $3)
   AND ($4::jsonb IS NULL OR f.args @> $4::jsonb)
   AND f.finalized_at <= $5
