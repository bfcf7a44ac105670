-- {schema}.exec_slot_live(ring, slot): why a ring slot still holds a live
-- attempt, or NULL. Used by ring_prune before and after locking the slot.
--   queue: an open receipt (no closure) whose job body is in that queue slot
--          (finishing it reads the body, and writes its terminal fact there)
--   claim: an open receipt in that claim slot
--   lease: a lease in that lease slot whose attempt is still open
CREATE OR REPLACE FUNCTION {schema}.exec_slot_live(p_ring text, p_slot integer)
RETURNS text LANGUAGE sql STABLE AS $fn$
    SELECT 'attempt ' || r.job_id || '/' || r.run_lease || ' is still open'
      FROM {schema}.claim_receipts r
     WHERE ((p_ring = 'queue' AND r.ready_slot = p_slot) OR (p_ring = 'claim' AND r.slot = p_slot))
       AND NOT EXISTS (SELECT 1 FROM {schema}.claim_closures c
                        WHERE c.slot = r.slot AND c.job_id = r.job_id AND c.run_lease = r.run_lease)
    UNION ALL
    SELECT 'lease of attempt ' || l.job_id || '/' || l.run_lease || ' is still live'
      FROM {schema}.leases l
      JOIN {schema}.claim_receipts r
        ON r.slot = l.claim_slot AND r.job_id = l.job_id AND r.run_lease = l.run_lease
     WHERE p_ring = 'lease' AND l.slot = p_slot
       AND NOT EXISTS (SELECT 1 FROM {schema}.claim_closures c
                        WHERE c.slot = r.slot AND c.job_id = r.job_id AND c.run_lease = r.run_lease)
    LIMIT 1
$fn$;
