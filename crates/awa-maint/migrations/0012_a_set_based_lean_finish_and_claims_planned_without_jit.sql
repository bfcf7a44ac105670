-- Awa migration 12: a set based lean finish and claims planned without jit
--
-- Drafted by `cargo xtask migration draft` (hand-written parts first, then
-- what the sources define), then reviewed. Frozen once on main: never edit
-- it, add a new step. Runs once, in one transaction, as the migrator.

-- Runtime function templates, as the sources define them.
INSERT INTO awa.substrate_functions (name, ord, body) VALUES ('finish', 18, $awa_template$-- {schema}.finish(job_ids, run_leases, claim_slots, batch_ids, items,
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
         CROSS JOIN LATERAL (
                SELECT b.* FROM {schema}.claim_batches b
                 WHERE b.slot = k.claim_slot AND b.batch_id = k.batch_id) b
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
        WITH inp AS (
            SELECT i.job_id, i.run_lease, i.batch_id, i.item, i.ord
              FROM unnest(p_job_ids, p_run_leases, p_batch_ids, p_items)
                   WITH ORDINALITY AS i(job_id, run_lease, batch_id, item, ord)
        ),
        bat AS MATERIALIZED (
            -- LATERAL: index probes per batch, whatever the planner
            -- thinks of the batch count.
            SELECT k.batch_id, b.queue, b.job_ids, b.run_leases, b.attempts, b.ready_slots,
                   b.ready_seqs, b.priorities, b.shards, b.keyed, ch.last_link, ch.closed
              FROM (SELECT DISTINCT i.batch_id FROM inp i) k
              LEFT JOIN LATERAL (
                    SELECT bb.* FROM {schema}.claim_batches bb
                     WHERE bb.slot = v_slot AND bb.batch_id = k.batch_id) b ON true
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
                   -- Open: the item still names this attempt, no link
                   -- lists it, and this call names it once.
                   coalesce(b.job_ids[i.item] = i.job_id AND b.run_leases[i.item] = i.run_lease
                            AND NOT (i.item = ANY (b.closed)), false)
                     AND count(*) OVER (PARTITION BY i.batch_id, i.item) = 1 AS open,
                   b.last_link, cardinality(b.job_ids) - cardinality(b.closed) AS open_before
              FROM inp i
              LEFT JOIN bat b ON b.batch_id = i.batch_id
        ),
        verdict AS MATERIALIZED (
            SELECT bool_and(c.open) AS lean FROM chk c
        ),
        links AS (
            INSERT INTO {schema}.claim_closures AS c (slot, batch_id, link, items, outcome, open_after)
            SELECT v_slot, k.batch_id, min(k.last_link) + 1, array_agg(k.item ORDER BY k.item),
                   'completed', min(k.open_before) - count(*)
              FROM chk k
             WHERE (SELECT v.lean FROM verdict v)
             GROUP BY k.batch_id
            ON CONFLICT DO NOTHING
            RETURNING c.batch_id
        ),
        won AS MATERIALIZED (
            SELECT k.* FROM chk k JOIN links l ON l.batch_id = k.batch_id
        ),
        done AS (
            -- One row per (queue slot, queue), as finish_pass writes it.
            INSERT INTO {schema}.done_batches
                (slot, queue, lo_job_id, hi_job_id, job_ids, run_leases, attempts, ready_seqs,
                 priorities, shards)
            SELECT w.rslot, w.queue, min(w.job_id), max(w.job_id),
                   array_agg(w.job_id ORDER BY w.job_id), array_agg(w.run_lease ORDER BY w.job_id),
                   array_agg(w.attempt ORDER BY w.job_id), array_agg(w.rseq ORDER BY w.job_id),
                   array_agg(w.prio ORDER BY w.job_id), array_agg(w.shard ORDER BY w.job_id)
              FROM won w
             GROUP BY w.rslot, w.queue
            RETURNING 1
        ),
        counted AS (
            INSERT INTO {schema}.count_deltas (slot, queue, state, delta)
            SELECT w.rslot, w.queue, 'completed', count(*)
              FROM won w
             GROUP BY w.rslot, w.queue
            RETURNING 1
        ),
        cleared AS (
            -- Progress and checkpoints end with the job.
            DELETE FROM {schema}.attempt_state s
             WHERE s.job_id IN (SELECT w.job_id FROM won w)
            RETURNING 1
        )
        SELECT coalesce((SELECT v.lean FROM verdict v), false),
               coalesce(array_agg(w.ord::integer), '{}'),
               coalesce(array_agg(w.job_id) FILTER (WHERE w.keyed), '{}')
          INTO v_lean, v_won, w_keyed
          FROM won w;
    END IF;

    IF NOT v_lean THEN
        -- finish_pass decides everything.
        v_todo := ARRAY(SELECT x.i FROM generate_series(1, v_n) AS x(i));
    ELSE
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
$awa_template$)
ON CONFLICT (name) DO UPDATE SET ord = EXCLUDED.ord, body = EXCLUDED.body;
INSERT INTO awa.substrate_functions (name, ord, body) VALUES ('ready_take', 1, $awa_template$-- {schema}.ready_take(queue, limit, cand_seq, cand_xid, aging): take up to
-- `limit` runnable jobs of a queue, and at most 8 MiB of args + metadata
-- (stored size; at least one job), in order, advancing the lane heads past
-- them. Called only from the execution plane's claim, in the same call
-- (transaction) that writes the claim batch.
--
-- Order: priority 1 first, 4 last (docs/adr/0012), after aging, then lane
-- position. Aging moves a waiting job one step towards 1 per aging
-- interval (the effective priority may go below 1). Within one lane the
-- effective priority is made non-decreasing (a running maximum: a newer
-- job never ranks ahead of an older one of its lane), so what is taken
-- from a lane is always a prefix of it and the head can move past exactly
-- what was taken.
--
-- Concurrent claimers skip each other: lanes are locked FOR UPDATE SKIP
-- LOCKED, so a lane being claimed by someone else is simply not offered;
-- the returned frontier is then 0 ("Busy lanes" below), so the caller
-- looks again soon.
--
-- Tombstoned entries (cancelled jobs, and the old copies relocation leaves
-- behind, one per move) are skipped by the scan itself, so they never use
-- up the limit: a call that takes fewer jobs than it was asked for, and
-- returns a non-zero frontier, has taken every runnable job up to the
-- frontier, and a worker relies on that to go idle until the next
-- notification. (Counting them once let a
-- backlog whose jobs had each been relocated a few times drain a quarter
-- of a claim per poll interval.) A lane found exhausted up to the
-- frontier has its head moved to the frontier, past any tombstoned tail:
-- nothing at or below the frontier can still appear in it (the lane is
-- locked, so no relocation or cancel of it runs meanwhile, and every
-- producer at or below the frontier has committed).
--
-- The frontier. A lane position is safe to pass only once no transaction
-- can still commit a row at or below it, otherwise a later producer's job
-- would overtake (and the head would strand) an earlier, still
-- uncommitted one. We read M = ready_seq.last_value, then take our own
-- transaction id X. Every position <= M was drawn by a producer whose xid
-- was assigned before (ready_append's rule), hence is older than X. So once
-- no transaction older than X is running (the xmin of a later snapshot is
-- at least X), everything <= M is final and visible to a later statement.
-- (A snapshot's xip alone is not enough: it omits running xids newer than
-- the newest completed one.) The caller passes the candidate (M, X) of its
-- previous call, which has usually settled by now, and gets this call's
-- candidate back (next_seq, next_xid) in every row; when no job is taken,
-- one row with job_id NULL still carries it.
--
-- Which slots. A lane's entries past its head can sit in any slot of the
-- queue ring (a producer that read the ledger before a rotation writes
-- the slot it read; relocation copies old entries into the current slot),
-- and a generic plan over ready_entries starts a scan of every partition,
-- which is most of the price of a claim of one job. So each lane carries
-- low_gen: every entry of the lane past its head is in a slot of
-- generation >= low_gen. When the call locks one lane whose low_gen is at
-- least the current generation - 1, it scans only the current slot and the
-- one before (`slot IN (..)` on two plain parameters: the executor prunes
-- the others when it starts), in a statement that also checks the ledger
-- has not moved since (a newer slot could hold positions below ones it
-- takes; if it moved, nothing is taken and the caller looks again at
-- once). Everything else takes the general statement over every slot.
-- low_gen only moves up, to ready_sealed.generation + 1, and only after a
-- statement that sees every entry those generations will ever hold (the
-- seal's promise) found none of the lane's past its head there; a new lane
-- starts at 0.
--
-- When neither candidate has settled (a long transaction is open
-- somewhere), a slow path reads pg_locks once: settled if no transaction
-- older than X holds this queue's producer lock (ready_append takes it
-- before drawing a position). Transactions that ended before that read are
-- visible to the statement that reads the rows, which starts after it. So
-- an unrelated long transaction, or a long producer of another queue, does
-- not hold this queue back. (Producers in prepared two-phase transactions
-- hold their locks without a backend and are not recognised: do not
-- enqueue inside PREPARE TRANSACTION.)
--
-- Plans that cannot degrade. Every read of ready_entries here asks for a
-- lane's entries past its head IN LANE ORDER with a LIMIT (`ORDER BY
-- e.lane_seq LIMIT n`), existence checks included: they ask for the
-- lane's first entry past its head, in a lateral subquery or as a scalar,
-- never as an `EXISTS`/`NOT EXISTS` directly over ready_entries, whose
-- LIMIT and ORDER BY the planner drops when it makes the check a semi- or
-- anti-join. Tombstones are probed per entry read, through their primary
-- key, by a scalar subquery (`(SELECT true FROM ready_tombstones t WHERE
-- <the entry's key>) IS NULL`), which the planner never turns into a
-- join: as a `NOT EXISTS` it became, once autovacuum had analyzed a slot
-- holding cancelled jobs, a hash anti-join over every tombstone of the
-- slot under a sort of the whole lane (2,121 pages to claim one job of a
-- backlog of 100,000 with one job in ten cancelled). With the ORDER BY and
-- nothing to join, the only plan that does not read the whole rest of the
-- lane before returning is the lane index walked from the head. Where the
-- lane spans slots (a merge of each slot's index), the probe sits in the
-- query above an `OFFSET 0` fence, which PostgreSQL never pushes a
-- condition through: pushed into each slot's scan, it made the merge find
-- each slot's first live entry before returning anything, stepping over
-- every tombstoned old copy relocation had left in a slot. Above the
-- fence the merged lane is read in order, and the probe and the LIMIT stop
-- it after what it takes. And the function runs with `enable_sort = off`:
-- a lane read from more than one slot is in lane order only as a merge of
-- the slots' index scans, and a generic plan, which cannot know how many
-- entries lie between the head and the frontier (it guesses a few
-- hundred), preferred appending the slots and sorting the result: every
-- waiting entry of the lane, sorted, to take one. Without the sort there
-- is no other way to produce lane order than the merge. (The sorts left,
-- of what a call already took, have no alternative and run regardless;
-- PostgreSQL 15 still charges each of them the disabled-node penalty of
-- 10^10, which would make every such plan pass jit_above_cost and compile
-- for 600 ms on each call in a session with JIT on, so the function also
-- runs with `jit = off`, as every session Awa opens does.)
-- So the
-- planner keeps to it whatever the statistics say: a generic plan
-- estimates `lane_seq > $head` at a third of the lane, and without the
-- ORDER BY it chose a bitmap scan (or a parallel sequential scan) of that
-- third for a one-row check, which made a claim's cost grow with the
-- backlog once the ring had been analyzed (issue 33: 49 ms per claim at a
-- backlog of 400,000). tests/maint/plan_bounds.rs holds every statement to
-- a buffer bound proportional to what it returns, after ANALYZE, over a
-- backlog of 100,000.
--
-- Bounds (SQLSTATE 22023): limit within awa_core::bounds::CLAIM_BATCH (1
-- to 1024); aging NULL (off) or within PRIORITY_AGING_STORED (1 ms to 30
-- days): a zero interval would divide by zero.
CREATE OR REPLACE FUNCTION {schema}.ready_take(
    p_queue     text,
    p_limit     integer,
    p_cand_seq  bigint,
    p_cand_xid  xid8,
    p_aging     interval
) RETURNS TABLE (
    job_id bigint, slot integer, lane_seq bigint, kind text, args jsonb,
    priority smallint, attempt integer, max_attempts integer, run_lease bigint,
    created_at timestamptz, ready_at timestamptz, unique_key text, metadata jsonb,
    frontier bigint, next_seq bigint, next_xid xid8, shard smallint
) LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan SET enable_sort = off SET jit = off AS $fn$
#variable_conflict use_column
DECLARE
    v_seq      bigint;
    v_xid      xid8;
    v_frontier bigint;
    v_seen     bigint;    -- the frontier as returned (see "Busy lanes")
    v_lanes    bigint;    -- the queue's lanes, as counted before locking
    v_pass     integer;
    v_timeout  text;      -- the caller's lock_timeout
    v_prios    smallint[];
    v_shards   smallint[];
    v_heads    bigint[];
    v_lows     bigint[];
    v_gen      bigint;    -- the current queue-ring generation
    v_s1       integer;   -- its slot
    v_s2       integer;   -- the previous generation's slot (v_s1 when none)
    v_fast     boolean;   -- every lane of the queue scans v_s1 and v_s2 only
    v_taken    integer;
    v_sealed   bigint;
BEGIN
    IF p_limit IS NULL OR p_limit NOT BETWEEN 1 AND 1024 THEN
        RAISE EXCEPTION 'claim limit must be 1 to 1024 (got %)', coalesce(p_limit::text, 'NULL')
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'Claim at most a claim batch (awa_core::bounds::CLAIM_BATCH) per call.';
    END IF;
    IF p_aging NOT BETWEEN interval '1 millisecond' AND interval '30 days' THEN
        RAISE EXCEPTION 'priority aging must be 1ms to 30days, or NULL for none (got %)', p_aging
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'A waiting job gains one priority step per this interval (awa queue configure --priority-aging).';
    END IF;
    SELECT s.last_value,
           (SELECT l.generation FROM {schema}.ring_ledger l
             WHERE l.ring = 'queue' ORDER BY l.generation DESC LIMIT 1),
           (SELECT l.slot FROM {schema}.ring_ledger l
             WHERE l.ring = 'queue' ORDER BY l.generation DESC LIMIT 1),
           (SELECT l.slot FROM {schema}.ring_ledger l
             WHERE l.ring = 'queue' ORDER BY l.generation DESC OFFSET 1 LIMIT 1)
      INTO v_seq, v_gen, v_s1, v_s2
      FROM {schema}.ready_seq s;
    v_s2 := coalesce(v_s2, v_s1);
    -- (The lanes counted here, before any is locked, tell the lock below
    -- whether it skipped one: "Busy lanes".)
    SELECT coalesce(bool_and(h.low_gen >= v_gen - 1), false), count(*) INTO v_fast, v_lanes
      FROM {schema}.lane_heads h WHERE h.queue = p_queue;
    -- Nothing visible past any lane head: return at once, keeping the old
    -- candidate. No xid is assigned, so an idle poll commits nothing (no
    -- WAL flush). With every lane fast, only the newest two slots are
    -- looked at, and anything this statement cannot vouch for counts as
    -- work: a ledger that moved since, or a lane that is not fast (new
    -- since).
    IF v_fast THEN
        IF NOT EXISTS (
                SELECT 1
                  FROM {schema}.lane_heads h
                 CROSS JOIN LATERAL (
                        SELECT 1 FROM {schema}.ready_entries e
                         WHERE e.slot IN (v_s1, v_s2)
                           AND e.queue = h.queue AND e.priority = h.priority AND e.shard = h.shard
                           AND e.lane_seq > h.head_seq
                         ORDER BY e.lane_seq LIMIT 1) w
                 WHERE h.queue = p_queue)
           AND NOT EXISTS (SELECT 1 FROM {schema}.lane_heads h
                            WHERE h.queue = p_queue AND h.low_gen < v_gen - 1)
           AND v_gen = (SELECT l.generation FROM {schema}.ring_ledger l
                         WHERE l.ring = 'queue' ORDER BY l.generation DESC LIMIT 1) THEN
            RETURN QUERY SELECT NULL::bigint, NULL::integer, NULL::bigint, NULL::text, NULL::jsonb,
                                NULL::smallint, NULL::integer, NULL::integer, NULL::bigint,
                                NULL::timestamptz, NULL::timestamptz, NULL::text, NULL::jsonb,
                                NULL::bigint, p_cand_seq, p_cand_xid, NULL::smallint;
            RETURN;
        END IF;
    ELSIF NOT EXISTS (
            SELECT 1
              FROM {schema}.lane_heads h
             CROSS JOIN LATERAL (
                    SELECT 1 FROM {schema}.ready_entries e
                     WHERE e.queue = h.queue AND e.priority = h.priority AND e.shard = h.shard
                       AND e.lane_seq > h.head_seq
                     ORDER BY e.lane_seq LIMIT 1) w
             WHERE h.queue = p_queue) THEN
        RETURN QUERY SELECT NULL::bigint, NULL::integer, NULL::bigint, NULL::text, NULL::jsonb,
                            NULL::smallint, NULL::integer, NULL::integer, NULL::bigint,
                            NULL::timestamptz, NULL::timestamptz, NULL::text, NULL::jsonb,
                            NULL::bigint, p_cand_seq, p_cand_xid, NULL::smallint;
        RETURN;
    END IF;
    v_xid := pg_current_xact_id();

    IF pg_snapshot_xmin(pg_current_snapshot()) >= v_xid THEN
        v_frontier := v_seq;
    ELSIF p_cand_xid IS NOT NULL AND pg_snapshot_xmin(pg_current_snapshot()) >= p_cand_xid THEN
        v_frontier := least(p_cand_seq, v_seq);
    ELSIF NOT EXISTS (
            SELECT 1
              FROM pg_locks a
              JOIN pg_locks t ON t.pid = a.pid
             WHERE a.locktype = 'advisory' AND a.classid = 6387554
               AND a.objid = hashtext(p_queue)::oid AND a.objsubid = 2 AND a.granted
               AND a.database = (SELECT d.oid FROM pg_database d WHERE d.datname = current_database())
               AND a.pid <> pg_backend_pid()
               AND t.locktype = 'transactionid' AND t.mode = 'ExclusiveLock' AND t.granted
               AND age(t.transactionid) > age(v_xid::xid)) THEN
        v_frontier := v_seq;
    ELSE
        v_frontier := 0;
    END IF;

    -- Lock the lanes in a statement of their own, BEFORE the statement that
    -- reads entries and tombstones. A canceller (ready_tombstone) holds the
    -- lane lock while it writes a tombstone, so every tombstone of a locked
    -- lane committed before we got the lock, and the next statement's
    -- snapshot sees it. Reading the tombstones in the locking statement
    -- itself used a snapshot older than the lock and handed out jobs that
    -- had just been cancelled (claimed and cancelled at once, their unique
    -- key released while they ran).
    FOR v_pass IN 1..2 LOOP
        SELECT coalesce(array_agg(l.priority), '{}'), coalesce(array_agg(l.shard), '{}'),
               coalesce(array_agg(l.head_seq), '{}'), coalesce(array_agg(l.low_gen), '{}')
          INTO v_prios, v_shards, v_heads, v_lows
          FROM (SELECT h.priority, h.shard, h.head_seq, h.low_gen
                  FROM {schema}.lane_heads h
                 WHERE h.queue = p_queue
                 ORDER BY h.priority, h.shard
                   FOR UPDATE SKIP LOCKED) l;
        EXIT WHEN cardinality(v_prios) > 0 OR v_lanes = 0 OR v_pass = 2;
        -- Every lane busy: almost always another worker's claim of this
        -- queue, which holds them all for its few milliseconds. Queue up
        -- behind it for the first lane (briefly: a lane can also be held
        -- by a cancel inside someone's long transaction), then lock what
        -- is free again. Claims of one queue then follow each other
        -- through the lock queue instead of coming back empty and trying
        -- again; with eight workers on a backlog, most claims did.
        BEGIN
            v_timeout := current_setting('lock_timeout');
            PERFORM set_config('lock_timeout', '50ms', true);
            PERFORM 1 FROM {schema}.lane_heads h
              WHERE h.queue = p_queue
              ORDER BY h.priority, h.shard LIMIT 1
                FOR UPDATE;
            PERFORM set_config('lock_timeout', v_timeout, true);
        EXCEPTION WHEN lock_not_available THEN
            -- Still held: reported busy below. (The subtransaction's
            -- rollback restored lock_timeout.)
            EXIT;
        END;
    END LOOP;
    -- Busy lanes: a lane another transaction holds (a concurrent claim,
    -- usually another worker's; a cancel or relocation of it) was skipped,
    -- so what this call takes says nothing about that lane: work may wait
    -- there the moment the holder commits. The frontier is then returned
    -- as 0, as when the ledger moved, so the caller looks again shortly
    -- instead of idling until a notification that a standing backlog never
    -- sends (with several workers on one queue, the loser of every
    -- overlapping claim idled a poll interval). v_frontier itself still
    -- bounds what is read and where heads move. (Lanes are never deleted;
    -- one made between the count and the lock can hide a busy lane from
    -- this comparison once, and the producer that made it notifies.)
    v_seen := CASE WHEN cardinality(v_prios) < v_lanes THEN 0 ELSE v_frontier END;

    IF cardinality(v_prios) = 1 AND v_lows[1] >= v_gen - 1 THEN
        -- One lane, all of it in the newest two slots. Its head read
        -- above is current (the lane is ours until commit). One lane has
        -- one priority, so aging changes nothing: lane order is the order.
        RETURN QUERY
        WITH fresh AS MATERIALIZED (
            -- The ledger as this statement sees it: no newer slot than v_s1.
            SELECT l.generation = v_gen AS ok
              FROM {schema}.ring_ledger l
             WHERE l.ring = 'queue' ORDER BY l.generation DESC LIMIT 1
        ),
        cand AS MATERIALIZED (
            -- Live entries only (see "Tombstoned entries" above), probed
            -- one by one as the lane is read in order (see "Plans that
            -- cannot degrade": the probe sits above the OFFSET 0 fence).
            SELECT x.*
              FROM (SELECT e.slot, e.lane_seq, e.job_id, e.kind, e.args, e.priority, e.shard,
                           e.attempt, e.max_attempts, e.run_lease, e.created_at, e.ready_at,
                           e.unique_key, e.metadata
                      FROM {schema}.ready_entries e
                     WHERE e.slot IN (v_s1, v_s2)
                       AND e.queue = p_queue AND e.priority = v_prios[1] AND e.shard = v_shards[1]
                       AND e.lane_seq > v_heads[1] AND e.lane_seq <= v_frontier
                       AND (SELECT f.ok FROM fresh f)
                     ORDER BY e.lane_seq
                    OFFSET 0) x
             WHERE (SELECT true FROM {schema}.ready_tombstones t
                     WHERE t.slot IN (v_s1, v_s2)
                       AND t.slot = x.slot AND t.job_id = x.job_id AND t.lane_seq = x.lane_seq) IS NULL
             LIMIT p_limit
        ),
        ranked AS (
            SELECT c.*, row_number() OVER w AS rn,
                   sum(pg_column_size(c.args) + coalesce(pg_column_size(c.metadata), 0)) OVER w AS bytes
              FROM cand c
            WINDOW w AS (ORDER BY c.lane_seq ROWS UNBOUNDED PRECEDING)
        ),
        -- Bounded by count (the LIMIT) and bytes, as the general statement:
        -- what is taken is a prefix of the lane. The head moves past
        -- exactly it when something was left, to the frontier when the
        -- lane is exhausted (fewer live entries than the limit), and past
        -- the last entry read otherwise. Not when the ledger moved: then
        -- nothing was read.
        chosen AS (
            SELECT r.*, r.rn = 1 OR r.bytes <= 8388608 AS take FROM ranked r
        ),
        moved AS (
            UPDATE {schema}.lane_heads h
               SET head_seq = n.head
              FROM (SELECT CASE
                             WHEN EXISTS (SELECT 1 FROM chosen x WHERE NOT x.take)
                                 THEN (SELECT max(x.lane_seq) FROM chosen x WHERE x.take)
                             WHEN (SELECT count(*) FROM cand c) < p_limit THEN v_frontier
                             ELSE (SELECT max(c.lane_seq) FROM cand c)
                           END AS head) n
             WHERE h.queue = p_queue AND h.priority = v_prios[1] AND h.shard = v_shards[1]
               AND n.head > h.head_seq
               AND (SELECT f.ok FROM fresh f)
            RETURNING 1
        )
        SELECT r.job_id, r.slot, r.lane_seq, r.kind, r.args, r.priority, r.attempt,
               r.max_attempts, r.run_lease, r.created_at, r.ready_at, r.unique_key, r.metadata,
               v_seen, v_seq, v_xid, r.shard
          FROM chosen r
         WHERE r.take
         ORDER BY r.rn;
        GET DIAGNOSTICS v_taken = ROW_COUNT;
        IF v_taken = 0 AND v_gen <> (SELECT l.generation FROM {schema}.ring_ledger l
                                      WHERE l.ring = 'queue' ORDER BY l.generation DESC LIMIT 1) THEN
            -- The ledger moved: nothing was taken; look again at once.
            v_seen := 0;
        END IF;
    ELSE
    RETURN QUERY
    WITH frontier AS (
        SELECT v_frontier AS seq
    ),
    lanes AS MATERIALIZED (
        -- Ours until commit: head_seq read here is current.
        SELECT h.priority, h.shard, h.head_seq
          FROM {schema}.lane_heads h
          JOIN unnest(v_prios, v_shards) AS k(priority, shard)
            ON k.priority = h.priority AND k.shard = h.shard
         WHERE h.queue = p_queue
    ),
    cand AS MATERIALIZED (
        -- Live entries only, up to the limit per lane. A job moved by
        -- ready_relocate has two entries with one lane_seq, the tombstoned
        -- old copy and the live new one; only the live one is read.
        SELECT r.*
          FROM lanes l
         CROSS JOIN frontier f
         CROSS JOIN LATERAL (
                SELECT x.*
                  FROM (SELECT e.slot, e.lane_seq, e.job_id, e.kind, e.args, e.priority, e.shard,
                               e.attempt, e.max_attempts, e.run_lease, e.created_at, e.ready_at,
                               e.unique_key, e.metadata
                          FROM {schema}.ready_entries e
                         WHERE e.queue = p_queue AND e.priority = l.priority AND e.shard = l.shard
                           AND e.lane_seq > l.head_seq AND e.lane_seq <= f.seq
                         ORDER BY e.lane_seq
                        OFFSET 0) x
                 WHERE (SELECT true FROM {schema}.ready_tombstones t
                         WHERE t.slot = x.slot AND t.job_id = x.job_id AND t.lane_seq = x.lane_seq) IS NULL
                 LIMIT p_limit) r
    ),
    aged AS (
        SELECT c.*,
               max(c.priority - CASE WHEN p_aging IS NULL OR p_aging <= interval '0' THEN 0
                                     ELSE floor(extract(epoch FROM now() - c.ready_at)
                                                / extract(epoch FROM p_aging)) END)
                   OVER (PARTITION BY c.priority, c.shard ORDER BY c.lane_seq) AS effective
          FROM cand c
    ),
    ranked AS (
        SELECT a.*, row_number() OVER w AS rn,
               -- Bytes handed out so far, this job included (as stored).
               sum(pg_column_size(a.args) + coalesce(pg_column_size(a.metadata), 0)) OVER w AS bytes
          FROM aged a
        WINDOW w AS (ORDER BY a.effective, a.lane_seq ROWS UNBOUNDED PRECEDING)
    ),
    -- A batch is bounded by count and by bytes (8 MiB; the first job is
    -- always taken, whatever its size). Both bounds cut ranked order, so
    -- what is taken is still a prefix of it and, per lane, a prefix of the
    -- lane: the heads below move past exactly what is taken.
    chosen AS (
        SELECT r.*, r.rn <= p_limit AND (r.rn = 1 OR r.bytes <= 8388608) AS take
          FROM ranked r
    ),
    first_left AS (
        SELECT r.priority, r.shard, min(r.lane_seq) AS seq
          FROM chosen r WHERE NOT r.take
         GROUP BY r.priority, r.shard
    ),
    -- Per locked lane: past what was taken when something was left; to
    -- the frontier when the lane is exhausted (fewer live entries than the
    -- limit, none at all included); else past the last entry read.
    per_lane AS (
        SELECT l.priority, l.shard, count(c.lane_seq) AS n, max(c.lane_seq) AS last_seq,
               max(c.lane_seq) FILTER (WHERE fl.seq IS NOT NULL AND c.lane_seq < fl.seq) AS before_left,
               bool_or(fl.seq IS NOT NULL) AS cut
          FROM lanes l
          LEFT JOIN cand c ON c.priority = l.priority AND c.shard = l.shard
          LEFT JOIN first_left fl ON fl.priority = l.priority AND fl.shard = l.shard
         GROUP BY l.priority, l.shard
    ),
    new_heads AS (
        SELECT p.priority, p.shard,
               CASE WHEN p.cut THEN p.before_left
                    WHEN p.n < p_limit THEN v_frontier
                    ELSE p.last_seq END AS head
          FROM per_lane p
    ),
    moved AS (
        UPDATE {schema}.lane_heads h
           SET head_seq = n.head
          FROM new_heads n
         WHERE h.queue = p_queue AND h.priority = n.priority AND h.shard = n.shard
           AND n.head > h.head_seq
        RETURNING 1
    ),
    taken AS (
        SELECT r.job_id, r.slot, r.lane_seq, r.kind, r.args, r.priority, r.attempt,
               r.max_attempts, r.run_lease, r.created_at, r.ready_at, r.unique_key,
               r.metadata, r.rn, r.shard
          FROM chosen r WHERE r.take
    )
    SELECT t.job_id, t.slot, t.lane_seq, t.kind, t.args, t.priority, t.attempt,
           t.max_attempts, t.run_lease, t.created_at, t.ready_at, t.unique_key, t.metadata,
           v_seen, v_seq, v_xid, t.shard
      FROM taken t
     ORDER BY t.rn;
    -- (moved, a data-modifying CTE, runs to completion although unread.)
    GET DIAGNOSTICS v_taken = ROW_COUNT;
    END IF;

    -- Move low_gen up where ready_sealed allows, so the next claims of
    -- these lanes scan the newest two slots only. Worth it once per lane
    -- and rotation; cheap when nothing changed (no statement runs).
    IF v_gen > ANY (v_lows) THEN
        SELECT z.generation INTO v_sealed FROM {schema}.ready_sealed z;
        IF cardinality(v_prios) = 1 AND v_lows[1] = v_gen - 1 AND v_sealed = v_gen - 1 THEN
            -- The usual case after a rotation: the lane's entries past its
            -- head were all in the newest two slots; the older of them is
            -- sealed now. One slot to look at.
            UPDATE {schema}.lane_heads h
               SET low_gen = v_gen
             WHERE h.queue = p_queue AND h.priority = v_prios[1] AND h.shard = v_shards[1]
               AND h.low_gen = v_gen - 1
               AND (SELECT e.lane_seq FROM {schema}.ready_entries e
                     WHERE e.slot = v_s2
                       AND e.queue = h.queue AND e.priority = h.priority AND e.shard = h.shard
                       AND e.lane_seq > h.head_seq
                     ORDER BY e.lane_seq LIMIT 1) IS NULL;
        ELSIF v_taken < p_limit AND v_sealed >= (SELECT min(x) FROM unnest(v_lows) AS x) THEN
            -- A lane further behind (new, or after a backlog): look at
            -- every slot of the generations from its low_gen to the seal.
            -- The seal promises nothing more will be written there, and
            -- this statement sees everything that was (it runs after the
            -- seal was read). Tombstoned entries count as present.
            UPDATE {schema}.lane_heads h
               SET low_gen = v_sealed + 1
              FROM unnest(v_prios, v_shards) AS k(priority, shard)
             WHERE h.queue = p_queue AND h.priority = k.priority AND h.shard = k.shard
               AND h.low_gen <= v_sealed
               AND (SELECT e.lane_seq FROM {schema}.ready_entries e
                     WHERE e.queue = h.queue AND e.priority = h.priority AND e.shard = h.shard
                       AND e.lane_seq > h.head_seq
                       AND e.slot = ANY (ARRAY(
                             SELECT l.slot FROM {schema}.ring_ledger l
                              WHERE l.ring = 'queue'
                                AND l.generation BETWEEN h.low_gen AND v_sealed))
                     ORDER BY e.lane_seq LIMIT 1) IS NULL;
        END IF;
    END IF;

    IF v_taken = 0 THEN
        RETURN QUERY SELECT NULL::bigint, NULL::integer, NULL::bigint, NULL::text, NULL::jsonb,
                            NULL::smallint, NULL::integer, NULL::integer, NULL::bigint,
                            NULL::timestamptz, NULL::timestamptz, NULL::text, NULL::jsonb,
                            v_seen, v_seq, v_xid, NULL::smallint;
    END IF;
END
$fn$;
$awa_template$)
ON CONFLICT (name) DO UPDATE SET ord = EXCLUDED.ord, body = EXCLUDED.body;

-- Refresh every substrate after the step's changes (appended to each step by
-- `cargo xtask migration draft`): re-run the installer on each substrate
-- with its own shape, which creates the tables a changed installer added,
-- re-instantiates every runtime function template and revokes PUBLIC's
-- EXECUTE again; then give every role that was granted the runtime matrix
-- on a substrate (it holds USAGE there) the matrix as it is now, so new
-- tables and functions are covered without an operator step.
-- The installers' "already exists, skipping" notices are noise here.
SET LOCAL client_min_messages = warning;
DO $refresh$
DECLARE
    s record;
    r record;
BEGIN
    FOR s IN SELECT n.nspname AS schema_name
               FROM pg_catalog.pg_class c
               JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
              WHERE c.relname = 'substrate_info' AND c.relkind = 'r'
              ORDER BY n.nspname <> 'awa', n.nspname LOOP
        EXECUTE format('SELECT awa.install_queue_storage_substrate(%L, queue_slot_count, lease_slot_count, claim_slot_count) FROM %I.substrate_info',
                       s.schema_name, s.schema_name);
    END LOOP;
    FOR r IN SELECT DISTINCT ro.rolname AS role_name, n.nspname AS schema_name
               FROM pg_catalog.pg_namespace n
               CROSS JOIN LATERAL pg_catalog.aclexplode(n.nspacl) a
               JOIN pg_catalog.pg_roles ro ON ro.oid = a.grantee
              WHERE a.privilege_type = 'USAGE'
                AND a.grantee <> n.nspowner
                AND EXISTS (SELECT 1 FROM pg_catalog.pg_class c
                             WHERE c.relnamespace = n.oid AND c.relname = 'substrate_info' AND c.relkind = 'r')
              ORDER BY 1, 2 LOOP
        PERFORM awa.grant_runtime_role(r.role_name, r.schema_name);
    END LOOP;
END
$refresh$;
