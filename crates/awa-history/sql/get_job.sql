-- HistoryPlane::job. Each part goes through an index on the job id:
-- live_jobs' branches, terminal_job (not the terminal_jobs view, whose
-- batch branch a filter cannot reach by index) and dlq_entries.
SELECT id, queue, kind, args, priority, state, attempt, max_attempts, run_lease,
       created_at, at, last_error, metadata
  FROM (SELECT id, queue, kind, args, priority, state, attempt, max_attempts, run_lease,
               created_at, at, last_error, metadata
          FROM {schema}.live_jobs WHERE id = $1
        UNION ALL
        SELECT t.id, t.queue, t.kind, t.args, t.priority, t.state, t.attempt, t.max_attempts,
               t.run_lease, t.created_at, t.finalized_at, t.last_error, t.metadata
          FROM {schema}.terminal_job($1) t
        UNION ALL
        SELECT q.job_id, q.queue, q.kind, q.args, q.priority, 'dead_lettered', q.attempt,
               q.max_attempts, q.run_lease, q.created_at, q.dead_at, q.last_error, q.metadata
          FROM {schema}.dlq_entries q WHERE q.job_id = $1) j
 ORDER BY run_lease DESC
 LIMIT 1
