-- {schema}.terminal_job(job_id): the terminal_jobs rows of one job, found
-- through the indexes (done_entries by job id, done_batches by the id
-- range each batch covers, failure_entries by its key) instead of
-- unnesting every batch as a filter on the view would. The branches are
-- terminal_jobs' own, with the job filter inside: keep them in step with
-- install_history_plane.sql.
CREATE OR REPLACE FUNCTION {schema}.terminal_job(p_job_id bigint)
RETURNS SETOF {schema}.terminal_jobs LANGUAGE sql STABLE AS $fn$
    SELECT d.job_id, d.queue, d.body ->> 'kind', d.body -> 'args',
           (d.body ->> 'priority')::smallint, d.state, d.attempt,
           (d.body ->> 'max_attempts')::integer, d.run_lease,
           (d.body ->> 'created_at')::timestamptz, d.finalized_at,
           d.last_error, d.body -> 'metadata', d.slot, d.attempts
      FROM {schema}.done_entries d
     WHERE d.job_id = p_job_id
       AND NOT EXISTS (SELECT 1 FROM {schema}.ring_retirements x
                        WHERE x.ring = 'queue' AND x.slot = d.slot)
    UNION ALL
    SELECT u.job_id, b.queue, r.kind, r.args, r.priority, 'completed'::text, u.attempt,
           r.max_attempts, u.run_lease, r.created_at, b.finalized_at, NULL::text, r.metadata,
           b.slot,
           coalesce(r.attempts, '[]'::jsonb) || jsonb_build_array(jsonb_build_object(
               'attempt', u.attempt, 'ended_at', b.finalized_at, 'outcome', 'completed'))
      FROM {schema}.done_batches b
     CROSS JOIN LATERAL unnest(b.job_ids, b.run_leases, b.attempts, b.ready_seqs,
                               b.priorities, b.shards)
           AS u(job_id, run_lease, attempt, ready_seq, priority, shard)
      LEFT JOIN LATERAL (
            SELECT r.* FROM {schema}.ready_entries r
             WHERE r.slot = b.slot AND r.queue = b.queue AND r.priority = u.priority
               AND r.shard = u.shard AND r.lane_seq = u.ready_seq AND r.job_id = u.job_id
             LIMIT 1) r ON true
     WHERE int8range(b.lo_job_id, b.hi_job_id, '[]') @> p_job_id
       AND u.job_id = p_job_id
       AND NOT EXISTS (SELECT 1 FROM {schema}.ring_retirements x
                        WHERE x.ring = 'queue' AND x.slot = b.slot)
    UNION ALL
    SELECT f.job_id, f.queue, f.kind, f.args, f.priority, f.state, f.attempt,
           f.max_attempts, f.run_lease, f.created_at, f.finalized_at, f.last_error,
           f.metadata, NULL::integer, f.attempts
      FROM {schema}.failure_entries f
     WHERE f.job_id = p_job_id
$fn$;
