-- {schema}.rescue_stale(stale, limit): finish abandoned attempts as
-- retries, through the guarded finish path (so a worker that was only slow
-- and finishes later is rejected, and at most one of them wins).
-- Abandoned means: open, and either claimed more than `stale` ago with no
-- lease heartbeat within `stale`, or past its hard deadline, or waiting for
-- a callback that timed out; parked attempts (exec_park) likewise. Returns
-- how many were rescued. Each rescued attempt is named on NOTIFY
-- awa_cancel ('job_id:run_lease:rescued', delivered at commit), so a
-- worker that still runs it (a slow one, or one past a deadline) tells
-- its handler to stop at once.
--
-- Bounds (SQLSTATE 22023, before anything is read): stale within
-- awa_core::bounds::RESCUE_AFTER, 1 second to 1 day. Workers heartbeat a
-- running job at a third of the published bound, so a shorter one (or
-- zero, or a negative interval) would rescue healthy running jobs: they
-- would run again and their results be rejected. limit 1 to 10000
-- (MAINT_LIMIT).
CREATE OR REPLACE FUNCTION {schema}.rescue_stale(p_stale interval, p_limit integer)
RETURNS integer LANGUAGE plpgsql AS $fn$
#variable_conflict use_column
DECLARE
    v_count integer;
BEGIN
    IF p_stale IS NULL OR p_stale NOT BETWEEN interval '1 second' AND interval '1 day' THEN
        RAISE EXCEPTION 'rescue_stale: the staleness bound must be 1s to 1day (got %)',
                        coalesce(p_stale::text, 'NULL')
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'Workers heartbeat at a third of the rescue bound; a shorter bound rescues healthy running jobs. Use the leader''s --rescue-after (1s to 1day, 60s by default).';
    END IF;
    IF p_limit IS NULL OR p_limit NOT BETWEEN 1 AND 10000 THEN
        RAISE EXCEPTION 'rescue_stale: limit must be 1 to 10000 (got %)', coalesce(p_limit::text, 'NULL')
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'Attempts one maintenance call rescues (awa_core::bounds::MAINT_LIMIT); the leader rescues 1000 at a time.';
    END IF;
    WITH old_open AS (
        -- Open items of batches claimed more than `stale` ago (the index
        -- on claimed_at; a batch its last link closed is skipped by one
        -- probe), with their lease if they materialized one.
        SELECT b.slot, b.batch_id, u.item::integer AS item, u.job_id, u.run_lease,
               l.heartbeat_at, l.deadline_at, l.callback_timeout
          FROM {schema}.claim_batches b
         CROSS JOIN LATERAL unnest(b.job_ids, b.run_leases) WITH ORDINALITY AS u(job_id, run_lease, item)
          LEFT JOIN {schema}.leases l ON l.job_id = u.job_id AND l.run_lease = u.run_lease
         WHERE b.claimed_at < now() - p_stale
           AND NOT EXISTS (SELECT 1 FROM {schema}.claim_closures c
                            WHERE c.slot = b.slot AND c.batch_id = b.batch_id AND c.open_after = 0)
           AND NOT EXISTS (SELECT 1 FROM {schema}.claim_closures c
                            WHERE c.slot = b.slot AND c.batch_id = b.batch_id AND u.item = ANY (c.items))
    ),
    abandoned AS (
      (SELECT o.slot, o.batch_id, o.item, o.job_id, o.run_lease,
              CASE WHEN o.deadline_at < now() THEN 'attempt passed its deadline'
                   WHEN o.callback_timeout < now() THEN 'callback wait timed out'
                   ELSE 'worker stopped heartbeating (stale for ' || p_stale || ')' END AS reason
         FROM old_open o
        WHERE o.deadline_at < now() OR o.callback_timeout < now()
           OR o.heartbeat_at IS NULL OR o.heartbeat_at < now() - p_stale
        LIMIT p_limit)
      UNION
        -- A deadline or a callback timeout can pass before `stale` has:
        -- those attempts have a lease (it carries both).
      (SELECT l.claim_slot, l.batch_id, l.item, l.job_id, l.run_lease,
              CASE WHEN l.deadline_at < now() THEN 'attempt passed its deadline'
                   ELSE 'callback wait timed out' END
         FROM {schema}.leases l
        WHERE (l.deadline_at < now() OR l.callback_timeout < now())
          AND NOT EXISTS (SELECT 1 FROM {schema}.claim_closures c
                           WHERE c.slot = l.claim_slot AND c.batch_id = l.batch_id AND l.item = ANY (c.items))
        LIMIT p_limit)
      UNION ALL
        -- Parked attempts (exec_park) carry their own heartbeat.
      (SELECT p.claim_slot, p.batch_id, p.item, p.job_id, p.run_lease,
               CASE WHEN p.deadline_at < now() THEN 'attempt passed its deadline'
                    WHEN p.callback_timeout < now() THEN 'callback wait timed out'
                    ELSE 'worker stopped heartbeating (stale for ' || p_stale || ')' END
          FROM {schema}.parked_attempts p
         WHERE p.deadline_at < now()
            OR p.callback_timeout < now()
            OR (p.claimed_at < now() - p_stale
                AND (p.heartbeat_at IS NULL OR p.heartbeat_at < now() - p_stale))
         LIMIT p_limit)
    )
    SELECT count(pg_notify('awa_cancel', f.job_id || ':' || f.run_lease || ':rescued')) INTO v_count
      FROM {schema}.finish(
          ARRAY(SELECT job_id FROM abandoned ORDER BY job_id),
          ARRAY(SELECT run_lease FROM abandoned ORDER BY job_id),
          ARRAY(SELECT slot FROM abandoned ORDER BY job_id),
          ARRAY(SELECT batch_id FROM abandoned ORDER BY job_id),
          ARRAY(SELECT item FROM abandoned ORDER BY job_id),
          ARRAY(SELECT 'rescue'::text FROM abandoned ORDER BY job_id),
          ARRAY(SELECT NULL::interval FROM abandoned ORDER BY job_id),
          ARRAY(SELECT reason FROM abandoned ORDER BY job_id)) f
     WHERE f.accepted;
    RETURN v_count;
END
$fn$;
