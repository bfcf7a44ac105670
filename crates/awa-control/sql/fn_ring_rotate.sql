-- {schema}.ring_rotate(ring, by): move a ring's current slot to the next one.
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
