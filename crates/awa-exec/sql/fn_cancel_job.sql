-- {schema}.cancel_job(job_id): cancel a job wherever it is.
--   waiting in the ready ring -> tombstone + terminal fact (with its body)
--   deferred                  -> removed, terminal fact carries the body
-- The terminal fact of a cancelled job is a failure_entries row (kept for
-- failure_retention, retryable; ADR 11) with the job's attempt records; no
-- attempt ran, so none is added. The count delta goes to the queue ring.
--   running                   -> its live attempt is finished as cancelled
--                                through the guarded path; the worker's later
--                                writes for that attempt are rejected, and
--                                NOTIFY awa_cancel 'job_id:run_lease:cancelled'
--                                (delivered at commit) tells the worker at
--                                once, so its handler stops (the cancel rule,
--                                awa-exec/src/worker/mod.rs)
-- Its unique key is released, or kept until its period ends when its key
-- spec keeps cancelled jobs (unique_held), as finish does.
-- Returns the state the job was in, or NULL when it was not cancellable
-- (unknown, or already terminal).
CREATE OR REPLACE FUNCTION {schema}.cancel_job(p_job_id bigint)
RETURNS text LANGUAGE plpgsql AS $fn$
#variable_conflict use_column
DECLARE
    v_t record;
    v_d record;
    v_r record;
    v_slot integer;
BEGIN
    SELECT * INTO v_t FROM {schema}.ready_tombstone(p_job_id);
    IF FOUND THEN
        INSERT INTO {schema}.failure_entries AS f
            (job_id, run_lease, queue, state, attempt, priority, kind, args, max_attempts,
             created_at, unique_key, metadata, attempts)
        VALUES (p_job_id, v_t.run_lease, v_t.queue, 'cancelled', v_t.attempt, v_t.priority,
                v_t.kind, v_t.args, v_t.max_attempts, v_t.created_at, v_t.unique_key,
                v_t.metadata, v_t.attempts)
        ON CONFLICT (job_id) DO UPDATE
           SET run_lease = EXCLUDED.run_lease, queue = EXCLUDED.queue, state = EXCLUDED.state,
               attempt = EXCLUDED.attempt, priority = EXCLUDED.priority, kind = EXCLUDED.kind,
               args = EXCLUDED.args, max_attempts = EXCLUDED.max_attempts,
               created_at = EXCLUDED.created_at, finalized_at = EXCLUDED.finalized_at,
               unique_key = EXCLUDED.unique_key, metadata = EXCLUDED.metadata,
               last_error = NULL, attempts = EXCLUDED.attempts;
        INSERT INTO {schema}.count_deltas (slot, queue, state, delta) VALUES (v_t.slot, v_t.queue, 'cancelled', 1);
        DELETE FROM awa.job_uniques u
         WHERE u.job_id = p_job_id AND NOT {schema}.unique_held(u.hold_until, u.hold_states, 'cancelled');
        UPDATE awa.job_uniques u SET finished_at = now()
         WHERE u.job_id = p_job_id AND {schema}.unique_held(u.hold_until, u.hold_states, 'cancelled');
        RETURN 'available';
    END IF;

    DELETE FROM {schema}.deferred_jobs d WHERE d.job_id = p_job_id RETURNING * INTO v_d;
    IF FOUND THEN
        SELECT g.slot INTO v_slot
          FROM {schema}.ring_ledger g WHERE g.ring = 'queue' ORDER BY g.generation DESC LIMIT 1;
        INSERT INTO {schema}.failure_entries AS f
            (job_id, run_lease, queue, state, attempt, priority, kind, args, max_attempts,
             created_at, unique_key, metadata, last_error, attempts)
        VALUES (p_job_id, v_d.run_lease, v_d.queue, 'cancelled', v_d.attempt, v_d.priority,
                v_d.kind, v_d.args, v_d.max_attempts, v_d.created_at, v_d.unique_key,
                v_d.metadata, v_d.last_error, v_d.attempts)
        ON CONFLICT (job_id) DO UPDATE
           SET run_lease = EXCLUDED.run_lease, queue = EXCLUDED.queue, state = EXCLUDED.state,
               attempt = EXCLUDED.attempt, priority = EXCLUDED.priority, kind = EXCLUDED.kind,
               args = EXCLUDED.args, max_attempts = EXCLUDED.max_attempts,
               created_at = EXCLUDED.created_at, finalized_at = EXCLUDED.finalized_at,
               unique_key = EXCLUDED.unique_key, metadata = EXCLUDED.metadata,
               last_error = EXCLUDED.last_error, attempts = EXCLUDED.attempts;
        INSERT INTO {schema}.count_deltas (slot, queue, state, delta) VALUES (v_slot, v_d.queue, 'cancelled', 1);
        DELETE FROM awa.job_uniques u
         WHERE u.job_id = p_job_id AND NOT {schema}.unique_held(u.hold_until, u.hold_states, 'cancelled');
        UPDATE awa.job_uniques u SET finished_at = now()
         WHERE u.job_id = p_job_id AND {schema}.unique_held(u.hold_until, u.hold_states, 'cancelled');
        DELETE FROM {schema}.attempt_state WHERE job_id = p_job_id;
        RETURN v_d.reason;
    END IF;

    -- Running: its open batch item, or its parked row (exec_park moved it
    -- out of the rings). Batches are not indexed by job: this scans the
    -- batch rows of the claim ring (one per claim call), which an operator
    -- command can afford and the hot path never does.
    SELECT x.run_lease, x.slot, x.batch_id, x.item INTO v_r
      FROM (SELECT u.run_lease, b.slot, b.batch_id, u.item::integer AS item
              FROM {schema}.claim_batches b
             CROSS JOIN LATERAL unnest(b.job_ids, b.run_leases) WITH ORDINALITY AS u(job_id, run_lease, item)
             WHERE p_job_id = ANY (b.job_ids) AND u.job_id = p_job_id
               AND NOT EXISTS (SELECT 1 FROM {schema}.claim_closures c
                                WHERE c.slot = b.slot AND c.batch_id = b.batch_id AND u.item = ANY (c.items))
            UNION ALL
            SELECT p.run_lease, p.claim_slot, p.batch_id, p.item
              FROM {schema}.parked_attempts p
             WHERE p.job_id = p_job_id) x
     ORDER BY x.run_lease DESC
     LIMIT 1;
    IF FOUND THEN
        PERFORM 1 FROM {schema}.finish(ARRAY[p_job_id], ARRAY[v_r.run_lease], ARRAY[v_r.slot],
                                       ARRAY[v_r.batch_id], ARRAY[v_r.item],
                                       ARRAY['cancel'], ARRAY[NULL::interval], ARRAY['cancelled by operator'])
         WHERE accepted;
        IF FOUND THEN
            PERFORM pg_notify('awa_cancel', p_job_id || ':' || v_r.run_lease || ':cancelled');
            RETURN 'running';
        END IF;
    END IF;
    RETURN NULL;
END
$fn$;
