-- {schema}.finish(job_ids, run_leases, claim_slots, outcomes, delays, errors):
-- the guarded finish path. Every way an attempt ends goes through here:
-- the worker's complete/retry/snooze/cancel/fail, graceful-shutdown
-- release, and maintenance's rescue. Many attempts per call.
--
-- outcomes: complete | retry | snooze | cancel | fail | release | rescue
-- delays:   for retry/snooze, NULL means the default backoff
--           (2^attempt seconds, at most an hour, +-25% jitter).
--
-- The guard: an attempt is finished only if its receipt exists and this
-- call inserts its closure. The closure's primary key (slot, job_id,
-- run_lease) lets exactly one finisher win; a stale lease, a second
-- completion, or a completion racing a rescue gets accepted = false and
-- changes nothing.
--
-- Parked attempts (see exec_park) have a closure 'parked' and a row in
-- parked_attempts instead: for them the guard is the DELETE of that row,
-- whose row lock lets exactly one deleter win. An attempt is never both
-- open as a receipt and parked (exec_park closes the receipt in the same
-- transaction that parks it), so the two guards exclude each other. Their
-- terminal fact goes to the current queue slot with the body copied in
-- (their original slot may be gone).
--
-- Two passes: finish_pass runs the whole batch in one statement; attempts
-- it rejected run once more in a new statement, whose snapshot sees a park
-- that committed while the first was running (its closure made the first
-- pass lose, its parked row was not yet visible). Genuinely stale attempts
-- are rejected twice; the hot path pays one array check.
--
-- Where the job goes next (next_state):
--   completed / cancelled / failed -> terminal history (done_entries)
--   dead_lettered                  -> dlq_entries (queue opted in)
--   retryable / snoozed / available -> deferred_jobs, promoted when due
-- Retries past max_attempts fail (or dead-letter); snooze and release do
-- not count the attempt.
CREATE OR REPLACE FUNCTION {schema}.finish_pass(
    p_job_ids     bigint[],
    p_run_leases  bigint[],
    p_claim_slots integer[],
    p_outcomes    text[],
    p_delays      interval[],
    p_errors      text[]
) RETURNS TABLE (job_id bigint, run_lease bigint, accepted boolean, next_state text)
LANGUAGE plpgsql AS $fn$
#variable_conflict use_column
BEGIN
    IF EXISTS (SELECT 1 FROM unnest(p_outcomes) o
                WHERE o IS NULL OR o NOT IN ('complete', 'retry', 'snooze', 'cancel', 'fail', 'release', 'rescue')) THEN
        RAISE EXCEPTION 'unknown finish outcome in %', p_outcomes
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'Use complete, retry, snooze, cancel, fail, release or rescue.';
    END IF;

    RETURN QUERY
    WITH input AS (
        SELECT i.*
          FROM unnest(p_job_ids, p_run_leases, p_claim_slots, p_outcomes, p_delays, p_errors)
               WITH ORDINALITY AS i(job_id, run_lease, claim_slot, outcome, delay, error, ord)
    ),
    live_receipt AS (
        -- A pair named twice in one call is finished once: the first wins.
        -- The lookups are LATERAL so they stay index probes per attempt
        -- whatever the planner thinks of the (unknown) batch size.
        SELECT DISTINCT ON (i.job_id, i.run_lease)
               i.*, 'receipt'::text AS src, r.queue, r.attempt, r.ready_slot AS hist_slot,
               r.ready_seq AS hist_seq, NULL::jsonb AS hist_body,
               e.kind, e.args, e.priority, e.max_attempts, e.created_at, e.unique_key, e.metadata,
               coalesce(m.dlq_enabled, false) AS dlq
          FROM input i
         CROSS JOIN LATERAL (
                SELECT r.* FROM {schema}.claim_receipts r
                 WHERE r.slot = i.claim_slot AND r.job_id = i.job_id AND r.run_lease = i.run_lease
                 LIMIT 1) r
         CROSS JOIN LATERAL (
                SELECT e.* FROM {schema}.ready_entries e
                 WHERE e.slot = r.ready_slot AND e.job_id = r.job_id AND e.lane_seq = r.ready_seq
                 LIMIT 1) e
          LEFT JOIN awa.queue_meta m ON m.queue = r.queue
         ORDER BY i.job_id, i.run_lease, i.ord
    ),
    live_parked AS (
        -- Usually empty: one index probe per attempt on a small table.
        SELECT DISTINCT ON (i.job_id, i.run_lease)
               i.*, 'parked'::text AS src, p.queue, p.attempt,
               (SELECT g.slot FROM {schema}.ring_ledger g
                 WHERE g.ring = 'queue' ORDER BY g.generation DESC LIMIT 1) AS hist_slot,
               NULL::bigint AS hist_seq,
               jsonb_build_object('kind', p.kind, 'args', p.args, 'priority', p.priority,
                                  'max_attempts', p.max_attempts, 'created_at', p.created_at,
                                  'metadata', p.metadata) AS hist_body,
               p.kind, p.args, p.priority, p.max_attempts, p.created_at, p.unique_key, p.metadata,
               coalesce(m.dlq_enabled, false) AS dlq
          FROM input i
          JOIN {schema}.parked_attempts p ON p.job_id = i.job_id AND p.run_lease = i.run_lease
          LEFT JOIN awa.queue_meta m ON m.queue = p.queue
         ORDER BY i.job_id, i.run_lease, i.ord
    ),
    live AS (
        SELECT * FROM live_receipt
        UNION ALL
        SELECT * FROM live_parked
    ),
    decided AS (
        SELECT l.*,
               CASE
                   WHEN l.outcome = 'complete' THEN 'completed'
                   WHEN l.outcome = 'cancel' THEN 'cancelled'
                   WHEN l.outcome = 'snooze' THEN 'snoozed'
                   WHEN l.outcome = 'release' THEN 'available'
                   WHEN l.outcome IN ('retry', 'rescue') AND l.attempt < l.max_attempts THEN 'retryable'
                   WHEN l.dlq THEN 'dead_lettered'
                   ELSE 'failed'
               END AS next_state
          FROM live l
    ),
    closed AS (
        INSERT INTO {schema}.claim_closures AS c (slot, job_id, run_lease, outcome)
        SELECT d.claim_slot, d.job_id, d.run_lease,
               CASE d.outcome
                   WHEN 'rescue' THEN 'rescued'
                   WHEN 'release' THEN 'released'
                   WHEN 'retry' THEN CASE d.next_state WHEN 'retryable' THEN 'retried' ELSE d.next_state END
                   ELSE d.next_state
               END
          FROM decided d
         WHERE d.src = 'receipt'
        ON CONFLICT DO NOTHING
        RETURNING c.slot, c.job_id, c.run_lease
    ),
    unparked AS (
        DELETE FROM {schema}.parked_attempts p
         USING decided d
         WHERE d.src = 'parked' AND p.job_id = d.job_id AND p.run_lease = d.run_lease
        RETURNING p.job_id, p.run_lease
    ),
    won AS (
        SELECT d.*
          FROM decided d
          JOIN closed c ON c.slot = d.claim_slot AND c.job_id = d.job_id AND c.run_lease = d.run_lease
         WHERE d.src = 'receipt'
        UNION ALL
        SELECT d.*
          FROM decided d
          JOIN unparked u ON u.job_id = d.job_id AND u.run_lease = d.run_lease
         WHERE d.src = 'parked'
    ),
    history AS (
        INSERT INTO {schema}.done_entries
            (slot, job_id, run_lease, queue, state, attempt, ready_seq, body, last_error)
        SELECT w.hist_slot, w.job_id, w.run_lease, w.queue, w.next_state, w.attempt,
               w.hist_seq, w.hist_body, w.error
          FROM won w
         WHERE w.next_state IN ('completed', 'cancelled', 'failed')
    ),
    deferred AS (
        INSERT INTO {schema}.deferred_jobs
            (job_id, queue, priority, kind, args, attempt, max_attempts, run_lease, run_at,
             reason, created_at, unique_key, metadata, last_error)
        SELECT w.job_id, w.queue, w.priority, w.kind, w.args,
               CASE WHEN w.next_state = 'retryable' THEN w.attempt ELSE w.attempt - 1 END,
               w.max_attempts, w.run_lease,
               CASE WHEN w.next_state = 'available' THEN now()
                    ELSE now() + coalesce(w.delay,
                        make_interval(secs => least(power(2, w.attempt), 3600) * (0.75 + random() * 0.5)))
               END,
               CASE w.next_state WHEN 'retryable' THEN 'retry' WHEN 'snoozed' THEN 'snoozed' ELSE 'released' END,
               w.created_at, w.unique_key, w.metadata, w.error
          FROM won w
         WHERE w.next_state IN ('retryable', 'snoozed', 'available')
    ),
    dead AS (
        INSERT INTO {schema}.dlq_entries
            (job_id, queue, priority, kind, args, attempt, max_attempts, run_lease,
             created_at, last_error, metadata, unique_key)
        SELECT w.job_id, w.queue, w.priority, w.kind, w.args, w.attempt, w.max_attempts,
               w.run_lease, w.created_at, w.error, w.metadata, w.unique_key
          FROM won w
         WHERE w.next_state = 'dead_lettered'
    ),
    counted AS (
        INSERT INTO {schema}.count_deltas (slot, queue, state, delta)
        SELECT w.hist_slot, w.queue, w.next_state, count(*)
          FROM won w
         WHERE w.next_state IN ('completed', 'cancelled', 'failed', 'dead_lettered')
         GROUP BY w.hist_slot, w.queue, w.next_state
    ),
    -- Key lookups through = ANY(array): index probes, no join to plan.
    unique_released AS (
        DELETE FROM {schema}.job_uniques u
         WHERE u.unique_key = ANY (ARRAY(
                   SELECT w.unique_key FROM won w
                    WHERE w.unique_key IS NOT NULL
                      AND w.next_state IN ('completed', 'cancelled', 'failed', 'dead_lettered')))
           AND u.job_id = ANY (ARRAY(SELECT w.job_id FROM won w))
    ),
    state_dropped AS (
        DELETE FROM {schema}.attempt_state s
         WHERE s.job_id = ANY (ARRAY(
                   SELECT w.job_id FROM won w
                    WHERE w.next_state IN ('completed', 'cancelled', 'failed', 'dead_lettered')))
    )
    SELECT i.job_id, i.run_lease, w.job_id IS NOT NULL, w.next_state
      FROM input i
      LEFT JOIN won w ON w.ord = i.ord
     ORDER BY i.ord;
END
$fn$;

CREATE OR REPLACE FUNCTION {schema}.finish(
    p_job_ids     bigint[],
    p_run_leases  bigint[],
    p_claim_slots integer[],
    p_outcomes    text[],
    p_delays      interval[],
    p_errors      text[]
) RETURNS TABLE (job_id bigint, run_lease bigint, accepted boolean, next_state text)
LANGUAGE plpgsql AS $fn$
#variable_conflict use_column
DECLARE
    v_accepted boolean[];
    v_next     text[];
    v_retry    integer[];
    v_acc2     boolean[];
    v_next2    text[];
    k integer;
BEGIN
    SELECT array_agg(f.accepted ORDER BY f.ord), array_agg(f.next_state ORDER BY f.ord)
      INTO v_accepted, v_next
      FROM {schema}.finish_pass(p_job_ids, p_run_leases, p_claim_slots, p_outcomes, p_delays, p_errors)
           WITH ORDINALITY AS f(job_id, run_lease, accepted, next_state, ord);

    IF false = ANY (v_accepted) THEN
        -- The second pass: a new statement, so a new snapshot.
        v_retry := ARRAY(SELECT x.i FROM generate_subscripts(v_accepted, 1) AS x(i) WHERE NOT v_accepted[x.i] ORDER BY x.i);
        SELECT array_agg(f.accepted ORDER BY f.ord), array_agg(f.next_state ORDER BY f.ord)
          INTO v_acc2, v_next2
          FROM {schema}.finish_pass(
                   ARRAY(SELECT p_job_ids[x.i] FROM unnest(v_retry) WITH ORDINALITY AS x(i, o) ORDER BY x.o),
                   ARRAY(SELECT p_run_leases[x.i] FROM unnest(v_retry) WITH ORDINALITY AS x(i, o) ORDER BY x.o),
                   ARRAY(SELECT p_claim_slots[x.i] FROM unnest(v_retry) WITH ORDINALITY AS x(i, o) ORDER BY x.o),
                   ARRAY(SELECT p_outcomes[x.i] FROM unnest(v_retry) WITH ORDINALITY AS x(i, o) ORDER BY x.o),
                   ARRAY(SELECT p_delays[x.i] FROM unnest(v_retry) WITH ORDINALITY AS x(i, o) ORDER BY x.o),
                   ARRAY(SELECT p_errors[x.i] FROM unnest(v_retry) WITH ORDINALITY AS x(i, o) ORDER BY x.o))
               WITH ORDINALITY AS f(job_id, run_lease, accepted, next_state, ord);
        FOR k IN 1 .. coalesce(cardinality(v_retry), 0) LOOP
            v_accepted[v_retry[k]] := v_acc2[k];
            v_next[v_retry[k]] := v_next2[k];
        END LOOP;
    END IF;

    RETURN QUERY
    SELECT p_job_ids[x.i], p_run_leases[x.i], v_accepted[x.i], v_next[x.i]
      FROM generate_subscripts(p_job_ids, 1) AS x(i)
     ORDER BY x.i;
END
$fn$;
