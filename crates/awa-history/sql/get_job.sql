-- HistoryPlane::job. The live part reads live_jobs, bounded by live work
-- (the id is a filter on each lane's entries past its head, the open
-- batches' items, the parked and deferred rows); the terminal part goes
-- through the indexes on the job id: terminal_job (not the terminal_jobs
-- view, whose batch branch a filter cannot reach by index) and
-- dlq_entries.
--
-- Then the claim of its latest attempt, while the rings still hold it
-- (running, or completed since): when it started, which runtime holds or
-- held it (host and pid from awa.runtimes while it is registered, with how
-- long ago it last reported itself alive) and the attempt's own heartbeat
-- (long jobs). No index names a batch's jobs, so the batch is looked for
-- by when it was claimed (claim_batches_claimed_idx), newest first from
-- the job's `at` (a running job's is its batch's claimed_at, a completed
-- one's its finish, which came after its claim) back to a minute before
-- the job was created (a claim takes only what its statement sees
-- committed; it may have started a little earlier, never a minute: it
-- waits at most 50 ms for a lane): the claims of the job's own lifetime,
-- not every batch the claim ring holds.
WITH j AS (
    SELECT id, queue, kind, args, priority, state, attempt, max_attempts, run_lease,
           created_at, at, last_error, metadata, attempts, holder
      FROM (SELECT id, queue, kind, args, priority, state, attempt, max_attempts, run_lease,
                   created_at, at, last_error, metadata, attempts, holder
              FROM {schema}.live_jobs WHERE id = $1
            UNION ALL
            SELECT t.id, t.queue, t.kind, t.args, t.priority, t.state, t.attempt, t.max_attempts,
                   t.run_lease, t.created_at, t.finalized_at, t.last_error, t.metadata, t.attempts,
                   NULL::uuid
              FROM {schema}.terminal_job($1) t
            UNION ALL
            SELECT q.job_id, q.queue, q.kind, q.args, q.priority, 'dead_lettered', q.attempt,
                   q.max_attempts, q.run_lease, q.created_at, q.dead_at, q.last_error, q.metadata,
                   q.attempts, NULL::uuid
              FROM {schema}.dlq_entries q WHERE q.job_id = $1) u
     ORDER BY run_lease DESC
     LIMIT 1
),
claim AS (
    SELECT c.claimed_at, c.instance_id, c.heartbeat_at
      FROM (SELECT b.claimed_at, b.instance_id,
                   (SELECT max(l.heartbeat_at) FROM {schema}.leases l
                     WHERE l.job_id = j.id AND l.run_lease = j.run_lease) AS heartbeat_at
              FROM j
             CROSS JOIN LATERAL (
                    SELECT b.claimed_at, b.instance_id FROM {schema}.claim_batches b
                     WHERE b.claimed_at <= j.at
                       -- greatest(): no overflow for the earliest time (issue 36)
                       AND b.claimed_at >= greatest(j.created_at, '4714-11-24 00:01:00+00 BC') - interval '1 minute'
                       AND j.id = ANY (b.job_ids)
                       AND b.run_leases[array_position(b.job_ids, j.id)] = j.run_lease
                     ORDER BY b.claimed_at DESC
                     LIMIT 1) b
             WHERE j.state IN ('running', 'completed')
            UNION ALL
            SELECT p.claimed_at, p.instance_id, p.heartbeat_at
              FROM j
              JOIN {schema}.parked_attempts p ON p.job_id = j.id AND p.run_lease = j.run_lease
             WHERE j.state = 'running') c
     LIMIT 1
)
SELECT j.id, j.queue, j.kind, j.args, j.priority, j.state, j.attempt, j.max_attempts,
       j.run_lease, j.created_at, j.at, j.last_error, j.metadata, j.attempts,
       coalesce(j.holder, CASE WHEN j.state = 'running' THEN c.instance_id END) AS holder,
       c.claimed_at AS claim_started_at, c.instance_id AS claim_instance,
       c.heartbeat_at AS attempt_heartbeat_at,
       r.host AS claim_host, r.pid AS claim_pid, r.last_seen_at AS claim_seen_at,
       (extract(epoch FROM now()) - extract(epoch FROM r.last_seen_at))::float8 AS claim_age_secs
  FROM j
  LEFT JOIN claim c ON true
  LEFT JOIN awa.runtimes r ON r.instance_id = c.instance_id
