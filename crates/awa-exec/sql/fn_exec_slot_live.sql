-- {schema}.exec_slot_live(ring, slot): why a ring slot still holds a live
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
