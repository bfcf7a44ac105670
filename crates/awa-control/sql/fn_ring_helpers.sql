-- Small helpers of ring_rotate and ring_prune.
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
