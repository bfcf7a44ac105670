-- {schema}.ready_tombstone(job_id): cancel a job that is still waiting in
-- the ready ring, without rewriting its entry. Returns the cancelled
-- entry's slot and lane position, or no row when the job is not waiting
-- (already claimed, or not in the ready ring).
--
-- The lane row is locked first so a concurrent claim cannot take the job
-- between our check and our tombstone: ready_take locks the same row.
CREATE OR REPLACE FUNCTION {schema}.ready_tombstone(p_job_id bigint)
RETURNS TABLE (slot integer, lane_seq bigint, queue text, attempt integer, run_lease bigint)
LANGUAGE plpgsql AS $fn$
#variable_conflict use_column
DECLARE
    v_entry record;
    v_head  bigint;
BEGIN
    FOR v_entry IN
        SELECT e.slot, e.lane_seq, e.queue, e.priority, e.shard, e.attempt, e.run_lease
          FROM {schema}.ready_entries e
         WHERE e.job_id = p_job_id
         ORDER BY e.lane_seq DESC
         LIMIT 1
    LOOP
        SELECT h.head_seq INTO v_head
          FROM {schema}.lane_heads h
         WHERE h.queue = v_entry.queue AND h.priority = v_entry.priority AND h.shard = v_entry.shard
           FOR UPDATE;
        IF v_head < v_entry.lane_seq THEN
            INSERT INTO {schema}.ready_tombstones (slot, job_id, lane_seq)
            VALUES (v_entry.slot, p_job_id, v_entry.lane_seq)
            ON CONFLICT DO NOTHING;
            IF FOUND THEN
                RETURN QUERY SELECT v_entry.slot, v_entry.lane_seq, v_entry.queue,
                                    v_entry.attempt, v_entry.run_lease;
            END IF;
        END IF;
    END LOOP;
END
$fn$;
