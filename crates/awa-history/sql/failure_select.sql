-- HistoryPlane::failures_matching: the ids of kept failures matching a
-- filter, lowest id first, for a bulk retry in batches. $1 queue, $2 state
-- (failed | cancelled), $3 kind (NULL: any), $4 args containment (jsonb
-- @>, NULL: any), $5 only those finalized at or before this time (the
-- moment the bulk action began, so jobs that fail again meanwhile are not
-- retried twice), $6 only ids above this (the previous batch's last; NULL:
-- from the lowest), $7 batch size. Index: failure_entries_queue_idx
-- (queue, state), failure_entries_args_idx for the containment.
SELECT f.job_id
  FROM {schema}.failure_entries f
 WHERE f.queue = $1 AND f.state = $2
   AND ($3::text IS NULL OR f.kind = $3)
   AND ($4::jsonb IS NULL OR f.args @> $4::jsonb)
   AND f.finalized_at <= $5
   AND ($6::bigint IS NULL OR f.job_id > $6)
 ORDER BY f.job_id
 LIMIT $7
