-- {schema}.heartbeat(job_id, run_lease, claim_slot, batch_id, item,
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
