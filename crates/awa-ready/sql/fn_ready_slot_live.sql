-- {schema}.ready_slot_live(slot): why queue-ring slot `slot` still holds
-- runnable work, or NULL when it holds none: every entry is past its lane
-- head or tombstoned. Used by ring_prune before and after locking the slot.
CREATE OR REPLACE FUNCTION {schema}.ready_slot_live(p_slot integer)
RETURNS text LANGUAGE sql STABLE AS $fn$
    SELECT 'job ' || e.job_id || ' is still waiting to be claimed'
      FROM {schema}.ready_entries e
      JOIN {schema}.lane_heads h ON h.queue = e.queue AND h.priority = e.priority AND h.shard = e.shard
     WHERE e.slot = p_slot
       AND e.lane_seq > h.head_seq
       AND NOT EXISTS (SELECT 1 FROM {schema}.ready_tombstones t
                        WHERE t.slot = e.slot AND t.job_id = e.job_id AND t.lane_seq = e.lane_seq)
     LIMIT 1
$fn$;
