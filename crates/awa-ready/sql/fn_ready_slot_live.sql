-- {schema}.ready_slot_live(slot): why queue-ring slot `slot` still holds
-- runnable work, or NULL when it holds none: every entry is past its lane
-- head or tombstoned. Used by ring_prune before and after locking the slot.
-- A slot that is not one of the queue ring's is refused (22023).
CREATE OR REPLACE FUNCTION {schema}.ready_slot_live(p_slot integer)
RETURNS text LANGUAGE plpgsql STABLE AS $fn$
BEGIN
    -- A slot of this ring (ring_slot_count refuses an unknown ring).
    IF p_slot IS NULL OR p_slot NOT BETWEEN 0 AND {schema}.ring_slot_count('queue') - 1 THEN
        RAISE EXCEPTION 'slot % is not a slot of the % ring', coalesce(p_slot::text, 'NULL'), 'queue'
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'Slots are numbered from 0 to the ring''s slot count - 1 (substrate_info).';
    END IF;
    RETURN (
        SELECT 'job ' || e.job_id || ' is still waiting to be claimed'
          FROM {schema}.ready_entries e
          JOIN {schema}.lane_heads h ON h.queue = e.queue AND h.priority = e.priority AND h.shard = e.shard
         WHERE e.slot = p_slot
           AND e.lane_seq > h.head_seq
           AND NOT EXISTS (SELECT 1 FROM {schema}.ready_tombstones t
                            WHERE t.slot = e.slot AND t.job_id = e.job_id AND t.lane_seq = e.lane_seq)
         LIMIT 1);
END
$fn$;
