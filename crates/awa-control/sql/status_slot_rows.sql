-- Rows per ring slot, from the statistics collector (an estimate that
-- costs nothing, rather than a count that would scan every slot).
-- $1: substrate schema name.
SELECT CASE
         WHEN s.relname ~ '^(ready_entries|ready_tombstones|done_entries|done_batches|count_deltas)_[0-9]+$' THEN 'queue'
         WHEN s.relname ~ '^(claim_batches|claim_closures)_[0-9]+$' THEN 'claim'
         ELSE 'lease'
       END AS ring,
       substring(s.relname FROM '_([0-9]+)$')::integer AS slot,
       sum(s.n_live_tup)::bigint AS live_rows,
       sum(s.n_dead_tup)::bigint AS dead_rows
  FROM pg_stat_user_tables s
 WHERE s.schemaname = $1
   AND s.relname ~ '^(ready_entries|ready_tombstones|done_entries|done_batches|count_deltas|claim_batches|claim_closures|leases)_[0-9]+$'
 GROUP BY 1, 2
 ORDER BY 1, 2
