-- HistoryPlane::prune_failures (the leader's failure_retention task):
-- delete up to $1 failed or cancelled jobs kept longer than the
-- substrate's failure_retention, oldest first (failure_entries_finalized_idx).
-- SKIP LOCKED: a row a retry holds is left for the next pass. Returns how
-- many were deleted; a full batch means there may be more.
WITH expired AS (
    SELECT f.job_id
      FROM {schema}.failure_entries f, {schema}.substrate_info i
     WHERE f.finalized_at < now() - i.failure_retention
     ORDER BY f.finalized_at
     LIMIT $1
       FOR UPDATE OF f SKIP LOCKED
),
gone AS (
    DELETE FROM {schema}.failure_entries f USING expired x
     WHERE f.job_id = x.job_id
    RETURNING 1
)
SELECT count(*) AS deleted FROM gone
