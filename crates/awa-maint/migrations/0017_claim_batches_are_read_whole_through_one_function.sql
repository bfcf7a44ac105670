-- Awa migration 17: claim batches are read whole through one function
--
-- Drafted by `cargo xtask migration draft` (hand-written parts first, then
-- what the sources define), then reviewed. Frozen once on main: never edit
-- it, add a new step. Runs once, in one transaction, as the migrator.

-- Runtime function templates, as the sources define them.
INSERT INTO awa.substrate_functions (name, ord, body) VALUES ('cancel_job', 21, $awa_template$-- {schema}.cancel_job(job_id): cancel a job wherever it is.
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
$awa_template$)
ON CONFLICT (name) DO UPDATE SET ord = EXCLUDED.ord, body = EXCLUDED.body;
INSERT INTO awa.substrate_functions (name, ord, body) VALUES ('claim_batch_whole', 18, $awa_template$-- {schema}.claim_batch_whole(slot, batch_id): one claim batch row, its
-- item arrays read whole (`[:]`, a plain copy of each), for statements
-- that read items of the batch by subscript: finish, finish_pass and
-- exec_park.
--
-- Why: a batch row keeps its items as parallel arrays, a few KB each at
-- 512 items, stored compressed, and a subscript of a stored array
-- decompresses all of it: read per item, seven subscripts were two thirds
-- of a finish of 512 jobs (ARCHITECTURE "Evidence shapes", ADR 18). A
-- copy's subscripts cost an offset (fixed-width elements, no NULLs), so
-- the caller materializes this row once per batch and must not sort
-- above its join with it (a sort would copy the arrays per item).
--
-- A SQL function the planner inlines, called LATERAL per batch; LIMIT 1
-- (the key is the primary key) keeps the inlined subquery from being
-- pulled up into a join that reads the whole partition. Reads only.
CREATE OR REPLACE FUNCTION {schema}.claim_batch_whole(p_slot integer, p_batch_id bigint)
RETURNS TABLE (
    slot integer, batch_id bigint, queue text, claimed_at timestamptz, instance_id uuid,
    job_ids bigint[], run_leases bigint[], attempts integer[], ready_slots integer[],
    ready_seqs bigint[], priorities smallint[], shards smallint[], keyed integer[]
) LANGUAGE sql STABLE AS $fn$
    SELECT b.slot, b.batch_id, b.queue, b.claimed_at, b.instance_id,
           b.job_ids[:], b.run_leases[:], b.attempts[:], b.ready_slots[:],
           b.ready_seqs[:], b.priorities[:], b.shards[:], b.keyed
      FROM {schema}.claim_batches b
     WHERE b.slot = p_slot AND b.batch_id = p_batch_id
     LIMIT 1
$fn$;
$awa_template$)
ON CONFLICT (name) DO UPDATE SET ord = EXCLUDED.ord, body = EXCLUDED.body;
INSERT INTO awa.substrate_functions (name, ord, body) VALUES ('claim_floor_advance', 25, $awa_template$-- {schema}.claim_floor_advance(): move claim_floor (install_exec_plane.sql)
-- up to the batches claimed now, so the read views read the open claim
-- batches and the few claimed since, never the closed ones the claim ring
-- still holds. The leader's health task calls it before it measures.
-- Returns the floor in force afterwards.
--
-- The promise: every batch with batch_id below `floor` is closed, gone
-- with its slot, or listed in (open_slots, open_batches). Batch ids come
-- from claim_batch_seq (CACHE 1: handed out in the order drawn), drawn by
-- the claim inside its transaction. A batch below a position read from
-- the sequence may still be uncommitted then, so a position is adopted in
-- two steps, the storage drain's fence (drain_release.sql):
--   propose: read the sequence's next id, then (a later statement) the
--     virtual transaction ids of this database's other running
--     transactions: each holds its own from its start, so one that drew an
--     id below the position is among them, or had ended;
--   adopt, in a statement that starts once none of them is still running:
--     every batch below the position that will ever commit has committed
--     and is seen, so the batches from the old floor to the position that
--     are still open, with the listed ones still open, are the new list.
-- A closed batch stays closed (links are only ever added), so a reader
-- whose snapshot sees the row sees every batch it leaves out as closed.
-- A proposal made here is waited for a few milliseconds (the transactions
-- running then are usually claims and finishes that end at once); one
-- still fenced is adopted by a later call. A transaction that stays open
-- holds the floor where it is: readers then read more batches, never
-- fewer. Each step needs a snapshot of its own, so under REPEATABLE READ
-- or SERIALIZABLE nothing moves; a racing caller skips (the row lock).
-- jit = off: a maintenance statement, planned once per session.
-- No arguments (nothing to bound).
CREATE OR REPLACE FUNCTION {schema}.claim_floor_advance()
RETURNS bigint LANGUAGE plpgsql SET jit = off AS $fn$
DECLARE
    f record;
    v_at bigint;
    v_fresh boolean;
BEGIN
    IF current_setting('transaction_isolation') <> 'read committed' THEN
        RETURN (SELECT c.floor FROM {schema}.claim_floor c);
    END IF;
    SELECT c.* INTO f FROM {schema}.claim_floor c FOR UPDATE SKIP LOCKED;
    IF NOT FOUND THEN
        RETURN (SELECT c.floor FROM {schema}.claim_floor c);
    END IF;
    FOR k IN 1 .. 2 LOOP
        v_fresh := f.pending_floor IS NULL;
        IF v_fresh THEN
            -- Propose: the position first, then who may still hold an id
            -- below it (pg_locks is read live; pg_stat_activity, read for
            -- the database only, keeps a transaction's first read unless
            -- cleared).
            v_at := (SELECT CASE WHEN s.is_called THEN s.last_value + 1 ELSE s.last_value END
                       FROM {schema}.claim_batch_seq s);
            PERFORM pg_stat_clear_snapshot();
            UPDATE {schema}.claim_floor c
               SET pending_floor = v_at,
                   pending_vxids = ARRAY(
                       SELECT l.virtualxid::text
                         FROM pg_catalog.pg_locks l
                         JOIN pg_catalog.pg_stat_activity a ON a.pid = l.pid
                        WHERE l.locktype = 'virtualxid' AND l.mode = 'ExclusiveLock' AND l.granted
                          AND a.datname = current_database() AND l.pid <> pg_backend_pid())
             RETURNING c.* INTO f;
            -- Those are mostly claims and finishes, which end at once.
            FOR i IN 1 .. 25 LOOP
                EXIT WHEN NOT EXISTS (SELECT 1 FROM pg_catalog.pg_locks l
                                       WHERE l.locktype = 'virtualxid' AND l.granted
                                         AND l.virtualxid::text = ANY (f.pending_vxids));
                PERFORM pg_sleep(0.002);
            END LOOP;
        END IF;
        IF EXISTS (SELECT 1 FROM pg_catalog.pg_locks l
                    WHERE l.locktype = 'virtualxid' AND l.granted
                      AND l.virtualxid::text = ANY (f.pending_vxids)) THEN
            -- Still fenced: a later call adopts it.
            EXIT;
        END IF;
        -- Adopt, in a statement (a snapshot) that starts after the fence.
        UPDATE {schema}.claim_floor c
           SET (open_slots, open_batches) = (
                   SELECT coalesce(array_agg(o.slot ORDER BY o.batch_id), '{}'),
                          coalesce(array_agg(o.batch_id ORDER BY o.batch_id), '{}')
                     FROM (SELECT b.slot, b.batch_id
                             FROM unnest(c.open_slots, c.open_batches) AS l(slot, batch_id)
                             JOIN {schema}.claim_batches b
                               ON b.slot = l.slot AND b.batch_id = l.batch_id
                           UNION ALL
                           SELECT b.slot, b.batch_id
                             FROM {schema}.claim_batches b
                            WHERE b.batch_id >= c.floor AND b.batch_id < c.pending_floor) o
                    WHERE NOT EXISTS (SELECT 1 FROM {schema}.claim_closures x
                                       WHERE x.slot = o.slot AND x.batch_id = o.batch_id
                                         AND x.open_after = 0)),
               floor = c.pending_floor, pending_floor = NULL, pending_vxids = NULL,
               moved_at = now()
         RETURNING c.* INTO f;
        -- An earlier call's proposal adopted: go round once for a new one.
        EXIT WHEN v_fresh;
    END LOOP;
    RETURN f.floor;
END
$fn$;
$awa_template$)
ON CONFLICT (name) DO UPDATE SET ord = EXCLUDED.ord, body = EXCLUDED.body;
INSERT INTO awa.substrate_functions (name, ord, body) VALUES ('dlq_retry', 26, $awa_template$-- {schema}.dlq_retry(job_id, queue, all): put dead-lettered jobs back as
-- fresh work (attempt 0, same id, run_lease continuing so any old writer
-- stays rejected, attempt records kept). Either one id, or every entry (optionally of one queue).
--
-- Returns one row per selected entry: held_by NULL when it was retried;
-- otherwise the entry stays in the DLQ and held_by names the job that now
-- holds its unique_key.
--
-- The rule that must not be broken: a job that was enqueued with a unique
-- key runs again only as the key's owner. Dead-lettering released the key
-- (or, for a key spec that keeps failed jobs, marked it finished until its
-- period ends), so the retry takes it again through unique_take (the same
-- decision enqueue makes, in the same transaction as the append; a row
-- the job itself kept is taken over with its hold). When a newer job
-- holds the key, retrying would make two unfinished jobs with one key, and
-- dropping the key would silently drop the job's uniqueness: the entry is
-- kept instead, for the operator to retry after that job finishes, or to
-- purge.
--
-- The selection is one job (job_id, all false; queue NULL) or all of them
-- (job_id NULL, all true; optionally of one queue); anything else is
-- refused (SQLSTATE 22023), as the CLI refuses it.
CREATE OR REPLACE FUNCTION {schema}.dlq_retry(p_job_id bigint, p_queue text, p_all boolean)
RETURNS TABLE (job_id bigint, unique_key text, held_by bigint)
LANGUAGE plpgsql AS $fn$
#variable_conflict use_column
DECLARE
    v_ids    bigint[];
    v_keys   text[];
    v_owners bigint[];
BEGIN
    IF p_all IS NULL OR p_all = (p_job_id IS NOT NULL) OR (p_job_id IS NOT NULL AND p_queue IS NOT NULL) THEN
        RAISE EXCEPTION 'dlq_retry: name one job (job_id, all = false) or all of them (job_id NULL, all = true, optionally a queue)'
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'awa dlq retry --id ID, or --all [--queue Q].';
    END IF;
    -- Lock the selection: a concurrent retry or purge of an entry waits,
    -- then finds it gone.
    SELECT coalesce(array_agg(s.job_id ORDER BY s.dead_at, s.job_id), '{}'),
           coalesce(array_agg(s.unique_key ORDER BY s.dead_at, s.job_id), '{}')
      INTO v_ids, v_keys
      FROM (SELECT d.job_id, d.dead_at, d.unique_key
              FROM {schema}.dlq_entries d
             WHERE (p_all OR d.job_id = p_job_id)
               AND (p_queue IS NULL OR d.queue = p_queue)
               FOR UPDATE) s;
    IF cardinality(v_ids) = 0 THEN
        RETURN;
    END IF;

    v_owners := {schema}.unique_take(v_keys, v_ids);

    RETURN QUERY
    WITH taken AS (
        DELETE FROM {schema}.dlq_entries d
         WHERE d.job_id = ANY (ARRAY(SELECT o.id FROM unnest(v_ids, v_owners) AS o(id, owner)
                                      WHERE o.id = o.owner))
        RETURNING d.*
    ),
    ordered AS (SELECT * FROM taken ORDER BY dead_at, job_id),
    appended AS (
        SELECT a.job_id FROM {schema}.ready_append(
            ARRAY(SELECT job_id FROM ordered),
            ARRAY(SELECT queue FROM ordered),
            ARRAY(SELECT priority FROM ordered),
            ARRAY(SELECT kind FROM ordered),
            ARRAY(SELECT args FROM ordered),
            ARRAY(SELECT 0 FROM ordered),
            ARRAY(SELECT max_attempts FROM ordered),
            ARRAY(SELECT run_lease FROM ordered),
            ARRAY(SELECT created_at FROM ordered),
            ARRAY(SELECT unique_key FROM ordered),
            ARRAY(SELECT metadata FROM ordered),
            ARRAY(SELECT attempts FROM ordered)) a
    )
    SELECT a.job_id, NULL::text, NULL::bigint FROM appended a
    UNION ALL
    SELECT o.id, o.key, o.owner
      FROM unnest(v_ids, v_keys, v_owners) WITH ORDINALITY AS o(id, key, owner, ord)
     WHERE o.id <> o.owner;
END
$fn$;
$awa_template$)
ON CONFLICT (name) DO UPDATE SET ord = EXCLUDED.ord, body = EXCLUDED.body;
INSERT INTO awa.substrate_functions (name, ord, body) VALUES ('exec_park', 24, $awa_template$-- {schema}.exec_park(ring, slot, limit): move up to `limit` open attempts
-- that keep ring slot `slot` live out of the rings, into parked_attempts.
-- Called by ring_prune for the slot a ring must rotate onto next, so a job
-- that runs for hours never stops reclamation.
--
--   queue: open items whose body is in that queue slot
--   claim: open items of the batches in that claim slot
--   lease: open items whose lease is in that lease slot
--
-- The move, in this one transaction: per batch, insert the next closure
-- link listing its items being parked (outcome 'parked'), exactly as
-- finish does (same numbering, same primary key), and, only for the links
-- this call inserted, a parked_attempts row per item with the batch item,
-- the lease's heartbeat and callback, and the job's body. So parking and
-- finishing exclude each other: a finisher that took the link number first
-- makes this park of that batch do nothing (the next prune tries again);
-- once parked, finish can only win by deleting the parked row (see finish).
-- Either way the attempt has exactly one open piece of evidence at a time.
--
-- The worker's token (job_id, run_lease, claim_slot, batch_id, item) stays
-- valid: finish and heartbeat look for a parked row when the item is
-- closed.
--
-- Returns how many attempts were parked. An unknown ring, a slot not of
-- that ring, or a limit outside 1..10000 (awa_core::bounds::MAINT_LIMIT)
-- is refused (22023).
CREATE OR REPLACE FUNCTION {schema}.exec_park(p_ring text, p_slot integer, p_limit integer)
RETURNS integer LANGUAGE plpgsql AS $fn$
#variable_conflict use_column
DECLARE
    v_slots   integer[];
    v_batches bigint[];
    v_items   integer[];
    v_parked  integer;
BEGIN
    -- A slot of this ring (ring_slot_count refuses an unknown ring).
    IF p_slot IS NULL OR p_slot NOT BETWEEN 0 AND {schema}.ring_slot_count(p_ring) - 1 THEN
        RAISE EXCEPTION 'slot % is not a slot of the % ring', coalesce(p_slot::text, 'NULL'), p_ring
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'Slots are numbered from 0 to the ring''s slot count - 1 (substrate_info).';
    END IF;
    IF p_limit IS NULL OR p_limit NOT BETWEEN 1 AND 10000 THEN
        RAISE EXCEPTION 'exec_park: limit must be 1 to 10000 (got %)', coalesce(p_limit::text, 'NULL')
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'Attempts one maintenance call parks (awa_core::bounds::MAINT_LIMIT); prune parks 1000 at a time.';
    END IF;
    -- Which items: one statement per ring, each shaped so the planner can
    -- prune to the partitions it names (claim: one claim slot; lease: one
    -- lease slot, then batches by primary key; queue: batches whose
    -- body_slots name the slot).
    IF p_ring = 'claim' THEN
        SELECT array_agg(o.slot), array_agg(o.batch_id), array_agg(o.item)
          INTO v_slots, v_batches, v_items
          FROM (SELECT b.slot, b.batch_id, u.item::integer AS item
                  FROM {schema}.claim_batches b
                 CROSS JOIN LATERAL generate_subscripts(b.job_ids, 1) AS u(item)
                 WHERE b.slot = p_slot
                   AND NOT EXISTS (SELECT 1 FROM {schema}.claim_closures c
                                    WHERE c.slot = b.slot AND c.batch_id = b.batch_id AND c.open_after = 0)
                   AND NOT EXISTS (SELECT 1 FROM {schema}.claim_closures c
                                    WHERE c.slot = b.slot AND c.batch_id = b.batch_id AND u.item = ANY (c.items))
                 ORDER BY b.batch_id, u.item LIMIT p_limit) o;
    ELSIF p_ring = 'lease' THEN
        SELECT array_agg(o.slot), array_agg(o.batch_id), array_agg(o.item)
          INTO v_slots, v_batches, v_items
          FROM (SELECT DISTINCT l.claim_slot AS slot, l.batch_id, l.item
                  FROM {schema}.leases l
                  JOIN {schema}.claim_batches b ON b.slot = l.claim_slot AND b.batch_id = l.batch_id
                 WHERE l.slot = p_slot
                   AND NOT EXISTS (SELECT 1 FROM {schema}.claim_closures c
                                    WHERE c.slot = l.claim_slot AND c.batch_id = l.batch_id AND l.item = ANY (c.items))
                 ORDER BY l.batch_id, l.item LIMIT p_limit) o;
    ELSE
        SELECT array_agg(o.slot), array_agg(o.batch_id), array_agg(o.item)
          INTO v_slots, v_batches, v_items
          FROM (SELECT b.slot, b.batch_id, u.item::integer AS item
                  FROM {schema}.claim_batches b
                 CROSS JOIN LATERAL unnest(b.ready_slots) WITH ORDINALITY AS u(ready_slot, item)
                 WHERE p_slot = ANY (b.body_slots) AND u.ready_slot = p_slot
                   AND NOT EXISTS (SELECT 1 FROM {schema}.claim_closures c
                                    WHERE c.slot = b.slot AND c.batch_id = b.batch_id AND c.open_after = 0)
                   AND NOT EXISTS (SELECT 1 FROM {schema}.claim_closures c
                                    WHERE c.slot = b.slot AND c.batch_id = b.batch_id AND u.item = ANY (c.items))
                 ORDER BY b.batch_id, u.item LIMIT p_limit) o;
    END IF;
    IF v_items IS NULL THEN
        RETURN 0;
    END IF;

    WITH open AS (
        -- Inner join with the body: an open item always has it (the queue
        -- slot is not reclaimed while the item is open).
        SELECT k.slot, k.batch_id, k.item, b.job_ids[k.item] AS job_id,
               b.run_leases[k.item] AS run_lease, b.queue, b.attempts[k.item] AS attempt,
               b.claimed_at, b.instance_id, b.ready_seqs[k.item] AS ready_seq,
               cardinality(b.job_ids) AS size,
               e.kind, e.args, e.priority, e.max_attempts, e.created_at, e.unique_key, e.metadata,
               e.attempts
          FROM unnest(v_slots, v_batches, v_items) AS k(slot, batch_id, item)
          -- Each batch's arrays read whole once (claim_batch_whole).
          JOIN (SELECT b.*
                  FROM (SELECT DISTINCT u.slot, u.batch_id
                          FROM unnest(v_slots, v_batches) AS u(slot, batch_id)) u
                 CROSS JOIN LATERAL {schema}.claim_batch_whole(u.slot, u.batch_id) b
                OFFSET 0) b ON b.slot = k.slot AND b.batch_id = k.batch_id
          JOIN {schema}.ready_entries e
            ON e.slot = b.ready_slots[k.item] AND e.queue = b.queue
           AND e.priority = b.priorities[k.item] AND e.shard = b.shards[k.item]
           AND e.lane_seq = b.ready_seqs[k.item] AND e.job_id = b.job_ids[k.item]
         -- Again, in the snapshot the links below are numbered in: an item
         -- a finisher closed since the choice above is not parked.
         WHERE NOT EXISTS (SELECT 1 FROM {schema}.claim_closures c
                            WHERE c.slot = k.slot AND c.batch_id = k.batch_id AND k.item = ANY (c.items))
    ),
    links AS (
        -- The next link of each batch, given what its links have closed
        -- (read in this statement's snapshot, like finish does).
        SELECT o.slot, o.batch_id, ch.last_link + 1 AS link,
               array_agg(o.item ORDER BY o.item) AS items,
               (min(o.size) - min(ch.closed) - count(*))::integer AS open_after
          FROM open o
         CROSS JOIN LATERAL (
                SELECT coalesce(max(c.link), 0) AS last_link,
                       coalesce(sum(cardinality(c.items)), 0) AS closed
                  FROM {schema}.claim_closures c
                 WHERE c.slot = o.slot AND c.batch_id = o.batch_id) ch
         GROUP BY o.slot, o.batch_id, ch.last_link
         ORDER BY o.slot, o.batch_id
    ),
    closed AS (
        INSERT INTO {schema}.claim_closures AS c (slot, batch_id, link, items, outcome, open_after)
        SELECT l.slot, l.batch_id, l.link, l.items, 'parked', l.open_after FROM links l
        ON CONFLICT DO NOTHING
        RETURNING c.slot, c.batch_id
    ),
    parked AS (
        INSERT INTO {schema}.parked_attempts
            (job_id, run_lease, claim_slot, batch_id, item, queue, attempt, claimed_at, deadline_at,
             instance_id, heartbeat_at, callback_id, callback_timeout,
             ready_seq, kind, args, priority, max_attempts, created_at, unique_key, metadata,
             attempts)
        SELECT o.job_id, o.run_lease, o.slot, o.batch_id, o.item, o.queue, o.attempt, o.claimed_at,
               l.deadline_at, o.instance_id, l.heartbeat_at, l.callback_id, l.callback_timeout,
               o.ready_seq, o.kind, o.args, o.priority, o.max_attempts, o.created_at,
               o.unique_key, o.metadata, o.attempts
          FROM open o
          JOIN closed c ON c.slot = o.slot AND c.batch_id = o.batch_id
          LEFT JOIN LATERAL (
                SELECT l.heartbeat_at, l.deadline_at, l.callback_id, l.callback_timeout
                  FROM {schema}.leases l
                 WHERE l.job_id = o.job_id AND l.run_lease = o.run_lease
                 ORDER BY l.heartbeat_at DESC
                 LIMIT 1) l ON true
        RETURNING 1
    )
    SELECT count(*)::integer INTO v_parked FROM parked;
    RETURN v_parked;
END
$fn$;
$awa_template$)
ON CONFLICT (name) DO UPDATE SET ord = EXCLUDED.ord, body = EXCLUDED.body;
INSERT INTO awa.substrate_functions (name, ord, body) VALUES ('exec_slot_live', 22, $awa_template$-- {schema}.exec_slot_live(ring, slot): why a ring slot still holds a live
-- attempt, or NULL. Used by ring_prune before and after locking the slot.
-- An attempt is an item of a claim batch; it is open while no closure link
-- of its batch lists it, and a closed item is dead everywhere.
--   queue: an open item whose job body is in that queue slot (finishing it
--          reads the body, and writes its terminal fact there)
--   claim: a batch in that claim slot with an open item. The last link of
--          a batch records how many items it left open (links are
--          serialized by their primary key, so that count is exact), so a
--          batch is open iff no link says 0.
--   lease: a lease in that lease slot whose item is still open
-- An unknown ring or a slot not of that ring is refused (22023).
CREATE OR REPLACE FUNCTION {schema}.exec_slot_live(p_ring text, p_slot integer)
RETURNS text LANGUAGE plpgsql STABLE AS $fn$
BEGIN
    -- A slot of this ring (ring_slot_count refuses an unknown ring).
    IF p_slot IS NULL OR p_slot NOT BETWEEN 0 AND {schema}.ring_slot_count(p_ring) - 1 THEN
        RAISE EXCEPTION 'slot % is not a slot of the % ring', coalesce(p_slot::text, 'NULL'), p_ring
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'Slots are numbered from 0 to the ring''s slot count - 1 (substrate_info).';
    END IF;
    RETURN (
        SELECT 'attempt ' || u.job_id || '/' || u.run_lease || ' is still open'
          FROM {schema}.claim_batches b
         CROSS JOIN LATERAL unnest(b.job_ids, b.run_leases, b.ready_slots)
               WITH ORDINALITY AS u(job_id, run_lease, ready_slot, item)
         WHERE p_ring = 'queue' AND p_slot = ANY (b.body_slots) AND u.ready_slot = p_slot
           AND NOT EXISTS (SELECT 1 FROM {schema}.claim_closures c
                            WHERE c.slot = b.slot AND c.batch_id = b.batch_id AND c.open_after = 0)
           AND NOT EXISTS (SELECT 1 FROM {schema}.claim_closures c
                            WHERE c.slot = b.slot AND c.batch_id = b.batch_id AND u.item = ANY (c.items))
        UNION ALL
        SELECT 'claim batch ' || b.batch_id || ' has open attempts (first job ' || b.job_ids[1] || ')'
          FROM {schema}.claim_batches b
         WHERE p_ring = 'claim' AND b.slot = p_slot
           AND NOT EXISTS (SELECT 1 FROM {schema}.claim_closures c
                            WHERE c.slot = b.slot AND c.batch_id = b.batch_id AND c.open_after = 0)
        UNION ALL
        SELECT 'lease of attempt ' || l.job_id || '/' || l.run_lease || ' is still live'
          FROM {schema}.leases l
         WHERE p_ring = 'lease' AND l.slot = p_slot
           AND EXISTS (SELECT 1 FROM {schema}.claim_batches b
                        WHERE b.slot = l.claim_slot AND b.batch_id = l.batch_id)
           AND NOT EXISTS (SELECT 1 FROM {schema}.claim_closures c
                            WHERE c.slot = l.claim_slot AND c.batch_id = l.batch_id AND l.item = ANY (c.items))
        LIMIT 1);
END
$fn$;
$awa_template$)
ON CONFLICT (name) DO UPDATE SET ord = EXCLUDED.ord, body = EXCLUDED.body;
INSERT INTO awa.substrate_functions (name, ord, body) VALUES ('failure_retry', 32, $awa_template$-- {schema}.failure_retry(job_ids): put failed or cancelled jobs back as
-- fresh work (ADR 11): attempt 0, the same id, run_lease continuing so any
-- old writer stays rejected, attempt records kept. Only jobs whose failure
-- this substrate keeps (failure_entries) are taken; other ids are ignored.
--
-- Returns one row per job found: held_by NULL when it was retried;
-- otherwise its failure stays kept and held_by names the unfinished job
-- that now holds its unique key (the rule of dlq_retry: a job enqueued with
-- a unique key runs again only as the key's owner, so it is kept for the
-- operator to retry once that job has finished).
--
-- Locking: the selected rows are locked FOR UPDATE first, so a concurrent
-- retry or the retention pass (SKIP LOCKED) leaves them alone and a second
-- retry of the same job finds nothing. The delete and the append commit
-- together: every snapshot sees the job failed, or back in the ready ring.
-- The append goes to this substrate's ready ring; workers claim from every
-- substrate the routing reads, so the caller retries only in those.
CREATE OR REPLACE FUNCTION {schema}.failure_retry(p_job_ids bigint[])
RETURNS TABLE (job_id bigint, unique_key text, held_by bigint)
LANGUAGE plpgsql AS $fn$
#variable_conflict use_column
DECLARE
    v_ids    bigint[];
    v_keys   text[];
    v_owners bigint[];
BEGIN
    SELECT coalesce(array_agg(s.job_id ORDER BY s.job_id), '{}'),
           coalesce(array_agg(s.unique_key ORDER BY s.job_id), '{}')
      INTO v_ids, v_keys
      FROM (SELECT f.job_id, f.unique_key
              FROM {schema}.failure_entries f
             WHERE f.job_id = ANY (p_job_ids)
             ORDER BY f.job_id
               FOR UPDATE) s;
    IF cardinality(v_ids) = 0 THEN
        RETURN;
    END IF;

    v_owners := {schema}.unique_take(v_keys, v_ids);

    RETURN QUERY
    WITH taken AS (
        DELETE FROM {schema}.failure_entries f
         WHERE f.job_id = ANY (ARRAY(SELECT o.id FROM unnest(v_ids, v_owners) AS o(id, owner)
                                      WHERE o.id = o.owner))
        RETURNING f.*
    ),
    ordered AS (SELECT * FROM taken ORDER BY job_id),
    appended AS (
        SELECT a.job_id FROM {schema}.ready_append(
            ARRAY(SELECT job_id FROM ordered),
            ARRAY(SELECT queue FROM ordered),
            ARRAY(SELECT priority FROM ordered),
            ARRAY(SELECT kind FROM ordered),
            ARRAY(SELECT args FROM ordered),
            ARRAY(SELECT 0 FROM ordered),
            ARRAY(SELECT max_attempts FROM ordered),
            ARRAY(SELECT run_lease FROM ordered),
            ARRAY(SELECT created_at FROM ordered),
            ARRAY(SELECT unique_key FROM ordered),
            ARRAY(SELECT metadata FROM ordered),
            ARRAY(SELECT attempts FROM ordered)) a
    )
    SELECT a.job_id, NULL::text, NULL::bigint FROM appended a
    UNION ALL
    SELECT o.id, o.key, o.owner
      FROM unnest(v_ids, v_keys, v_owners) AS o(id, key, owner)
     WHERE o.id <> o.owner;
END
$fn$;
$awa_template$)
ON CONFLICT (name) DO UPDATE SET ord = EXCLUDED.ord, body = EXCLUDED.body;
INSERT INTO awa.substrate_functions (name, ord, body) VALUES ('finish', 19, $awa_template$-- {schema}.finish(job_ids, run_leases, claim_slots, batch_ids, items,
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
            -- (named: how many times this call names the item)
            SELECT i.job_id, i.run_lease, i.batch_id, i.item, i.ord,
                   count(*) OVER (PARTITION BY i.batch_id, i.item) AS named
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
                   -- Open: the item still names this attempt, no link
                   -- lists it, and this call names it once.
                   coalesce(b.job_ids[i.item] = i.job_id AND b.run_leases[i.item] = i.run_lease
                            AND NOT (i.item = ANY (b.closed)), false)
                     AND i.named = 1 AS open,
                   b.last_link, b.size - cardinality(b.closed) AS open_before
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
INSERT INTO awa.substrate_functions (name, ord, body) VALUES ('heartbeat', 20, $awa_template$-- {schema}.heartbeat(job_id, run_lease, claim_slot, batch_id, item,
--                    percent, message, checkpoint):
-- record that a long attempt is alive, materializing its own lease on
-- first use in the current lease-ring slot (the batch row stays as it
-- was); with progress, also upsert attempt_state (kept across retries).
-- Short jobs never call this.
--
-- A parked attempt (moved out of the rings by exec_park) heartbeats on its
-- parked_attempts row instead.
--
-- Returns false, and writes nothing, when the attempt is no longer live
-- (finished, rescued, cancelled): the handler should stop.
--
-- Bounds (SQLSTATE 22023, before anything is written): percent NULL or 0
-- to 100; message NULL or at most 8 KiB (awa_core::bounds::MAX_ERROR_BYTES,
-- as the Rust side cuts it).
CREATE OR REPLACE FUNCTION {schema}.heartbeat(
    p_job_id bigint, p_run_lease bigint, p_claim_slot integer, p_batch_id bigint, p_item integer,
    p_percent smallint, p_message text, p_checkpoint jsonb
) RETURNS boolean LANGUAGE plpgsql AS $fn$
#variable_conflict use_column
DECLARE
    v_lease_slot integer;
BEGIN
    IF p_percent NOT BETWEEN 0 AND 100 OR octet_length(p_message) > 8192 THEN
        RAISE EXCEPTION 'heartbeat: progress percent must be 0 to 100 (got %) and its message at most 8192 bytes (got %)',
                        p_percent, octet_length(p_message)
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'Report progress as a whole percentage and a short message.';
    END IF;
    IF EXISTS (SELECT 1 FROM {schema}.claim_batches b
                WHERE b.slot = p_claim_slot AND b.batch_id = p_batch_id
                  AND b.job_ids[p_item] = p_job_id AND b.run_leases[p_item] = p_run_lease)
       AND NOT EXISTS (SELECT 1 FROM {schema}.claim_closures c
                        WHERE c.slot = p_claim_slot AND c.batch_id = p_batch_id AND p_item = ANY (c.items)) THEN
        -- An existing lease stays in its slot; a new one goes to the current slot.
        UPDATE {schema}.leases l SET heartbeat_at = now()
         WHERE l.job_id = p_job_id AND l.run_lease = p_run_lease;
        IF NOT FOUND THEN
            SELECT g.slot INTO v_lease_slot FROM {schema}.ring_ledger g
             WHERE g.ring = 'lease' ORDER BY g.generation DESC LIMIT 1;
            INSERT INTO {schema}.leases (slot, job_id, run_lease, claim_slot, batch_id, item)
            VALUES (v_lease_slot, p_job_id, p_run_lease, p_claim_slot, p_batch_id, p_item);
        END IF;
    ELSE
        -- Closed or gone: maybe parked (exec_park). This is a later
        -- statement than the check above, so it sees a park that closed
        -- the item before that check ran.
        UPDATE {schema}.parked_attempts p SET heartbeat_at = now()
         WHERE p.job_id = p_job_id AND p.run_lease = p_run_lease;
        IF NOT FOUND THEN
            RETURN false;
        END IF;
    END IF;

    IF p_percent IS NOT NULL OR p_message IS NOT NULL OR p_checkpoint IS NOT NULL THEN
        INSERT INTO {schema}.attempt_state AS s (job_id, run_lease, percent, message, checkpoint)
        VALUES (p_job_id, p_run_lease, p_percent, p_message, p_checkpoint)
        ON CONFLICT (job_id) DO UPDATE
           SET run_lease  = EXCLUDED.run_lease,
               percent    = coalesce(EXCLUDED.percent, s.percent),
               message    = coalesce(EXCLUDED.message, s.message),
               checkpoint = coalesce(EXCLUDED.checkpoint, s.checkpoint),
               updated_at = now();
    END IF;
    RETURN true;
END
$fn$;
$awa_template$)
ON CONFLICT (name) DO UPDATE SET ord = EXCLUDED.ord, body = EXCLUDED.body;
INSERT INTO awa.substrate_functions (name, ord, body) VALUES ('history_retire_slot', 33, $awa_template$-- {schema}.history_retire_slot(slot): move queue-ring slot `slot`'s count
-- deltas into the rollups, in the transaction that retires the slot. The
-- delete is MVCC: snapshots older than the retirement still count the
-- deltas (and not the new rollup values), newer ones count the rollups; the
-- later TRUNCATE of the slot changes nothing any snapshot can still see.
--
-- It also moves history_horizon past the slot's newest job id, so a lookup
-- of a job that is no longer anywhere can say its history was pruned, and
-- when, instead of "no such job". A slot that is not one of the queue
-- ring's is refused (22023).
CREATE OR REPLACE FUNCTION {schema}.history_retire_slot(p_slot integer)
RETURNS void LANGUAGE plpgsql AS $fn$
#variable_conflict use_column
BEGIN
    -- A slot of this ring (ring_slot_count refuses an unknown ring).
    IF p_slot IS NULL OR p_slot NOT BETWEEN 0 AND {schema}.ring_slot_count('queue') - 1 THEN
        RAISE EXCEPTION 'slot % is not a slot of the % ring', coalesce(p_slot::text, 'NULL'), 'queue'
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'Slots are numbered from 0 to the ring''s slot count - 1 (substrate_info).';
    END IF;
    WITH moved AS (
        DELETE FROM {schema}.count_deltas d WHERE d.slot = p_slot
        RETURNING d.queue, d.state, d.delta
    )
    INSERT INTO {schema}.count_rollups AS r (queue, state, total)
    SELECT m.queue, m.state, sum(m.delta) FROM moved m GROUP BY m.queue, m.state
    ON CONFLICT (queue, state) DO UPDATE
       SET total = r.total + EXCLUDED.total, updated_at = now();
    INSERT INTO {schema}.history_horizon AS h (singleton, pruned_through_job_id, pruned_at)
    SELECT true, max(x.job_id), now()
      FROM (SELECT max(d.job_id) AS job_id FROM {schema}.done_entries d WHERE d.slot = p_slot
            UNION ALL
            SELECT max(b.hi_job_id) FROM {schema}.done_batches b WHERE b.slot = p_slot) x
    HAVING max(x.job_id) IS NOT NULL
    ON CONFLICT (singleton) DO UPDATE
       SET pruned_through_job_id = greatest(h.pruned_through_job_id, EXCLUDED.pruned_through_job_id),
           pruned_at = now();
END
$fn$;
$awa_template$)
ON CONFLICT (name) DO UPDATE SET ord = EXCLUDED.ord, body = EXCLUDED.body;
INSERT INTO awa.substrate_functions (name, ord, body) VALUES ('job_body', 31, $awa_template$-- {schema}.job_body(kind, args, priority, max_attempts, created_at, metadata):
-- a job's body as a done_entries row carries it, the one place its keys are
-- chosen (terminal_jobs reads them back). A plain SQL expression, so it is
-- inlined where it is used.
CREATE OR REPLACE FUNCTION {schema}.job_body(
    p_kind text, p_args jsonb, p_priority smallint, p_max_attempts integer,
    p_created_at timestamptz, p_metadata jsonb
) RETURNS jsonb LANGUAGE sql IMMUTABLE AS $fn$
    SELECT jsonb_build_object('kind', p_kind, 'args', p_args, 'priority', p_priority,
                              'max_attempts', p_max_attempts, 'created_at', p_created_at,
                              'metadata', p_metadata)
$fn$;
$awa_template$)
ON CONFLICT (name) DO UPDATE SET ord = EXCLUDED.ord, body = EXCLUDED.body;
INSERT INTO awa.substrate_functions (name, ord, body) VALUES ('jobs', 27, $awa_template$-- The read views of live work (issue 33: priced by the work there is).
-- Each reads what is live, never what the rings retain (claimed entries
-- stay in their queue slot until it is truncated, closed claim batches in
-- theirs), in plans whose estimates stay far below jit_above_cost:
--   lane_entries      per lane (lane_heads), its entries past its head
--                     through the lane index, one range per queue slot;
--                     each reader probes the tombstones' primary key per
--                     entry it keeps (a scalar subquery, which the planner
--                     never turns into a join over every tombstone; LIMIT 1
--                     prices it as the one partition it reads)
--   open_batch_items  the open items of the claim batches claim_floor
--                     lists and of those claimed from its floor on, never
--                     the closed batches below it
--   live_job_states   every live job's id, queue, state and `at`: what the
--                     counting reads (health, stats, pending, storage
--                     status) need, with no body read for a running job
--   live_jobs         every live job with its body: one probe of the lane
--                     index per running job
-- So a read costs O(lanes + live jobs + batches claimed since the leader's
-- last health pass), whatever history is kept. For operators and tests;
-- the hot path never reads them.

-- {schema}.lane_entries: the ready entries past their lane's head, every
-- entry column; those a tombstone names were cancelled (or relocated: the
-- old copy), the others are the available jobs. OFFSET 0 keeps each lane's
-- range inside its lateral subquery (pulled up, it became a hash join over
-- every entry of every slot). The second bound, the sequence's last
-- position, never cuts (every visible entry's position was drawn before it
-- is read) but makes the estimate that of a range between two values
-- instead of a third of each slot. The lane's columns are lane_heads' own,
-- so a filter on queue reaches lane_heads (the subquery's are out of reach
-- behind the fence); other filters apply to each lane's rows.
CREATE OR REPLACE VIEW {schema}.lane_entries AS
SELECT e.slot, h.queue, h.priority, h.shard, e.lane_seq, e.job_id, e.kind, e.args, e.attempt,
       e.max_attempts, e.run_lease, e.created_at, e.ready_at, e.unique_key, e.metadata,
       e.attempts
  FROM {schema}.lane_heads h
 CROSS JOIN LATERAL (
        SELECT e.* FROM {schema}.ready_entries e
         WHERE e.queue = h.queue AND e.priority = h.priority AND e.shard = h.shard
           AND e.lane_seq > h.head_seq
           AND e.lane_seq <= (SELECT s.last_value FROM {schema}.ready_seq s)
        OFFSET 0) e;

-- {schema}.open_batch_items: every open item of a claim batch (no closure
-- link lists it), with what its batch says of it: running, or buffered
-- when its worker lists it in worker_buffers (claimed, waiting in the
-- worker's local buffer, not started; the worker rewrites that row at most
-- once a second, so the split is true to about a second). Batches below
-- claim_floor's floor are read only when the floor lists them as open;
-- from the floor on, every batch (claim_batches_batch_idx; the second
-- bound never cuts, as above). A batch's links are read once.
CREATE OR REPLACE VIEW {schema}.open_batch_items AS
SELECT u.job_id, b.queue,
       CASE WHEN u.job_id = ANY (w.job_ids) THEN 'buffered' ELSE 'running' END AS state,
       b.claimed_at, b.instance_id, b.slot AS claim_slot, b.batch_id, u.item::integer AS item,
       u.run_lease, u.attempt, u.ready_slot, u.ready_seq, u.priority, u.shard
  FROM (-- Each listed batch by its primary key (LATERAL + LIMIT: a probe,
        -- never a join over every batch).
        SELECT b.* FROM {schema}.claim_floor f
         CROSS JOIN LATERAL unnest(f.open_slots, f.open_batches) AS o(slot, batch_id)
         CROSS JOIN LATERAL (
                SELECT b.* FROM {schema}.claim_batches b
                 WHERE b.slot = o.slot AND b.batch_id = o.batch_id
                 LIMIT 1) b
        UNION ALL
        -- (No floor row, were it ever deleted: every batch.)
        SELECT b.* FROM {schema}.claim_batches b
         WHERE b.batch_id >= coalesce((SELECT f.floor FROM {schema}.claim_floor f), 0)
           AND b.batch_id <= (SELECT s.last_value FROM {schema}.claim_batch_seq s)) b
 CROSS JOIN LATERAL (
        -- A batch whose last link left nothing open is skipped with one
        -- probe, before its items are unnested: below, each item is
        -- tested against the list of closed ones, which costs items x
        -- closed per batch (after a drain, 145 closed batches of 512 cost
        -- 90 ms here, an idle check of `worker run --exit-when-idle`).
        SELECT 1 WHERE NOT EXISTS (
                   SELECT 1 FROM {schema}.claim_closures c
                    WHERE c.slot = b.slot AND c.batch_id = b.batch_id AND c.open_after = 0)) open
 CROSS JOIN LATERAL (
        SELECT coalesce(array_agg(x.item), '{}') AS items
          FROM {schema}.claim_closures c
         CROSS JOIN LATERAL unnest(c.items) AS x(item)
         WHERE c.slot = b.slot AND c.batch_id = b.batch_id) c
 CROSS JOIN LATERAL unnest(b.job_ids, b.run_leases, b.attempts, b.ready_slots, b.ready_seqs,
                           b.priorities, b.shards)
       WITH ORDINALITY AS u(job_id, run_lease, attempt, ready_slot, ready_seq, priority, shard, item)
  LEFT JOIN {schema}.worker_buffers w ON w.instance_id = b.instance_id
 WHERE NOT (u.item = ANY (c.items));

-- {schema}.live_job_states: every non-terminal job's id, queue, state and
-- `at` (when it became runnable, was claimed or is due), without reading a
-- running job's body. States as live_jobs has them.
CREATE OR REPLACE VIEW {schema}.live_job_states AS
SELECT e.job_id AS id, e.queue, 'available'::text AS state, e.ready_at AS at
  FROM {schema}.lane_entries e
 WHERE (SELECT true FROM {schema}.ready_tombstones t
         WHERE t.slot = e.slot AND t.job_id = e.job_id AND t.lane_seq = e.lane_seq
         LIMIT 1) IS NULL
UNION ALL
SELECT i.job_id, i.queue, i.state, i.claimed_at
  FROM {schema}.open_batch_items i
UNION ALL
SELECT p.job_id, p.queue,
       CASE WHEN EXISTS (SELECT 1 FROM {schema}.worker_buffers w
                          WHERE w.instance_id = p.instance_id AND p.job_id = ANY (w.job_ids))
            THEN 'buffered' ELSE 'running' END,
       p.claimed_at
  FROM {schema}.parked_attempts p
UNION ALL
SELECT d.job_id, d.queue,
       CASE d.reason WHEN 'retry' THEN 'retryable' WHEN 'released' THEN 'available' ELSE d.reason END,
       d.run_at
  FROM {schema}.deferred_jobs d;

-- {schema}.live_jobs / {schema}.jobs: every non-terminal job (live_jobs)
-- or every job (jobs) the substrate knows, with the state the planes
-- together give it.
--   available      ready entry past its lane head, not tombstoned
--   running        an open item of a claim batch (no closure link lists
--                  it), or a parked attempt, whose worker does not list it
--                  in worker_buffers (its handler has started)
--   buffered       the same, listed in its worker's worker_buffers row
--   scheduled / retryable / snoozed   deferred row (released: available)
--   completed / failed / cancelled    terminal_jobs
--   dead_lettered  dlq entry
-- attempts: the records of the job's ended attempts (ADR 11; a running
-- attempt is not among them). holder: the runtime (awa.runtimes
-- instance id) that claimed a running job; NULL in every other state.
-- Columns a query does not name are not computed (each branch is a
-- subquery whose unused outputs the planner drops).
-- Live rows are never hidden: a retired slot holds none unless a late
-- writer committed one there, and then it must show (and the slot is
-- un-retired by the next prune). Only terminal_jobs leaves retired slots out.
CREATE OR REPLACE VIEW {schema}.live_jobs AS
SELECT e.job_id AS id, e.queue, e.kind, e.args, e.priority, 'available'::text AS state,
       e.attempt, e.max_attempts, e.run_lease, e.created_at, e.ready_at AS at,
       NULL::text AS last_error, e.metadata, e.attempts, NULL::uuid AS holder
  FROM {schema}.lane_entries e
 WHERE (SELECT true FROM {schema}.ready_tombstones t
         WHERE t.slot = e.slot AND t.job_id = e.job_id AND t.lane_seq = e.lane_seq
         LIMIT 1) IS NULL
UNION ALL
SELECT i.job_id, i.queue, e.kind, e.args, e.priority, i.state, i.attempt, e.max_attempts,
       i.run_lease, e.created_at, i.claimed_at, NULL, e.metadata, e.attempts, i.instance_id
  FROM {schema}.open_batch_items i
  -- LATERAL + LIMIT: one index probe per item, whatever filters a caller adds.
 CROSS JOIN LATERAL (
        SELECT e.* FROM {schema}.ready_entries e
         WHERE e.slot = i.ready_slot AND e.queue = i.queue AND e.priority = i.priority
           AND e.shard = i.shard AND e.lane_seq = i.ready_seq AND e.job_id = i.job_id
         LIMIT 1) e
UNION ALL
SELECT p.job_id, p.queue, p.kind, p.args, p.priority,
       CASE WHEN EXISTS (SELECT 1 FROM {schema}.worker_buffers w
                          WHERE w.instance_id = p.instance_id AND p.job_id = ANY (w.job_ids))
            THEN 'buffered' ELSE 'running' END,
       p.attempt, p.max_attempts,
       p.run_lease, p.created_at, p.claimed_at, NULL, p.metadata, p.attempts, p.instance_id
  FROM {schema}.parked_attempts p
UNION ALL
SELECT d.job_id, d.queue, d.kind, d.args, d.priority,
       CASE d.reason WHEN 'retry' THEN 'retryable' WHEN 'released' THEN 'available' ELSE d.reason END,
       d.attempt, d.max_attempts, d.run_lease, d.created_at, d.run_at, d.last_error, d.metadata,
       d.attempts, NULL
  FROM {schema}.deferred_jobs d;

-- {schema}.jobs: live_jobs plus terminal history and dead letters.
CREATE OR REPLACE VIEW {schema}.jobs AS
SELECT * FROM {schema}.live_jobs
UNION ALL
SELECT t.id, t.queue, t.kind, t.args, t.priority, t.state, t.attempt, t.max_attempts,
       t.run_lease, t.created_at, t.finalized_at, t.last_error, t.metadata, t.attempts, NULL
  FROM {schema}.terminal_jobs t
UNION ALL
SELECT q.job_id, q.queue, q.kind, q.args, q.priority, 'dead_lettered', q.attempt, q.max_attempts,
       q.run_lease, q.created_at, q.dead_at, q.last_error, q.metadata, q.attempts, NULL
  FROM {schema}.dlq_entries q;
$awa_template$)
ON CONFLICT (name) DO UPDATE SET ord = EXCLUDED.ord, body = EXCLUDED.body;
INSERT INTO awa.substrate_functions (name, ord, body) VALUES ('jobs_page', 28, $awa_template$-- {schema}.jobs_page(queue, state, kind, args, before, limit): the rows of
-- the `jobs` view a list shows, newest (highest id) first: at most `limit`
-- jobs with an id below `before` (NULL: from the newest), each filter NULL
-- for any (args: jsonb containment). What list_jobs.sql and
-- list_jobs_page.sql read, instead of ordering the whole view, whose
-- terminal history (every completion the rings retain, one probe of the
-- lane index each) cost seconds to sort (17 s for a page of 50 after a
-- million completions).
--
-- Live jobs (bounded by live work): every live job's id, queue, state and
-- `at` from live_jobs' parts (lane_entries, open_batch_items, the parked
-- and deferred rows), newest first, the tombstones of waiting entries
-- probed on that order until the page is full, and only the page's bodies
-- read; with a filter on kind or args, every live job's body (live_jobs).
-- Terminal history and dead letters are read through
-- their id indexes, in a window of ids [lo, before) that starts just below
-- the newest id (awa.job_id_seq, through pg_sequences, which USAGE is
-- enough for) and widens eightfold until it holds `limit` matching jobs or
-- reaches id 1: every job newer than lo is in the window, so the newest
-- `limit` of it are the newest of all. done_batches rows are found by the
-- id range they cover (done_batches_jobs_idx), done_entries,
-- failure_entries and dlq_entries by their job id; only the jobs returned
-- are hydrated from their body (a completion's is in its ready slot). So a
-- page costs its live jobs plus what its window holds: the newest page
-- reads the last few completions, whatever is retained. A filter that
-- matches little (a kind, args) widens the window until it has found a
-- page, as far as the history goes.
-- Retired slots are left out, as terminal_jobs does. STABLE: every
-- statement sees the caller's snapshot. Generic plans: each statement is
-- planned once per session (planning one over every partition of the
-- rings costs more than running it); jit = off: their estimates follow
-- the windows' guesses, not what a window holds.
--
-- Bounds (SQLSTATE 22023, before anything is read): limit within
-- awa_core::bounds::LIST_LIMIT, 1 to 10000.
CREATE OR REPLACE FUNCTION {schema}.jobs_page(
    p_queue text, p_state text, p_kind text, p_args jsonb, p_before bigint, p_limit integer
) RETURNS SETOF {schema}.jobs LANGUAGE plpgsql STABLE ROWS 50
SET plan_cache_mode = force_generic_plan SET jit = off AS $fn$
DECLARE
    v_newest bigint;
    v_lo     bigint;
    v_span   bigint;
    v_found  integer := 0;
    v_live   boolean := p_state IS NULL
                        OR p_state NOT IN ('completed', 'failed', 'cancelled', 'dead_lettered');
    v_done   boolean := p_state IS NULL
                        OR p_state IN ('completed', 'failed', 'cancelled', 'dead_lettered');
BEGIN
    IF p_limit IS NULL OR p_limit NOT BETWEEN 1 AND 10000 THEN
        RAISE EXCEPTION 'jobs_page: limit must be 1 to 10000 (got %)', coalesce(p_limit::text, 'NULL')
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'A page holds 1 to 10000 jobs (awa_core::bounds::LIST_LIMIT); page on with `before`.';
    END IF;
    IF v_done THEN
        v_newest := coalesce(p_before - 1,
                             (SELECT s.last_value FROM pg_catalog.pg_sequences s
                               WHERE s.schemaname = 'awa' AND s.sequencename = 'job_id_seq'));
        v_span := greatest(p_limit, 16)::bigint * 4;
        WHILE v_newest IS NOT NULL LOOP
            v_lo := greatest(v_newest - v_span + 1, 1);
            SELECT count(*) INTO v_found FROM (
                SELECT 1
                  FROM (SELECT d.job_id AS id
                          FROM {schema}.done_entries d
                         WHERE d.job_id >= v_lo AND (p_before IS NULL OR d.job_id < p_before)
                           AND (p_queue IS NULL OR d.queue = p_queue)
                           AND (p_state IS NULL OR d.state = p_state)
                           AND (p_kind IS NULL OR d.body ->> 'kind' = p_kind)
                           AND (p_args IS NULL OR d.body -> 'args' @> p_args)
                           AND NOT EXISTS (SELECT 1 FROM {schema}.ring_retirements x
                                            WHERE x.ring = 'queue' AND x.slot = d.slot)
                        UNION ALL
                        SELECT u.job_id
                          FROM {schema}.done_batches b
                         CROSS JOIN LATERAL unnest(b.job_ids, b.ready_seqs, b.priorities, b.shards)
                               AS u(job_id, ready_seq, priority, shard)
                         WHERE int8range(b.lo_job_id, b.hi_job_id, '[]') && int8range(v_lo, p_before)
                           AND u.job_id >= v_lo AND (p_before IS NULL OR u.job_id < p_before)
                           AND (p_queue IS NULL OR b.queue = p_queue)
                           AND (p_state IS NULL OR p_state = 'completed')
                           AND NOT EXISTS (SELECT 1 FROM {schema}.ring_retirements x
                                            WHERE x.ring = 'queue' AND x.slot = b.slot)
                           -- kind and args are in the body: looked up only
                           -- when asked for.
                           AND (p_kind IS NULL AND p_args IS NULL
                                OR (SELECT true FROM {schema}.ready_entries r
                                     WHERE r.slot = b.slot AND r.queue = b.queue
                                       AND r.priority = u.priority AND r.shard = u.shard
                                       AND r.lane_seq = u.ready_seq AND r.job_id = u.job_id
                                       AND (p_kind IS NULL OR r.kind = p_kind)
                                       AND (p_args IS NULL OR r.args @> p_args)
                                     LIMIT 1))
                        UNION ALL
                        SELECT f.job_id
                          FROM {schema}.failure_entries f
                         WHERE f.job_id >= v_lo AND (p_before IS NULL OR f.job_id < p_before)
                           AND (p_queue IS NULL OR f.queue = p_queue)
                           AND (p_state IS NULL OR f.state = p_state)
                           AND (p_kind IS NULL OR f.kind = p_kind)
                           AND (p_args IS NULL OR f.args @> p_args)
                        UNION ALL
                        SELECT q.job_id
                          FROM {schema}.dlq_entries q
                         WHERE q.job_id >= v_lo AND (p_before IS NULL OR q.job_id < p_before)
                           AND (p_queue IS NULL OR q.queue = p_queue)
                           AND (p_state IS NULL OR p_state = 'dead_lettered')
                           AND (p_kind IS NULL OR q.kind = p_kind)
                           AND (p_args IS NULL OR q.args @> p_args)) w
                 LIMIT p_limit) n;
            EXIT WHEN v_found >= p_limit OR v_lo = 1;
            v_span := least(v_span, v_newest) * 8;
        END LOOP;
    END IF;

    RETURN QUERY
    SELECT r.* FROM (
        -- Live jobs with a filter on kind or args: every row's body.
        (SELECT l.* FROM {schema}.live_jobs l
          WHERE v_live AND (p_kind IS NOT NULL OR p_args IS NOT NULL)
            AND (p_queue IS NULL OR l.queue = p_queue) AND (p_state IS NULL OR l.state = p_state)
            AND (p_kind IS NULL OR l.kind = p_kind) AND (p_args IS NULL OR l.args @> p_args)
            AND (p_before IS NULL OR l.id < p_before)
          ORDER BY l.id DESC
          LIMIT p_limit)
        UNION ALL
        -- Live jobs otherwise: live_jobs' branches, newest first by what
        -- each already has at hand, then the tombstone probe of waiting
        -- entries on that order until the page is full (above the OFFSET 0
        -- fence, so it is not run for every entry before the sort), then
        -- the bodies of the page's entries and claimed jobs.
        (SELECT k.id, k.queue,
                CASE WHEN k.src = 'row' THEN k.kind ELSE e.kind END,
                CASE WHEN k.src = 'row' THEN k.args ELSE e.args END,
                k.priority, k.state,
                CASE WHEN k.src = 'entry' THEN e.attempt ELSE k.attempt END,
                CASE WHEN k.src = 'row' THEN k.max_attempts ELSE e.max_attempts END,
                CASE WHEN k.src = 'entry' THEN e.run_lease ELSE k.run_lease END,
                CASE WHEN k.src = 'row' THEN k.created_at ELSE e.created_at END,
                k.at, k.last_error,
                CASE WHEN k.src = 'row' THEN k.metadata ELSE e.metadata END,
                CASE WHEN k.src = 'row' THEN k.attempts ELSE e.attempts END,
                k.holder
           FROM (SELECT c.* FROM (
                     SELECT x.* FROM (
                         SELECT e.job_id AS id, e.queue, 'available'::text AS state,
                                e.ready_at AS at, NULL::uuid AS holder, NULL::bigint AS run_lease,
                                NULL::integer AS attempt, NULL::text AS last_error,
                                NULL::text AS kind, NULL::jsonb AS args, e.priority,
                                NULL::integer AS max_attempts, NULL::timestamptz AS created_at,
                                NULL::jsonb AS metadata, NULL::jsonb AS attempts,
                                'entry'::text AS src, e.slot, e.shard, e.lane_seq
                           FROM {schema}.lane_entries e
                          WHERE (p_queue IS NULL OR e.queue = p_queue)
                            AND (p_state IS NULL OR p_state = 'available')
                            AND (p_before IS NULL OR e.job_id < p_before)
                         UNION ALL
                         SELECT i.job_id, i.queue, i.state, i.claimed_at, i.instance_id,
                                i.run_lease, i.attempt, NULL, NULL, NULL, i.priority, NULL, NULL,
                                NULL, NULL, 'item', i.ready_slot, i.shard, i.ready_seq
                           FROM {schema}.open_batch_items i
                          WHERE (p_queue IS NULL OR i.queue = p_queue)
                            AND (p_state IS NULL OR i.state = p_state)
                            AND (p_before IS NULL OR i.job_id < p_before)
                         UNION ALL
                         SELECT l.id, l.queue, l.state, l.at, l.holder, l.run_lease, l.attempt,
                                l.last_error, l.kind, l.args, l.priority, l.max_attempts,
                                l.created_at, l.metadata, l.attempts, 'row', NULL, NULL, NULL
                           FROM (SELECT p.job_id AS id, p.queue,
                                        CASE WHEN EXISTS (SELECT 1 FROM {schema}.worker_buffers w
                                                           WHERE w.instance_id = p.instance_id
                                                             AND p.job_id = ANY (w.job_ids))
                                             THEN 'buffered' ELSE 'running' END AS state,
                                        p.claimed_at AS at, p.instance_id AS holder, p.run_lease,
                                        p.attempt, NULL::text AS last_error, p.kind, p.args,
                                        p.priority, p.max_attempts, p.created_at, p.metadata,
                                        p.attempts
                                   FROM {schema}.parked_attempts p
                                 UNION ALL
                                 SELECT d.job_id, d.queue,
                                        CASE d.reason WHEN 'retry' THEN 'retryable'
                                                      WHEN 'released' THEN 'available'
                                                      ELSE d.reason END,
                                        d.run_at, NULL, d.run_lease, d.attempt, d.last_error,
                                        d.kind, d.args, d.priority, d.max_attempts, d.created_at,
                                        d.metadata, d.attempts
                                   FROM {schema}.deferred_jobs d) l
                          WHERE (p_queue IS NULL OR l.queue = p_queue)
                            AND (p_state IS NULL OR l.state = p_state)
                            AND (p_before IS NULL OR l.id < p_before)) x
                      WHERE v_live AND p_kind IS NULL AND p_args IS NULL
                      ORDER BY x.id DESC
                     OFFSET 0) c
                  WHERE c.src <> 'entry'
                     OR (SELECT true FROM {schema}.ready_tombstones t
                          WHERE t.slot = c.slot AND t.job_id = c.id AND t.lane_seq = c.lane_seq
                          LIMIT 1) IS NULL
                  LIMIT p_limit) k
           LEFT JOIN LATERAL (
                 SELECT e.* FROM {schema}.ready_entries e
                  WHERE k.src <> 'row' AND e.slot = k.slot AND e.queue = k.queue
                    AND e.priority = k.priority AND e.shard = k.shard
                    AND e.lane_seq = k.lane_seq AND e.job_id = k.id
                  LIMIT 1) e ON true)
        UNION ALL
        -- The window's newest, then their bodies.
        (SELECT k.id, k.queue, coalesce(k.kind, e.kind), coalesce(k.args, e.args),
                coalesce(k.priority, e.priority), k.state, k.attempt,
                coalesce(k.max_attempts, e.max_attempts), k.run_lease,
                coalesce(k.created_at, e.created_at), k.at, k.last_error,
                CASE WHEN k.batch THEN e.metadata ELSE k.metadata END,
                CASE WHEN k.batch
                     THEN coalesce(e.attempts, '[]'::jsonb) || jsonb_build_array(jsonb_build_object(
                              'attempt', k.attempt, 'ended_at', k.at, 'outcome', 'completed'))
                     ELSE k.attempts END,
                NULL::uuid
           FROM (SELECT w.* FROM (
                     SELECT d.job_id AS id, d.queue, d.body ->> 'kind' AS kind, d.body -> 'args' AS args,
                            (d.body ->> 'priority')::smallint AS priority, d.state, d.attempt,
                            (d.body ->> 'max_attempts')::integer AS max_attempts, d.run_lease,
                            (d.body ->> 'created_at')::timestamptz AS created_at, d.finalized_at AS at,
                            d.last_error, d.body -> 'metadata' AS metadata, d.attempts,
                            false AS batch, NULL::integer AS slot, NULL::smallint AS shard,
                            NULL::bigint AS ready_seq
                       FROM {schema}.done_entries d
                      WHERE v_done AND d.job_id >= v_lo AND (p_before IS NULL OR d.job_id < p_before)
                        AND (p_queue IS NULL OR d.queue = p_queue)
                        AND (p_state IS NULL OR d.state = p_state)
                        AND (p_kind IS NULL OR d.body ->> 'kind' = p_kind)
                        AND (p_args IS NULL OR d.body -> 'args' @> p_args)
                        AND NOT EXISTS (SELECT 1 FROM {schema}.ring_retirements x
                                         WHERE x.ring = 'queue' AND x.slot = d.slot)
                     UNION ALL
                     SELECT u.job_id, b.queue, NULL, NULL, u.priority, 'completed', u.attempt, NULL,
                            u.run_lease, NULL, b.finalized_at, NULL, NULL, NULL,
                            true, b.slot, u.shard, u.ready_seq
                       FROM {schema}.done_batches b
                      CROSS JOIN LATERAL unnest(b.job_ids, b.run_leases, b.attempts, b.ready_seqs,
                                                b.priorities, b.shards)
                            AS u(job_id, run_lease, attempt, ready_seq, priority, shard)
                      WHERE v_done
                        AND int8range(b.lo_job_id, b.hi_job_id, '[]') && int8range(v_lo, p_before)
                        AND u.job_id >= v_lo AND (p_before IS NULL OR u.job_id < p_before)
                        AND (p_queue IS NULL OR b.queue = p_queue)
                        AND (p_state IS NULL OR p_state = 'completed')
                        AND NOT EXISTS (SELECT 1 FROM {schema}.ring_retirements x
                                         WHERE x.ring = 'queue' AND x.slot = b.slot)
                        AND (p_kind IS NULL AND p_args IS NULL
                             OR (SELECT true FROM {schema}.ready_entries r
                                  WHERE r.slot = b.slot AND r.queue = b.queue
                                    AND r.priority = u.priority AND r.shard = u.shard
                                    AND r.lane_seq = u.ready_seq AND r.job_id = u.job_id
                                    AND (p_kind IS NULL OR r.kind = p_kind)
                                    AND (p_args IS NULL OR r.args @> p_args)
                                  LIMIT 1))
                     UNION ALL
                     SELECT f.job_id, f.queue, f.kind, f.args, f.priority, f.state, f.attempt,
                            f.max_attempts, f.run_lease, f.created_at, f.finalized_at, f.last_error,
                            f.metadata, f.attempts, false, NULL, NULL, NULL
                       FROM {schema}.failure_entries f
                      WHERE v_done AND f.job_id >= v_lo AND (p_before IS NULL OR f.job_id < p_before)
                        AND (p_queue IS NULL OR f.queue = p_queue)
                        AND (p_state IS NULL OR f.state = p_state)
                        AND (p_kind IS NULL OR f.kind = p_kind)
                        AND (p_args IS NULL OR f.args @> p_args)
                     UNION ALL
                     SELECT q.job_id, q.queue, q.kind, q.args, q.priority, 'dead_lettered', q.attempt,
                            q.max_attempts, q.run_lease, q.created_at, q.dead_at, q.last_error,
                            q.metadata, q.attempts, false, NULL, NULL, NULL
                       FROM {schema}.dlq_entries q
                      WHERE v_done AND q.job_id >= v_lo AND (p_before IS NULL OR q.job_id < p_before)
                        AND (p_queue IS NULL OR q.queue = p_queue)
                        AND (p_state IS NULL OR p_state = 'dead_lettered')
                        AND (p_kind IS NULL OR q.kind = p_kind)
                        AND (p_args IS NULL OR q.args @> p_args)) w
                  ORDER BY w.id DESC
                  LIMIT p_limit) k
           -- A completion's body, one probe of the lane index (LATERAL +
           -- LIMIT, as terminal_jobs).
           LEFT JOIN LATERAL (
                 SELECT e.* FROM {schema}.ready_entries e
                  WHERE k.batch AND e.slot = k.slot AND e.queue = k.queue
                    AND e.priority = k.priority AND e.shard = k.shard
                    AND e.lane_seq = k.ready_seq AND e.job_id = k.id
                  LIMIT 1) e ON true)
    ) r
    ORDER BY r.id DESC
    LIMIT p_limit;
END
$fn$;
$awa_template$)
ON CONFLICT (name) DO UPDATE SET ord = EXCLUDED.ord, body = EXCLUDED.body;
INSERT INTO awa.substrate_functions (name, ord, body) VALUES ('rescue_stale', 23, $awa_template$-- {schema}.rescue_stale(stale, limit): finish abandoned attempts as
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
$awa_template$)
ON CONFLICT (name) DO UPDATE SET ord = EXCLUDED.ord, body = EXCLUDED.body;
INSERT INTO awa.substrate_functions (name, ord, body) VALUES ('ring_helpers', 34, $awa_template$-- Small helpers of ring_rotate and ring_prune.
--
-- Bounds: every function here that takes a ring or a slot refuses an
-- unknown ring (ring_slot_count) and a slot outside 0 .. slots - 1 with
-- SQLSTATE 22023, as every runtime function refuses what awa_core::bounds
-- refuses: the runtime role may call them directly. (The slot check is
-- written out in each function rather than a helper of its own: a new
-- runtime function would need EXECUTE granted to existing runtime roles
-- on upgrade.)

-- {schema}.ring_slot_empty(ring, slot): whether every table of a ring slot
-- is empty. The families per ring are listed in ring_families.
CREATE OR REPLACE FUNCTION {schema}.ring_slot_empty(p_ring text, p_slot integer)
RETURNS boolean LANGUAGE plpgsql STABLE AS $fn$
DECLARE
    v_family text;
    v_found  boolean;
BEGIN
    -- A slot of this ring (ring_slot_count refuses an unknown ring).
    IF p_slot IS NULL OR p_slot NOT BETWEEN 0 AND {schema}.ring_slot_count(p_ring) - 1 THEN
        RAISE EXCEPTION 'slot % is not a slot of the % ring', coalesce(p_slot::text, 'NULL'), p_ring
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'Slots are numbered from 0 to the ring''s slot count - 1 (substrate_info).';
    END IF;
    FOREACH v_family IN ARRAY {schema}.ring_families(p_ring) LOOP
        EXECUTE format('SELECT EXISTS (SELECT 1 FROM %s.%I)', '{schema}', v_family || '_' || p_slot)
           INTO v_found;
        IF v_found THEN
            RETURN false;
        END IF;
    END LOOP;
    RETURN true;
END
$fn$;

-- {schema}.ring_families(ring): the partitioned tables a ring's slots span.
-- Every family of a ring is truncated together, as one unit. An unknown
-- ring is an error (22023), not a NULL a caller would loop over.
CREATE OR REPLACE FUNCTION {schema}.ring_families(p_ring text)
RETURNS text[] LANGUAGE plpgsql IMMUTABLE AS $fn$
BEGIN
    CASE p_ring
        WHEN 'queue' THEN
            RETURN ARRAY['ready_entries', 'ready_tombstones', 'done_entries', 'done_batches', 'count_deltas'];
        WHEN 'claim' THEN
            RETURN ARRAY['claim_batches', 'claim_closures'];
        WHEN 'lease' THEN
            RETURN ARRAY['leases'];
        ELSE
            RAISE EXCEPTION 'unknown ring %', coalesce(p_ring, 'NULL') USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'Rings are queue, lease and claim.';
    END CASE;
END
$fn$;

-- {schema}.ring_slot_count(ring): how many slots a ring has; an unknown
-- ring name is an error, not a NULL that would read as "no slots".
CREATE OR REPLACE FUNCTION {schema}.ring_slot_count(p_ring text)
RETURNS integer LANGUAGE plpgsql STABLE AS $fn$
DECLARE
    v_slots integer;
BEGIN
    SELECT CASE p_ring WHEN 'queue' THEN i.queue_slot_count
                       WHEN 'lease' THEN i.lease_slot_count
                       WHEN 'claim' THEN i.claim_slot_count END
      INTO v_slots FROM {schema}.substrate_info i;
    IF v_slots IS NULL THEN
        RAISE EXCEPTION 'unknown ring %', coalesce(p_ring, 'NULL') USING ERRCODE = 'invalid_parameter_value',
              HINT = 'Rings are queue, lease and claim.';
    END IF;
    RETURN v_slots;
END
$fn$;

-- {schema}.ring_slot_live(ring, slot): why a slot still holds live data, or
-- NULL: the ready plane's predicate for the queue ring, then the execution
-- plane's for every ring.
CREATE OR REPLACE FUNCTION {schema}.ring_slot_live(p_ring text, p_slot integer)
RETURNS text LANGUAGE plpgsql STABLE AS $fn$
BEGIN
    -- A slot of this ring (ring_slot_count refuses an unknown ring).
    IF p_slot IS NULL OR p_slot NOT BETWEEN 0 AND {schema}.ring_slot_count(p_ring) - 1 THEN
        RAISE EXCEPTION 'slot % is not a slot of the % ring', coalesce(p_slot::text, 'NULL'), p_ring
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'Slots are numbered from 0 to the ring''s slot count - 1 (substrate_info).';
    END IF;
    RETURN coalesce(CASE WHEN p_ring = 'queue' THEN {schema}.ready_slot_live(p_slot) END,
                    {schema}.exec_slot_live(p_ring, p_slot));
END
$fn$;

-- {schema}.ring_slot_sealed_at(ring, slot): when the ring last moved off a
-- slot that is not its current one. Rotation always moves to the next slot,
-- so generation g writes slot g % slots, and the slot was sealed by the
-- generation after the last one that wrote it: one primary-key probe.
CREATE OR REPLACE FUNCTION {schema}.ring_slot_sealed_at(p_ring text, p_slot integer)
RETURNS timestamptz LANGUAGE plpgsql STABLE AS $fn$
#variable_conflict use_column
DECLARE
    v_slots integer := {schema}.ring_slot_count(p_ring);
BEGIN
    -- A slot of this ring (ring_slot_count refuses an unknown ring).
    IF p_slot IS NULL OR p_slot NOT BETWEEN 0 AND {schema}.ring_slot_count(p_ring) - 1 THEN
        RAISE EXCEPTION 'slot % is not a slot of the % ring', coalesce(p_slot::text, 'NULL'), p_ring
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'Slots are numbered from 0 to the ring''s slot count - 1 (substrate_info).';
    END IF;
    RETURN (
        WITH cur AS (
            SELECT l.generation, l.slot FROM {schema}.ring_ledger l
             WHERE l.ring = p_ring ORDER BY l.generation DESC LIMIT 1
        )
        SELECT l.rotated_at
          FROM cur c
          JOIN {schema}.ring_ledger l
            ON l.ring = p_ring
           AND l.generation = c.generation - ((c.slot - p_slot + v_slots) % v_slots) + 1);
END
$fn$;

-- {schema}.ring_slot_fresh(ring, slot): whether the current slot holds a row
-- worth sealing. Rows ready_relocate copied in keep the original's older
-- ready_at; a slot whose only rows are such copies still waiting has
-- nothing new, and rotating it would only carry the same stragglers round
-- the ring for ever. Every other row counts, a claimed copy included (it is
-- dead and the slot may then go).
CREATE OR REPLACE FUNCTION {schema}.ring_slot_fresh(p_ring text, p_slot integer)
RETURNS boolean LANGUAGE plpgsql STABLE AS $fn$
DECLARE
    v_since timestamptz;
BEGIN
    -- A slot of this ring (ring_slot_count refuses an unknown ring).
    IF p_slot IS NULL OR p_slot NOT BETWEEN 0 AND {schema}.ring_slot_count(p_ring) - 1 THEN
        RAISE EXCEPTION 'slot % is not a slot of the % ring', coalesce(p_slot::text, 'NULL'), p_ring
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'Slots are numbered from 0 to the ring''s slot count - 1 (substrate_info).';
    END IF;
    IF p_ring <> 'queue' THEN
        RETURN NOT {schema}.ring_slot_empty(p_ring, p_slot);
    END IF;
    SELECT l.rotated_at INTO v_since FROM {schema}.ring_ledger l
     WHERE l.ring = 'queue' ORDER BY l.generation DESC LIMIT 1;
    RETURN EXISTS (SELECT 1 FROM {schema}.ready_entries e
                     JOIN {schema}.lane_heads h
                       ON h.queue = e.queue AND h.priority = e.priority AND h.shard = e.shard
                    WHERE e.slot = p_slot AND (e.ready_at >= v_since OR e.lane_seq <= h.head_seq))
        OR EXISTS (SELECT 1 FROM {schema}.ready_tombstones t WHERE t.slot = p_slot)
        OR EXISTS (SELECT 1 FROM {schema}.done_entries d WHERE d.slot = p_slot)
        OR EXISTS (SELECT 1 FROM {schema}.done_batches d WHERE d.slot = p_slot)
        OR EXISTS (SELECT 1 FROM {schema}.count_deltas c WHERE c.slot = p_slot);
END
$fn$;
$awa_template$)
ON CONFLICT (name) DO UPDATE SET ord = EXCLUDED.ord, body = EXCLUDED.body;
INSERT INTO awa.substrate_functions (name, ord, body) VALUES ('ring_prune', 36, $awa_template$-- {schema}.ring_prune(ring, lock_timeout_ms, rotate_interval): reclaim a
-- sealed slot of a ring, in two phases, one per call:
--
-- 1. retire: walk the sealed slots that hold rows, oldest first, and retire
--    the first one proven to hold nothing live (ready_slot_live /
--    exec_slot_live): fold its count deltas into the rollups and commit a
--    retirement marker. From then on the read views leave the slot's
--    terminal facts out for every snapshot that sees the marker.
--    * A live slot is evacuated first when it is the one the ring rotates
--      onto next (the oldest), and, in the queue ring, whenever it is past
--      its retention: waiting jobs move to the current slot keeping their
--      lane position (ready_relocate), open attempts move out of the rings
--      (exec_park). So one straggler, an unserved queue or a job that runs
--      for hours, never stops the ring, and an idle queue ring does not
--      keep a slot of dead rows behind one.
--    * A younger slot that is still live is looked past: a dead slot behind
--      it is still reclaimed.
--    * Queue-ring slots hold terminal history, so one is retired only once
--      it has been sealed for the retention: substrate_info.history_retention
--      when set, else (queue slots - 2) x rotate_interval (history is kept
--      for about the whole ring and one slot is always ready for the next
--      rotation). A younger slot is younger still, so the walk stops there
--      ('retained').
-- 2. truncate (a later call): once no snapshot in this database predates the
--    marker (TRUNCATE is not MVCC-safe, so an older snapshot would see rows
--    vanish), take ACCESS EXCLUSIVE locks on the slot's tables under a short
--    lock_timeout (a writer that picked the slot before it was sealed and
--    has not committed holds a conflicting lock: we time out and retry
--    later), prove again that nothing is live (the late writer may have
--    committed meanwhile), and TRUNCATE every table of the slot together.
--    A slot found live again is un-retired.
--
-- Bounds (awa_core::bounds, refused with SQLSTATE 22023 before anything is
-- read): lock_timeout_ms within PRUNE_LOCK_TIMEOUT, 1 ms to 10 s (0 would
-- be no timeout: the ACCESS EXCLUSIVE request would queue every writer of
-- the ring behind it until the slot's last reader ends); rotate_interval
-- within ROTATE_INTERVAL, 10 ms to 1 day (it sets the default history
-- retention; set substrate_info.history_retention to keep none).
-- For the queue ring, every call also moves ready_sealed first (ready_seal).
--
-- Returns one row: outcome ('retired', 'pruned', 'nothing_to_prune',
-- 'retained', 'live_rows', 'snapshot_pinned', 'busy', 'horizon_unknown',
-- 'lost_race': another pruner retired the slot first), the slot, and a
-- detail for operators. Anything unproven is a skip, never a truncate.
CREATE OR REPLACE FUNCTION {schema}.ring_prune(
    p_ring text, p_lock_timeout_ms integer, p_rotate_interval interval
)
RETURNS TABLE (outcome text, slot integer, detail text)
LANGUAGE plpgsql AS $fn$
#variable_conflict use_column
DECLARE
    v_slots   integer;
    v_cur     integer;
    v_slot    integer;
    v_xid     xid8;
    v_live    text;
    v_blocker record;
    v_family  text;
    v_tables  text[] := '{}';
    v_old_timeout text;
    v_min_age interval := interval '0';
    v_s       integer;
    v_moved   integer := 0;
    v_parked  integer := 0;
    v_first   text;
    k integer;
BEGIN
    v_slots := {schema}.ring_slot_count(p_ring);
    IF p_lock_timeout_ms IS NULL OR p_lock_timeout_ms NOT BETWEEN 1 AND 10000 THEN
        RAISE EXCEPTION 'ring_prune: lock timeout must be 1 to 10000 ms (got %)',
                        coalesce(p_lock_timeout_ms::text, 'NULL')
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'Writers of the ring queue behind the truncation''s lock request while it waits; the leader uses 200 ms.';
    END IF;
    IF p_rotate_interval IS NULL
       OR p_rotate_interval NOT BETWEEN interval '10 milliseconds' AND interval '1 day' THEN
        RAISE EXCEPTION 'ring_prune: rotate interval must be 10ms to 1day (got %)',
                        coalesce(p_rotate_interval::text, 'NULL')
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'Pass the leader''s rotate interval (awa maint run --rotate-interval); it sets the default history retention. To keep no history, set substrate_info.history_retention to 0 (awa storage configure --history-retention 0s).';
    END IF;
    -- The queue ring's seal moves with each pass (ready_seal), before the
    -- pass writes anything: a proposal's fence is the id of a transaction
    -- that had none before the check, so a pass that relocated, parked or
    -- retired something first could never propose. With the seal called
    -- last, a backlog in a slot past its retention (relocated 1,000 jobs a
    -- pass) starved the seal for backlog / 1,000 passes, and with it
    -- low_gen, the claim's bound on the slots it reads.
    IF p_ring = 'queue' THEN
        PERFORM {schema}.ready_seal();
    END IF;

    SELECT l.slot INTO v_cur FROM {schema}.ring_ledger l WHERE l.ring = p_ring
     ORDER BY l.generation DESC LIMIT 1;

    SELECT x.slot, x.retired_xid INTO v_slot, v_xid
      FROM {schema}.ring_retirements x WHERE x.ring = p_ring
     ORDER BY x.retired_at LIMIT 1;

    IF v_slot IS NULL THEN
        -- Phase 1.
        IF p_ring = 'queue' THEN
            SELECT coalesce(i.history_retention, greatest(v_slots - 2, 0) * p_rotate_interval)
              INTO v_min_age FROM {schema}.substrate_info i;
        END IF;
        FOR k IN 1 .. v_slots - 1 LOOP
            v_s := (v_cur + k) % v_slots;
            CONTINUE WHEN {schema}.ring_slot_empty(p_ring, v_s);
            IF v_min_age > interval '0'
               AND {schema}.ring_slot_sealed_at(p_ring, v_s) > now() - v_min_age THEN
                IF v_first IS NULL THEN
                    outcome := 'retained';
                    v_slot := v_s;
                    detail := format('history is retained until %s',
                                     {schema}.ring_slot_sealed_at(p_ring, v_s) + v_min_age);
                END IF;
                EXIT;
            END IF;
            v_live := {schema}.ring_slot_live(p_ring, v_s);
            IF v_live IS NOT NULL AND (k = 1 OR p_ring = 'queue') THEN
                -- Move what keeps it live: always for the slot the ring
                -- rotates onto next; for the queue ring, for every slot
                -- past its retention, so an idle ring does not keep a
                -- slot of dead rows behind one straggler. (Relocated
                -- copies are not fresh, so this never makes the ring
                -- rotate by itself.)
                IF p_ring = 'queue' THEN
                    v_moved := {schema}.ready_relocate(v_s, 1000);
                END IF;
                v_parked := {schema}.exec_park(p_ring, v_s, 1000);
                v_live := {schema}.ring_slot_live(p_ring, v_s);
            END IF;
            IF v_live IS NULL THEN
                IF p_ring = 'queue' THEN
                    PERFORM {schema}.history_retire_slot(v_s);
                END IF;
                INSERT INTO {schema}.ring_retirements (ring, slot, retired_xid)
                VALUES (p_ring, v_s, pg_current_xact_id())
                ON CONFLICT DO NOTHING;
                v_slot := v_s;
                IF FOUND THEN
                    outcome := 'retired';
                    detail := nullif(concat_ws(', ',
                        CASE WHEN v_moved > 0 THEN format('moved %s waiting jobs to slot %s', v_moved, v_cur) END,
                        CASE WHEN v_parked > 0 THEN format('parked %s running attempts', v_parked) END,
                        CASE WHEN v_first IS NOT NULL THEN 'looked past ' || v_first END), '');
                ELSE
                    outcome := 'lost_race';
                    detail := 'another pruner retired it first';
                END IF;
                EXIT;
            END IF;
            v_first := coalesce(v_first, format('slot %s (%s)', v_s, v_live));
            IF outcome IS NULL THEN
                outcome := 'live_rows';
                v_slot := v_s;
                detail := v_live || CASE WHEN v_moved + v_parked > 0
                    THEN format(' (moved %s waiting jobs, parked %s attempts; more next time)', v_moved, v_parked)
                    ELSE '' END;
            END IF;
        END LOOP;
        IF outcome IS NULL THEN
            outcome := 'nothing_to_prune';
        END IF;
    ELSE
        -- Phase 2. Other roles' snapshots are only visible with
        -- pg_read_all_stats; without it we cannot prove snapshot safety.
        IF NOT (pg_has_role('pg_read_all_stats', 'MEMBER')
                OR (SELECT rolsuper FROM pg_roles WHERE rolname = current_user)) THEN
            outcome := 'horizon_unknown';
            detail := 'the maintenance role needs pg_read_all_stats to see other sessions'' snapshots';
        ELSE
            -- pg_stat_activity is read once per transaction and kept; this
            -- transaction may have read it before the marker committed
            -- (ready_seal above, or a caller), and a snapshot taken since
            -- then, older than the marker, would be missing from that copy.
            PERFORM pg_stat_clear_snapshot();
            SELECT a.pid, extract(epoch FROM now() - coalesce(a.xact_start, a.backend_start))::bigint AS age
              INTO v_blocker
              FROM pg_stat_activity a
             WHERE a.datname = current_database()
               AND a.pid <> pg_backend_pid()
               AND a.backend_xmin IS NOT NULL
               AND age(a.backend_xmin) >= age(v_xid::xid)
             ORDER BY age(a.backend_xmin) DESC
             LIMIT 1;
            IF v_blocker.pid IS NOT NULL THEN
                outcome := 'snapshot_pinned';
                detail := format('backend pid %s holds a snapshot %s s old', v_blocker.pid, v_blocker.age);
            ELSE
                FOREACH v_family IN ARRAY {schema}.ring_families(p_ring) LOOP
                    v_tables := v_tables || format('%s.%I', '{schema}', v_family || '_' || v_slot);
                END LOOP;
                v_old_timeout := current_setting('lock_timeout');
                PERFORM set_config('lock_timeout', p_lock_timeout_ms || 'ms', true);
                BEGIN
                    EXECUTE 'LOCK TABLE ' || array_to_string(v_tables, ', ') || ' IN ACCESS EXCLUSIVE MODE';
                    outcome := NULL;
                EXCEPTION WHEN lock_not_available THEN
                    outcome := 'busy';
                    detail := 'a writer still holds the slot; retrying later';
                END;
                PERFORM set_config('lock_timeout', v_old_timeout, true);
                -- Another pruner may have truncated the slot while we
                -- waited for the lock (and the ring may already write to
                -- it again): only a slot still marked retired is ours.
                IF outcome IS NULL AND NOT EXISTS (
                        SELECT 1 FROM {schema}.ring_retirements x
                         WHERE x.ring = p_ring AND x.slot = v_slot) THEN
                    outcome := 'lost_race';
                    detail := 'another pruner truncated it first';
                END IF;
                IF outcome IS NULL THEN
                    v_live := {schema}.ring_slot_live(p_ring, v_slot);
                    IF v_live IS NOT NULL THEN
                        DELETE FROM {schema}.ring_retirements x WHERE x.ring = p_ring AND x.slot = v_slot;
                        outcome := 'live_rows';
                        detail := v_live || ' (a late writer); slot un-retired';
                    ELSE
                        -- A late writer may have added count deltas since
                        -- the retirement folded them; fold those too.
                        IF p_ring = 'queue' THEN
                            PERFORM {schema}.history_retire_slot(v_slot);
                        END IF;
                        EXECUTE 'TRUNCATE ' || array_to_string(v_tables, ', ');
                        DELETE FROM {schema}.ring_retirements x WHERE x.ring = p_ring AND x.slot = v_slot;
                        outcome := 'pruned';
                    END IF;
                END IF;
            END IF;
        END IF;
    END IF;

    INSERT INTO {schema}.ring_outcomes AS o (ring, task, outcome, detail)
    VALUES (p_ring, 'prune', outcome, coalesce('slot ' || v_slot || ': ', '') || coalesce(detail, ''))
    ON CONFLICT (ring, task) DO UPDATE SET outcome = EXCLUDED.outcome, detail = EXCLUDED.detail, at = now();
    slot := v_slot;
    RETURN NEXT;
END
$fn$;
$awa_template$)
ON CONFLICT (name) DO UPDATE SET ord = EXCLUDED.ord, body = EXCLUDED.body;
INSERT INTO awa.substrate_functions (name, ord, body) VALUES ('ring_rotate', 35, $awa_template$-- {schema}.ring_rotate(ring, by): move a ring's current slot to the next one.
-- Returns 'rotated', 'idle' (the current slot holds nothing written since
-- the ring moved onto it, see ring_slot_fresh: nothing to seal),
-- 'incoming_not_empty' (the next slot still holds rows or awaits its
-- truncation: rotating onto it would mix live data into the write slot),
-- or 'lost_race' (another rotator appended this generation first; the
-- ledger's primary key is the compare-and-swap, so the loser writes nothing).
-- For the queue ring, every pass also moves the seal first (ready_seal: the
-- generations no producer can write to any more), whatever the outcome.
CREATE OR REPLACE FUNCTION {schema}.ring_rotate(p_ring text, p_by text)
RETURNS TABLE (outcome text, from_slot integer, to_slot integer, generation bigint)
LANGUAGE plpgsql AS $fn$
#variable_conflict use_column
DECLARE
    v_slots integer;
    v_gen   bigint;
    v_cur   integer;
    v_next  integer;
BEGIN
    v_slots := {schema}.ring_slot_count(p_ring);
    SELECT l.generation, l.slot INTO v_gen, v_cur
      FROM {schema}.ring_ledger l WHERE l.ring = p_ring
     ORDER BY l.generation DESC LIMIT 1;
    v_next := (v_cur + 1) % v_slots;

    -- Before this call's own ledger row: a generation is proven sealable
    -- only from rotations every new snapshot sees, i.e. committed ones.
    IF p_ring = 'queue' THEN
        PERFORM {schema}.ready_seal();
    END IF;

    IF NOT {schema}.ring_slot_fresh(p_ring, v_cur) THEN
        outcome := 'idle';
    ELSIF NOT {schema}.ring_slot_empty(p_ring, v_next)
          OR EXISTS (SELECT 1 FROM {schema}.ring_retirements x WHERE x.ring = p_ring AND x.slot = v_next) THEN
        outcome := 'incoming_not_empty';
    ELSE
        INSERT INTO {schema}.ring_ledger (ring, generation, slot, rotated_by)
        VALUES (p_ring, v_gen + 1, v_next, p_by)
        ON CONFLICT DO NOTHING;
        outcome := CASE WHEN FOUND THEN 'rotated' ELSE 'lost_race' END;
    END IF;

    INSERT INTO {schema}.ring_outcomes AS o (ring, task, outcome, detail)
    VALUES (p_ring, 'rotate', outcome, format('slot %s -> %s', v_cur, v_next))
    ON CONFLICT (ring, task) DO UPDATE SET outcome = EXCLUDED.outcome, detail = EXCLUDED.detail, at = now();

    from_slot := v_cur;
    to_slot := v_next;
    generation := v_gen + CASE WHEN outcome = 'rotated' THEN 1 ELSE 0 END;
    RETURN NEXT;
END
$fn$;
$awa_template$)
ON CONFLICT (name) DO UPDATE SET ord = EXCLUDED.ord, body = EXCLUDED.body;
INSERT INTO awa.substrate_functions (name, ord, body) VALUES ('routed_jobs', 29, $awa_template$-- {schema}.routed_jobs(): every job of every substrate the storage routing
-- reads now (the active one, a transition's target, those still
-- draining), as rows of the `jobs` view: the read view that follows the
-- routing, so a query need not know which substrate holds a job.
-- `awa.routed_jobs()` is the documented entry; every substrate has one.
-- Filter it like the view (`SELECT * FROM awa.routed_jobs() WHERE queue =
-- 'email' AND state = 'failed'`); each substrate's `jobs` view is read in
-- full, so for large histories filter inside one substrate's view instead.
CREATE OR REPLACE FUNCTION {schema}.routed_jobs()
-- jit = off: the views' estimates over never-analyzed ring partitions are
-- far too high, and compiling them costs seconds (see conninfo.rs).
RETURNS SETOF {schema}.jobs LANGUAGE plpgsql STABLE SET jit = off AS $fn$
DECLARE
    v_schema text;
BEGIN
    FOR v_schema IN
        SELECT r.s FROM (
            SELECT t.active_schema AS s, 0 AS o FROM awa.storage_transition_state t
            UNION ALL
            SELECT t.target_schema, 1 FROM awa.storage_transition_state t
             WHERE t.target_schema IS NOT NULL
            UNION ALL
            SELECT d.schema_name, 2 FROM awa.storage_draining d) r
         GROUP BY r.s
         ORDER BY min(r.o), r.s
    LOOP
        RETURN QUERY EXECUTE format('SELECT * FROM %I.jobs', v_schema);
    END LOOP;
END
$fn$;
$awa_template$)
ON CONFLICT (name) DO UPDATE SET ord = EXCLUDED.ord, body = EXCLUDED.body;
INSERT INTO awa.substrate_functions (name, ord, body) VALUES ('storage_transfer_in', 37, $awa_template$-- {schema}.storage_transfer_in(from, limit): move up to `limit` deferred
-- jobs (scheduled, retryable, snoozed, released) and up to `limit`
-- dead-lettered jobs from substrate `from` into this one, in one
-- transaction. Returns how many rows moved. `limit` is 1 to 10000
-- (awa_core::bounds::MAINT_LIMIT; SQLSTATE 22023 otherwise).
--
-- Used while `from` only drains (the old substrate in the mixed phase, a
-- substrate in awa.storage_draining): the leader's transfer task calls it
-- on the write substrate, and storage_finalize calls it until nothing is
-- left. So a retry, snooze or promotion of old work lands in the write
-- substrate, and the old one ends up with nothing but history.
--
-- Safe against everything else that touches those rows: they are not
-- running (no lease, no open claim item), each is taken with FOR UPDATE
-- SKIP LOCKED (a row being promoted, cancelled or retried from the DLQ
-- right now is left for the next pass), and deleted from `from` in the
-- statement that inserts it here. A job keeps its id, attempt count,
-- run_at and unique key: ids and keys are database-wide (awa.job_id_seq,
-- awa.job_uniques), so nothing about the key changes. Attempt records
-- (ADR 11) move with the job.
--
-- The two tables move alike: one statement per table, with the columns
-- read from the catalog (this substrate's table; the other substrate's
-- has the same columns, both made by the same installer and migrations),
-- so a column added to either table moves without a change here.
CREATE OR REPLACE FUNCTION {schema}.storage_transfer_in(p_from text, p_limit integer)
RETURNS integer LANGUAGE plpgsql AS $fn$
DECLARE
    v_table text;
    v_order text;
    v_cols  text;
    v_rows  integer;
    v_moved integer := 0;
BEGIN
    IF p_limit IS NULL OR p_limit NOT BETWEEN 1 AND 10000 THEN
        RAISE EXCEPTION 'storage_transfer_in: limit must be 1 to 10000 (got %)', coalesce(p_limit::text, 'NULL')
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'Rows one maintenance call moves (awa_core::bounds::MAINT_LIMIT); the leader moves 2000 at a time.';
    END IF;
    IF p_from IS NULL OR to_regnamespace(p_from) = to_regnamespace('{schema}') THEN
        RAISE EXCEPTION 'storage_transfer_in: the source must be another substrate (got %)', coalesce(p_from, 'NULL')
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'Call it on the write substrate, naming a substrate that only drains.';
    END IF;
    IF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_class c
                     JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
                    WHERE n.nspname = p_from AND c.relname = 'substrate_info' AND c.relkind = 'r') THEN
        RAISE EXCEPTION 'storage_transfer_in: % is not a substrate', quote_literal(p_from)
            USING ERRCODE = 'invalid_schema_name',
                  HINT = 'Name a prepared substrate (awa storage status lists them).';
    END IF;
    -- Oldest first: deferred jobs by when they run, dead letters by when
    -- they died.
    FOR v_table, v_order IN VALUES ('deferred_jobs', 'run_at'), ('dlq_entries', 'dead_at') LOOP
        SELECT string_agg(quote_ident(a.attname), ', ' ORDER BY a.attnum) INTO v_cols
          FROM pg_catalog.pg_attribute a
         WHERE a.attrelid = format('{schema}.%I', v_table)::regclass
           AND a.attnum > 0 AND NOT a.attisdropped;
        EXECUTE format($q$
            WITH moved AS (
                DELETE FROM %1$I.%2$I d
                 WHERE d.job_id IN (SELECT x.job_id FROM %1$I.%2$I x
                                     ORDER BY x.%3$I LIMIT $1 FOR UPDATE SKIP LOCKED)
                RETURNING %4$s
            )
            INSERT INTO {schema}.%2$I (%4$s)
            SELECT %4$s FROM moved$q$, p_from, v_table, v_order, v_cols) USING p_limit;
        GET DIAGNOSTICS v_rows = ROW_COUNT;
        v_moved := v_moved + v_rows;
    END LOOP;
    RETURN v_moved;
END
$fn$;
$awa_template$)
ON CONFLICT (name) DO UPDATE SET ord = EXCLUDED.ord, body = EXCLUDED.body;
INSERT INTO awa.substrate_functions (name, ord, body) VALUES ('terminal_job', 30, $awa_template$-- {schema}.terminal_job(job_id): the terminal_jobs rows of one job, found
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
