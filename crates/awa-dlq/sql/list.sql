-- DlqPlane::list: newest first. Index: dlq_entries_queue_idx when filtered.
SELECT job_id, queue, kind, args, priority, attempt, max_attempts, run_lease,
       created_at, dead_at, last_error
  FROM {schema}.dlq_entries
 WHERE ($1::text IS NULL OR queue = $1)
 ORDER BY dead_at DESC, job_id DESC
 LIMIT $2
