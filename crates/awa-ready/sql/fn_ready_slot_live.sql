-- {schema}.ready_slot_live(slot): why queue-ring slot `slot` still holds
-- runnable work, or NULL when it holds none: every entry is past its lane
-- head or tombstoned. Used by ring_prune before and after locking the slot.
-- A slot that is not one of the queue ring's is refused (22023).
CREATE OR REPLACE FUNCTION {schema}.ready_slot_live(p_slot integer)
RETURNS text LANGUAGE plpgsql STABLE AS $fn$
DECLARE
    v_slots  integer := {schema}.ring_slot_count('queue');
    v_gen    bigint;
    v_sealed boolean;
BEGIN
    -- A slot of this ring (ring_slot_count refuses an unknown ring).
    IF p_slot IS NULL OR p_slot NOT BETWEEN 0 AND {schema}.ring_slot_count('queue') - 1 THEN
        RAISE EXCEPTION 'slot % is not a slot of the % ring', coalesce(p_slot::text, 'NULL'), 'queue'
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'Slots are numbered from 0 to the ring''s slot count - 1 (substrate_info).';
    END IF;
    -- Lane by lane, the lane's first live entry past its head in this
    -- slot, in lane order (see ready_take, "Plans that cannot degrade"): a
    -- join of the slot's entries with the heads, which the planner made a
    -- scan of the whole slot once it had statistics, read every entry
    -- already claimed before finding a waiting one, on every prune pass
    -- of a slot that still held a backlog. This reads one index range per
    -- lane, from its head, or in a sealed slot from past the jobs
    -- relocation already moved (ready_relocated, see ready_relocate), plus
    -- the tombstoned entries from there.
    SELECT c.generation - ((c.slot - p_slot + v_slots) % v_slots)
      INTO v_gen
      FROM (SELECT l.generation, l.slot FROM {schema}.ring_ledger l
             WHERE l.ring = 'queue' ORDER BY l.generation DESC LIMIT 1) c;
    v_sealed := v_gen <= (SELECT z.generation FROM {schema}.ready_sealed z);
    RETURN (
        SELECT 'job ' || w.job_id || ' is still waiting to be claimed'
          FROM {schema}.lane_heads h
          LEFT JOIN {schema}.ready_relocated r
            ON v_sealed AND r.slot = p_slot AND r.generation = v_gen
           AND r.queue = h.queue AND r.priority = h.priority AND r.shard = h.shard
         CROSS JOIN LATERAL (
                SELECT e.job_id
                  FROM {schema}.ready_entries e
                 WHERE e.slot = p_slot
                   AND e.queue = h.queue AND e.priority = h.priority AND e.shard = h.shard
                   AND e.lane_seq > greatest(h.head_seq, r.moved_through)
                   AND (SELECT true FROM {schema}.ready_tombstones t
                         WHERE t.slot = e.slot AND t.job_id = e.job_id
                           AND t.lane_seq = e.lane_seq) IS NULL
                 ORDER BY e.lane_seq
                 LIMIT 1) w
         LIMIT 1);
END
$fn$;
