-- {schema}.finish(job_ids, run_leases, claim_slots, batch_ids, items,
--                 outcomes, delays, errors):
-- the guarded finish path. Every way an attempt ends goes through here:
-- the worker's complete/retry/snooze/cancel/fail, graceful-shutdown
-- release, and maintenance's rescue. Many attempts per call; each is named
-- by its token (job_id, run_lease, claim_slot, batch_id, item).
--
-- outcomes: complete | retry | snooze | cancel | fail | release | rescue
-- delays:   for retry/snooze, NULL means the default backoff
--           (2^attempt seconds, at most an hour, +-25% jitter).
--
-- The guard. An attempt is finished only if its batch item still names it
-- (job_ids[item] = job_id, run_leases[item] = run_lease), no closure link
-- of its batch lists the item, and this call inserts the next link of the
-- batch listing it. A call reads all links of each batch it touches and
-- inserts, per batch, ONE link numbered max(link) + 1 with every item it
-- closes there (ON CONFLICT DO NOTHING). Two finishers of one batch that
-- read the same links both try the same number; the primary key (slot,
-- batch_id, link) lets one insert it and the other gets nothing back
-- (under READ COMMITTED it waits for the winner's commit first; under
-- REPEATABLE READ or SERIALIZABLE the conflict with an invisible row is a
-- serialization failure, 40001). So whoever inserts link n saw links
-- 1..n-1: every item is listed by at most one link, whatever the
-- isolation level. A call whose link lost the race reports those items
-- `contended`, and finish runs them again in a new statement (a new
-- snapshot that sees the winner's link): they are then finished, or
-- rejected because the winner closed them. A stale lease, a second
-- completion, or a completion racing a rescue or a cancel thus gets
-- accepted = false and changes nothing.
--
-- Parked attempts (see exec_park) have their item closed by a 'parked'
-- link and a row in parked_attempts: for them the guard is the DELETE of
-- that row, whose row lock lets exactly one deleter win. exec_park writes
-- the link and the row in one transaction and only for items whose link it
-- inserted, so an attempt has exactly one open piece of evidence at a
-- time. Their terminal fact goes to the current queue slot with the body
-- copied in (their original slot may be gone).
--
-- Evidence written (the hot path is the first line):
--   completed (from a batch) -> one done_batches row per queue slot and
--                               queue touched, body left in its ready slot
--   completed from parked    -> one done_entries row each, body copied in
--   cancelled / failed       -> one failure_entries row each, body copied
--                               in, kept for failure_retention (ADR 11)
--   dead_lettered                   -> dlq_entries (queue opted in)
--   retryable / snoozed / available -> deferred_jobs, promoted when due
-- plus one count delta per (slot, queue, state). Retries past
-- max_attempts fail (or dead-letter); snooze and release do not count the
-- attempt. Every row but the completion's carries the job's attempt
-- records with this attempt's appended (attempt_push, ADR 11): those rows
-- copy the body anyway, and a completion from a batch writes nothing new.
--
-- Bounds (SQLSTATE 22023, before anything is read or written; the Rust
-- side clamps what handlers return to the same): arrays of one length, an
-- outcome from the list above, a delay NULL or 0 to 30 days
-- (awa_core::bounds::MAX_HANDLER_DELAY), an error NULL or at most 8 KiB
-- (MAX_ERROR_BYTES).
CREATE OR REPLACE FUNCTION {schema}.finish_pass(
    p_job_ids     bigint[],
    p_run_leases  bigint[],
    p_claim_slots integer[],
    p_batch_ids   bigint[],
    p_items       integer[],
    p_outcomes    text[],
    p_delays      interval[],
    p_errors      text[]
) RETURNS TABLE (job_id bigint, run_lease bigint, accepted boolean, next_state text, contended boolean)
LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan AS $fn$
#variable_conflict use_column
BEGIN
    IF array_length(p_run_leases, 1) IS DISTINCT FROM array_length(p_job_ids, 1)
       OR array_length(p_claim_slots, 1) IS DISTINCT FROM array_length(p_job_ids, 1)
       OR array_length(p_batch_ids, 1) IS DISTINCT FROM array_length(p_job_ids, 1)
       OR array_length(p_items, 1) IS DISTINCT FROM array_length(p_job_ids, 1)
       OR array_length(p_outcomes, 1) IS DISTINCT FROM array_length(p_job_ids, 1)
       OR array_length(p_delays, 1) IS DISTINCT FROM array_length(p_job_ids, 1)
       OR array_length(p_errors, 1) IS DISTINCT FROM array_length(p_job_ids, 1) THEN
        RAISE EXCEPTION 'finish arrays differ in length' USING ERRCODE = 'invalid_parameter_value',
              HINT = 'Send one element per attempt in every array.';
    END IF;
    IF EXISTS (SELECT 1 FROM unnest(p_outcomes) o
                WHERE o IS NULL OR o NOT IN ('complete', 'retry', 'snooze', 'cancel', 'fail', 'release', 'rescue')) THEN
        RAISE EXCEPTION 'unknown finish outcome in %', p_outcomes
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'Use complete, retry, snooze, cancel, fail, release or rescue.';
    END IF;
    IF EXISTS (SELECT 1 FROM unnest(p_delays, p_errors) AS x(delay, error)
                WHERE x.delay NOT BETWEEN interval '0' AND interval '30 days'
                   OR octet_length(x.error) > 8192) THEN
        RAISE EXCEPTION 'finish: a delay is outside 0 to 30 days, or an error is longer than 8192 bytes'
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'Clamp retry and snooze delays to 30 days and cut error text to 8 KiB (awa_core::bounds::handler_delay, error_text).';
    END IF;

    RETURN QUERY
    WITH input AS (
        -- A pair named twice in one call is finished once: the first wins.
        SELECT DISTINCT ON (i.job_id, i.run_lease) i.*
          FROM unnest(p_job_ids, p_run_leases, p_claim_slots, p_batch_ids, p_items,
                      p_outcomes, p_delays, p_errors)
               WITH ORDINALITY AS i(job_id, run_lease, claim_slot, batch_id, item, outcome, delay, error, ord)
         ORDER BY i.job_id, i.run_lease, i.ord
    ),
    batches AS MATERIALIZED (
        -- Each batch touched, with what its links have closed so far. The
        -- lookups are LATERAL so they stay index probes per batch whatever
        -- the planner thinks of the (unknown) batch count.
        SELECT b.slot, b.batch_id, b.queue, b.job_ids, b.run_leases, b.attempts,
               b.ready_slots, b.ready_seqs, b.priorities, b.shards, b.keyed, ch.last_link, ch.closed,
               b.claimed_at, b.instance_id
          FROM (SELECT DISTINCT i.claim_slot, i.batch_id FROM input i) k
         -- (Its arrays read whole once: claim_batch_whole.)
         CROSS JOIN LATERAL {schema}.claim_batch_whole(k.claim_slot, k.batch_id) b
         CROSS JOIN LATERAL (
                SELECT coalesce(max(c.link), 0) AS last_link,
                       coalesce((SELECT array_agg(x) FROM {schema}.claim_closures c2, unnest(c2.items) x
                                  WHERE c2.slot = b.slot AND c2.batch_id = b.batch_id), '{}') AS closed
                  FROM {schema}.claim_closures c
                 WHERE c.slot = b.slot AND c.batch_id = b.batch_id) ch
    ),
    probe AS (
        -- Each input against its batch: open = the item still names this
        -- attempt and no link lists it.
        SELECT i.*, b.queue, b.attempts[i.item] AS attempt,
               b.ready_slots[i.item] AS hist_slot, b.ready_seqs[i.item] AS hist_seq,
               b.priorities[i.item] AS lane_priority, b.shards[i.item] AS lane_shard,
               coalesce(b.job_ids[i.item] = i.job_id AND b.run_leases[i.item] = i.run_lease
                        AND NOT (i.item = ANY (b.closed)), false) AS open,
               -- The body is read only when the outcome needs it: a retry
               -- or a failure copies it, a keyed job releases its key. A
               -- plain completion leaves it where it is, unread.
               (i.outcome <> 'complete' OR coalesce(i.item = ANY (b.keyed), false)) AS needs_body,
               b.claimed_at AS started_at, b.instance_id
          FROM input i
          LEFT JOIN batches b ON b.slot = i.claim_slot AND b.batch_id = i.batch_id
    ),
    live_batch AS (
        SELECT p.job_id, p.run_lease, p.claim_slot, p.batch_id, p.item, p.outcome, p.delay,
               p.error, p.ord, 'batch'::text AS src, p.queue, p.attempt, p.hist_slot, p.hist_seq,
               p.lane_priority, p.lane_shard, NULL::jsonb AS hist_body,
               e.kind, e.args, e.priority, e.max_attempts, e.created_at, e.unique_key, e.metadata,
               coalesce(m.dlq_enabled, false) AS dlq,
               p.started_at, p.instance_id, e.attempts AS history
          FROM probe p
          LEFT JOIN LATERAL (
                SELECT e.* FROM {schema}.ready_entries e
                 WHERE p.needs_body AND e.slot = p.hist_slot AND e.queue = p.queue
                   AND e.priority = p.lane_priority AND e.shard = p.lane_shard
                   AND e.lane_seq = p.hist_seq AND e.job_id = p.job_id
                 LIMIT 1) e ON true
          LEFT JOIN LATERAL (
                SELECT m.dlq_enabled FROM awa.queue_meta m
                 WHERE p.outcome <> 'complete' AND m.queue = p.queue) m ON true
         WHERE p.open
           -- A body that is needed is there (the slot is live while the
           -- item is open); without it the item is not finished.
           AND (NOT p.needs_body OR e.job_id IS NOT NULL)
    ),
    live_parked AS (
        -- Only an item closed in its batch can be parked: one index probe
        -- each on a small table, none on the hot path.
        SELECT i.job_id, i.run_lease, i.claim_slot, i.batch_id, i.item, i.outcome, i.delay,
               i.error, i.ord, 'parked'::text AS src, p.queue, p.attempt,
               (SELECT g.slot FROM {schema}.ring_ledger g
                 WHERE g.ring = 'queue' ORDER BY g.generation DESC LIMIT 1) AS hist_slot,
               NULL::bigint AS hist_seq, NULL::smallint AS lane_priority, NULL::smallint AS lane_shard,
               {schema}.job_body(p.kind, p.args, p.priority, p.max_attempts, p.created_at, p.metadata) AS hist_body,
               p.kind, p.args, p.priority, p.max_attempts, p.created_at, p.unique_key, p.metadata,
               coalesce(m.dlq_enabled, false) AS dlq,
               p.claimed_at, p.instance_id, p.attempts
          FROM probe i
          JOIN {schema}.parked_attempts p ON p.job_id = i.job_id AND p.run_lease = i.run_lease
          LEFT JOIN awa.queue_meta m ON m.queue = p.queue
         WHERE NOT i.open
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
          FROM (SELECT * FROM live_batch UNION ALL SELECT * FROM live_parked) l
    ),
    coded AS (
        -- What the closure link records for each item.
        SELECT d.*,
               CASE d.outcome
                   WHEN 'rescue' THEN 'rescued'
                   WHEN 'release' THEN 'released'
                   WHEN 'retry' THEN CASE d.next_state WHEN 'retryable' THEN 'retried' ELSE d.next_state END
                   ELSE d.next_state
               END AS code
          FROM decided d
         WHERE d.src = 'batch'
    ),
    links AS (
        -- One link per batch, in (slot, batch_id) order so two calls that
        -- touch the same batches wait for each other in the same order.
        SELECT c.claim_slot, c.batch_id,
               min(b.last_link) + 1 AS link,
               array_agg(c.item ORDER BY c.item) AS items,
               CASE WHEN count(DISTINCT c.code) = 1 THEN min(c.code) ELSE 'mixed' END AS outcome,
               CASE WHEN count(DISTINCT c.code) = 1 THEN NULL
                    ELSE array_agg(c.code ORDER BY c.item) END AS outcomes,
               (min(cardinality(b.job_ids)) - min(cardinality(b.closed)) - count(*))::integer AS open_after
          FROM coded c
          JOIN batches b ON b.slot = c.claim_slot AND b.batch_id = c.batch_id
         GROUP BY c.claim_slot, c.batch_id
         ORDER BY c.claim_slot, c.batch_id
    ),
    closed AS (
        INSERT INTO {schema}.claim_closures AS c (slot, batch_id, link, items, outcome, outcomes, open_after)
        SELECT l.claim_slot, l.batch_id, l.link, l.items, l.outcome, l.outcomes, l.open_after
          FROM links l
        ON CONFLICT DO NOTHING
        RETURNING c.slot, c.batch_id
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
          JOIN closed c ON c.slot = d.claim_slot AND c.batch_id = d.batch_id
         WHERE d.src = 'batch'
        UNION ALL
        SELECT d.*
          FROM decided d
          JOIN unparked u ON u.job_id = d.job_id AND u.run_lease = d.run_lease
         WHERE d.src = 'parked'
    ),
    done_batch AS (
        -- The hot path: one compact row per (queue slot, queue).
        INSERT INTO {schema}.done_batches
            (slot, queue, lo_job_id, hi_job_id, job_ids, run_leases, attempts, ready_seqs,
             priorities, shards)
        SELECT w.hist_slot, w.queue, min(w.job_id), max(w.job_id),
               array_agg(w.job_id ORDER BY w.job_id), array_agg(w.run_lease ORDER BY w.job_id),
               array_agg(w.attempt ORDER BY w.job_id), array_agg(w.hist_seq ORDER BY w.job_id),
               array_agg(w.lane_priority ORDER BY w.job_id), array_agg(w.lane_shard ORDER BY w.job_id)
          FROM won w
         WHERE w.src = 'batch' AND w.next_state = 'completed'
         GROUP BY w.hist_slot, w.queue
    ),
    history AS (
        -- A parked attempt's body may be in a slot that is gone: the fact
        -- carries it.
        INSERT INTO {schema}.done_entries
            (slot, job_id, run_lease, queue, state, attempt, body, last_error, attempts)
        SELECT w.hist_slot, w.job_id, w.run_lease, w.queue, w.next_state, w.attempt,
               w.hist_body, w.error,
               {schema}.attempt_push(w.history, w.attempt, w.outcome, w.next_state,
                                     w.started_at, w.instance_id, w.error)
          FROM won w
         WHERE w.next_state = 'completed' AND w.src = 'parked'
    ),
    failures AS (
        -- Failed and cancelled jobs leave the ring (ADR 11): kept for the
        -- substrate's failure_retention, readable and retryable meanwhile.
        -- A job is terminal once until it is retried, which deletes its
        -- row; should a row be there anyway, the newer fact replaces it.
        INSERT INTO {schema}.failure_entries AS f
            (job_id, run_lease, queue, state, attempt, priority, kind, args, max_attempts,
             created_at, unique_key, metadata, last_error, attempts)
        SELECT w.job_id, w.run_lease, w.queue, w.next_state, w.attempt, w.priority, w.kind,
               w.args, w.max_attempts, w.created_at, w.unique_key, w.metadata, w.error,
               {schema}.attempt_push(w.history, w.attempt, w.outcome, w.next_state,
                                     w.started_at, w.instance_id, w.error)
          FROM won w
         WHERE w.next_state IN ('cancelled', 'failed')
        ON CONFLICT (job_id) DO UPDATE
           SET run_lease = EXCLUDED.run_lease, queue = EXCLUDED.queue, state = EXCLUDED.state,
               attempt = EXCLUDED.attempt, priority = EXCLUDED.priority, kind = EXCLUDED.kind,
               args = EXCLUDED.args, max_attempts = EXCLUDED.max_attempts,
               created_at = EXCLUDED.created_at, finalized_at = EXCLUDED.finalized_at,
               unique_key = EXCLUDED.unique_key, metadata = EXCLUDED.metadata,
               last_error = EXCLUDED.last_error, attempts = EXCLUDED.attempts
    ),
    deferred AS (
        INSERT INTO {schema}.deferred_jobs
            (job_id, queue, priority, kind, args, attempt, max_attempts, run_lease, run_at,
             reason, created_at, unique_key, metadata, last_error, attempts)
        SELECT w.job_id, w.queue, w.priority, w.kind, w.args,
               CASE WHEN w.next_state = 'retryable' THEN w.attempt ELSE w.attempt - 1 END,
               w.max_attempts, w.run_lease,
               CASE WHEN w.next_state = 'available' THEN now()
                    ELSE now() + coalesce(w.delay,
                        make_interval(secs => least(power(2, w.attempt), 3600) * (0.75 + random() * 0.5)))
               END,
               CASE w.next_state WHEN 'retryable' THEN 'retry' WHEN 'snoozed' THEN 'snoozed' ELSE 'released' END,
               w.created_at, w.unique_key, w.metadata, w.error,
               {schema}.attempt_push(w.history, w.attempt, w.outcome, w.next_state,
                                     w.started_at, w.instance_id, w.error)
          FROM won w
         WHERE w.next_state IN ('retryable', 'snoozed', 'available')
    ),
    dead AS (
        INSERT INTO {schema}.dlq_entries
            (job_id, queue, priority, kind, args, attempt, max_attempts, run_lease,
             created_at, last_error, metadata, unique_key, attempts)
        SELECT w.job_id, w.queue, w.priority, w.kind, w.args, w.attempt, w.max_attempts,
               w.run_lease, w.created_at, w.error, w.metadata, w.unique_key,
               {schema}.attempt_push(w.history, w.attempt, w.outcome, w.next_state,
                                     w.started_at, w.instance_id, w.error)
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
    -- A key row is released, unless its key spec keeps holding it in the
    -- job's final state until the period ends (unique_held; only rows
    -- with a hold_until ask): then it is marked finished instead.
    unique_released AS (
        DELETE FROM awa.job_uniques u
         WHERE u.unique_key = ANY (ARRAY(
                   SELECT w.unique_key FROM won w
                    WHERE w.unique_key IS NOT NULL
                      AND w.next_state IN ('completed', 'cancelled', 'failed', 'dead_lettered')))
           AND u.job_id = ANY (ARRAY(SELECT w.job_id FROM won w))
           AND (u.hold_until IS NULL
                OR NOT {schema}.unique_held(u.hold_until, u.hold_states,
                       (SELECT w.next_state FROM won w WHERE w.job_id = u.job_id LIMIT 1)))
    ),
    unique_kept AS (
        UPDATE awa.job_uniques u SET finished_at = now()
         WHERE u.unique_key = ANY (ARRAY(
                   SELECT w.unique_key FROM won w
                    WHERE w.unique_key IS NOT NULL
                      AND w.next_state IN ('completed', 'cancelled', 'failed', 'dead_lettered')))
           AND u.job_id = ANY (ARRAY(SELECT w.job_id FROM won w))
           AND u.hold_until IS NOT NULL
           AND {schema}.unique_held(u.hold_until, u.hold_states,
               (SELECT w.next_state FROM won w WHERE w.job_id = u.job_id LIMIT 1))
    ),
    state_dropped AS (
        DELETE FROM {schema}.attempt_state s
         WHERE s.job_id = ANY (ARRAY(
                   SELECT w.job_id FROM won w
                    WHERE w.next_state IN ('completed', 'cancelled', 'failed', 'dead_lettered')))
    )
    SELECT r.job_id, r.run_lease, w.job_id IS NOT NULL, w.next_state,
           -- Live in its batch, but another finisher took this link number.
           (w.job_id IS NULL AND EXISTS (SELECT 1 FROM coded c WHERE c.ord = r.ord))
      FROM unnest(p_job_ids, p_run_leases) WITH ORDINALITY AS r(job_id, run_lease, ord)
      LEFT JOIN won w ON w.ord = r.ord
     ORDER BY r.ord;
END
$fn$;

-- finish: the guarded finish of any attempts. Two paths to the same
-- evidence, guarded by the same closure links:
--
-- * The lean path, for what a worker sends at low rates: every attempt
--   completes ('complete') and every token names the same claim slot.
--   Per batch touched, one read of the batch row and one of its links, and
--   one insert of the next link listing the items this call closes (ON
--   CONFLICT DO NOTHING: the same guard as finish_pass); then, for what it
--   closed, one done_batches row per (queue slot, queue), one count delta
--   each, and the deletes of attempt state and unique keys. Every statement
--   names the claim slot as a plain parameter, so a generic plan prunes the
--   claim ring's partitions when the executor starts instead of starting
--   a scan of each; and none of them touches a table the outcome does not
--   need (ready entries, deferred jobs, dead letters, parked attempts):
--   those are finish_pass's. It reads every batch before writing: if any
--   token does not name an open item (closed or parked, a stale lease, a
--   batch gone with its slot, a pair named twice), the whole call goes to
--   finish_pass instead, so one call still writes one count delta per
--   slot, queue and state.
-- * finish_pass for everything else, as many attempts and outcomes as the
--   call has.
--
-- Then finish_pass again for what lost a link race, each time in a new
-- statement (a new snapshot). Every round that finds contention means
-- another finisher committed a link of the same batch, so the rounds are
-- bounded by the finishers racing for it; after 8 the call gives up with a
-- serialization failure (40001), which the completer retries.
CREATE OR REPLACE FUNCTION {schema}.finish(
    p_job_ids     bigint[],
    p_run_leases  bigint[],
    p_claim_slots integer[],
    p_batch_ids   bigint[],
    p_items       integer[],
    p_outcomes    text[],
    p_delays      interval[],
    p_errors      text[]
) RETURNS TABLE (job_id bigint, run_lease bigint, accepted boolean, next_state text)
LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan AS $fn$
#variable_conflict use_column
DECLARE
    v_n         integer := coalesce(cardinality(p_job_ids), 0);
    v_accepted  boolean[];
    v_next      text[];
    v_contended boolean[];
    v_acc       boolean[];
    v_nx        text[];
    v_todo      integer[];   -- indexes into the inputs still to decide
    v_again     integer[];
    v_round     integer := 1;
    k integer;
    m integer;
    -- the lean path
    v_slot      integer;
    v_lean      boolean;
    v_won       integer[] := '{}';  -- inputs the lean path finished
    w_keyed     bigint[] := '{}';   -- and their jobs that hold a key
BEGIN
    IF v_n = 0 THEN
        RETURN;
    END IF;
    v_slot := p_claim_slots[1];
    v_accepted := array_fill(false, ARRAY[v_n]);
    v_next := array_fill(NULL::text, ARRAY[v_n]);
    v_todo := '{}';
    v_lean := coalesce('complete' = ALL (p_outcomes) AND v_slot = ALL (p_claim_slots), false);
    IF v_lean THEN
        -- One statement: every token against its batch row and the batch's
        -- links; if each names an open item, once (the verdict), the next
        -- link of each batch listing the items it closes (the guard, ON
        -- CONFLICT DO NOTHING as in finish_pass), and for the batches whose
        -- link this call inserted, one done_batches row and one count delta
        -- per (queue slot, queue) and the deletes of attempt state. Any
        -- token that is not open (closed or parked, a stale lease, a batch
        -- gone with its slot, a pair named twice) makes the verdict false:
        -- nothing is written and finish_pass decides the whole call, so one
        -- call still writes one count delta per slot, queue and state.
        -- Set-based: a loop over the items in PL/pgSQL cost about 15 us an
        -- item, most of a drain's finish time.
        WITH inp AS MATERIALIZED (
            SELECT i.job_id, i.run_lease, i.batch_id, i.item, i.ord
              FROM unnest(p_job_ids, p_run_leases, p_batch_ids, p_items)
                   WITH ORDINALITY AS i(job_id, run_lease, batch_id, item, ord)
        ),
        bat AS MATERIALIZED (
            -- LATERAL: index probes per batch, whatever the planner
            -- thinks of the batch count. The arrays are read whole once
            -- (claim_batch_whole), materialized here; no sort runs above
            -- the join with it.
            SELECT k.batch_id, b.queue, b.job_ids, b.run_leases, b.attempts, b.ready_slots,
                   b.ready_seqs, b.priorities, b.shards, b.keyed, cardinality(b.job_ids) AS size,
                   ch.last_link, ch.closed
              FROM (SELECT DISTINCT i.batch_id FROM inp i) k
              LEFT JOIN LATERAL {schema}.claim_batch_whole(v_slot, k.batch_id) b ON true
             CROSS JOIN LATERAL (
                    SELECT coalesce(max(c.link), 0) AS last_link,
                           coalesce(array_agg(x) FILTER (WHERE x IS NOT NULL), '{}') AS closed
                      FROM {schema}.claim_closures c
                      LEFT JOIN LATERAL unnest(c.items) AS x ON true
                     WHERE c.slot = v_slot AND c.batch_id = k.batch_id) ch
        ),
        chk AS MATERIALIZED (
            SELECT i.job_id, i.run_lease, i.batch_id, i.item, i.ord, b.queue,
                   b.attempts[i.item] AS attempt, b.ready_slots[i.item] AS rslot,
                   b.ready_seqs[i.item] AS rseq, b.priorities[i.item] AS prio,
                   b.shards[i.item] AS shard, coalesce(i.item = ANY (b.keyed), false) AS keyed,
                   -- Open: the item still names this attempt and no
                   -- link lists it.
                   coalesce(b.job_ids[i.item] = i.job_id AND b.run_leases[i.item] = i.run_lease
                            AND NOT (i.item = ANY (b.closed)), false) AS open,
                   b.last_link, b.size - cardinality(b.closed) AS open_before
              FROM inp i
              LEFT JOIN bat b ON b.batch_id = i.batch_id
        ),
        verdict AS MATERIALIZED (
            -- Every token open, and no item named twice (a hashed
            -- distinct: no sort).
            SELECT bool_and(c.open)
                   AND count(*) = (SELECT count(*) FROM (SELECT DISTINCT i.batch_id, i.item FROM inp i) x) AS lean
              FROM chk c
        ),
        links AS (
            INSERT INTO {schema}.claim_closures AS c (slot, batch_id, link, items, outcome, open_after)
            SELECT v_slot, k.batch_id, min(k.last_link) + 1, array_agg(k.item),
                   'completed', min(k.open_before) - count(*)
              FROM chk k
             WHERE (SELECT v.lean FROM verdict v)
             GROUP BY k.batch_id
            ON CONFLICT DO NOTHING
            RETURNING c.batch_id
        ),
        -- What follows reads the items of the batches whose link this
        -- call inserted (all of them unless another finisher won a race)
        -- straight from chk: no join, no copy.
        done AS (
            -- One row per (queue slot, queue), as finish_pass writes it.
            -- The six arrays are parallel because one aggregate pass
            -- feeds every array_agg the same rows in the same order;
            -- which order does not matter (readers unnest them together
            -- and find a job through lo_job_id/hi_job_id), so nothing is
            -- sorted.
            INSERT INTO {schema}.done_batches AS d
                (slot, queue, lo_job_id, hi_job_id, job_ids, run_leases, attempts, ready_seqs,
                 priorities, shards)
            SELECT w.rslot, w.queue, min(w.job_id), max(w.job_id),
                   array_agg(w.job_id), array_agg(w.run_lease), array_agg(w.attempt),
                   array_agg(w.rseq), array_agg(w.prio), array_agg(w.shard)
              FROM chk w
             WHERE w.batch_id = ANY (ARRAY(SELECT l.batch_id FROM links l))
             GROUP BY w.rslot, w.queue
            RETURNING d.slot, d.queue, cardinality(d.job_ids) AS n
        ),
        counted AS (
            INSERT INTO {schema}.count_deltas (slot, queue, state, delta)
            SELECT d.slot, d.queue, 'completed', d.n FROM done d
            RETURNING 1
        ),
        cleared AS (
            -- Progress and checkpoints end with the job.
            DELETE FROM {schema}.attempt_state s
             WHERE s.job_id IN (SELECT w.job_id FROM chk w
                                 WHERE w.batch_id = ANY (ARRAY(SELECT l.batch_id FROM links l)))
            RETURNING 1
        )
        -- v_won: NULL when every batch's link was inserted (every input
        -- finished), else the inputs that were; w_keyed: their jobs that
        -- hold a unique key, read only when a batch has any.
        SELECT coalesce((SELECT v.lean FROM verdict v), false),
               CASE WHEN (SELECT count(*) FROM links) = (SELECT count(*) FROM bat) THEN NULL
                    ELSE ARRAY(SELECT w.ord::integer FROM chk w
                                WHERE w.batch_id = ANY (ARRAY(SELECT l.batch_id FROM links l)))
               END,
               CASE WHEN NOT EXISTS (SELECT 1 FROM bat b WHERE cardinality(b.keyed) > 0) THEN '{}'::bigint[]
                    ELSE ARRAY(SELECT w.job_id FROM chk w
                                WHERE w.keyed AND w.batch_id = ANY (ARRAY(SELECT l.batch_id FROM links l)))
               END
          INTO v_lean, v_won, w_keyed;
    END IF;

    IF NOT v_lean THEN
        -- finish_pass decides everything.
        v_todo := ARRAY(SELECT x.i FROM generate_series(1, v_n) AS x(i));
    ELSE
        IF v_won IS NULL THEN
            -- Every input finished (the drain's case): answer without
            -- filling the per-input arrays.
            IF cardinality(w_keyed) = 0 THEN
                RETURN QUERY SELECT u.j, u.r, true, 'completed'::text
                               FROM unnest(p_job_ids, p_run_leases) AS u(j, r);
                RETURN;
            END IF;
            v_won := ARRAY(SELECT x.i FROM generate_series(1, v_n) AS x(i));
        END IF;
        FOREACH m IN ARRAY v_won LOOP
            v_accepted[m] := true;
            v_next[m] := 'completed';
        END LOOP;
        IF cardinality(v_won) < v_n THEN
            -- Another finisher took a batch's link number: finish_pass
            -- decides that batch's items again, in a new statement.
            v_todo := ARRAY(SELECT x.i FROM generate_series(1, v_n) AS x(i)
                             WHERE NOT (x.i = ANY (v_won)));
        END IF;
        IF cardinality(w_keyed) > 0 THEN
            -- A job holds at most one key, recorded under its id
            -- (job_uniques_job_idx). As in finish_pass: the key is
            -- released, unless its key spec holds it in the completed
            -- state until its period ends; then it is marked finished.
            DELETE FROM awa.job_uniques u
             WHERE u.job_id = ANY (w_keyed)
               AND (u.hold_until IS NULL
                    OR NOT {schema}.unique_held(u.hold_until, u.hold_states, 'completed'));
            UPDATE awa.job_uniques u SET finished_at = now()
             WHERE u.job_id = ANY (w_keyed)
               AND u.hold_until IS NOT NULL
               AND {schema}.unique_held(u.hold_until, u.hold_states, 'completed');
        END IF;
    END IF;

    -- finish_pass for what is left: everything (general path), or what lost
    -- a link race; again while contention remains.
    WHILE cardinality(v_todo) > 0 LOOP
        IF v_round > 8 THEN
            RAISE EXCEPTION 'finish lost the race for a claim batch link % times in a row', v_round - 1
                USING ERRCODE = 'serialization_failure',
                      HINT = 'Other finishers keep closing items of the same batches; retry the call.';
        END IF;
        v_round := v_round + 1;
        SELECT array_agg(f.accepted ORDER BY f.ord), array_agg(f.next_state ORDER BY f.ord),
               array_agg(f.contended ORDER BY f.ord)
          INTO v_acc, v_nx, v_contended
          FROM {schema}.finish_pass(
                   ARRAY(SELECT p_job_ids[x.i] FROM unnest(v_todo) WITH ORDINALITY AS x(i, o) ORDER BY x.o),
                   ARRAY(SELECT p_run_leases[x.i] FROM unnest(v_todo) WITH ORDINALITY AS x(i, o) ORDER BY x.o),
                   ARRAY(SELECT p_claim_slots[x.i] FROM unnest(v_todo) WITH ORDINALITY AS x(i, o) ORDER BY x.o),
                   ARRAY(SELECT p_batch_ids[x.i] FROM unnest(v_todo) WITH ORDINALITY AS x(i, o) ORDER BY x.o),
                   ARRAY(SELECT p_items[x.i] FROM unnest(v_todo) WITH ORDINALITY AS x(i, o) ORDER BY x.o),
                   ARRAY(SELECT p_outcomes[x.i] FROM unnest(v_todo) WITH ORDINALITY AS x(i, o) ORDER BY x.o),
                   ARRAY(SELECT p_delays[x.i] FROM unnest(v_todo) WITH ORDINALITY AS x(i, o) ORDER BY x.o),
                   ARRAY(SELECT p_errors[x.i] FROM unnest(v_todo) WITH ORDINALITY AS x(i, o) ORDER BY x.o))
               WITH ORDINALITY AS f(job_id, run_lease, accepted, next_state, contended, ord);
        v_again := '{}';
        FOR k IN 1 .. cardinality(v_todo) LOOP
            v_accepted[v_todo[k]] := v_acc[k];
            v_next[v_todo[k]] := v_nx[k];
            IF v_contended[k] THEN
                v_again := v_again || v_todo[k];
            END IF;
        END LOOP;
        v_todo := v_again;
    END LOOP;

    RETURN QUERY
    SELECT p_job_ids[x.i], p_run_leases[x.i], v_accepted[x.i], v_next[x.i]
      FROM generate_series(1, v_n) AS x(i);
END
$fn$;
