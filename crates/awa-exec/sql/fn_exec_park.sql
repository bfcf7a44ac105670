-- {schema}.exec_park(ring, slot, limit): move up to `limit` open attempts
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
