-- {schema}.history_retire_slot(slot): move queue-ring slot `slot`'s count
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
