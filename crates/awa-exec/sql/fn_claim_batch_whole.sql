-- {schema}.claim_batch_whole(slot, batch_id): one claim batch row, its
-- item arrays read whole (`[:]`, a plain copy of each), for statements
-- that read items of the batch by subscript: finish, finish_pass and
-- exec_park.
--
-- Why: a batch row keeps its items as parallel arrays, a few KB each at
-- 512 items, stored compressed, and a subscript of a stored array
-- decompresses all of it: read per item, seven subscripts were two thirds
-- of a finish of 512 jobs (ARCHITECTURE "Evidence shapes", ADR 18). A
-- copy's subscripts cost an offset (fixed-width elements, no NULLs), so
-- the caller materializes this row once per batch and must not sort
-- above its join with it (a sort would copy the arrays per item).
--
-- A SQL function the planner inlines, called LATERAL per batch; LIMIT 1
-- (the key is the primary key) keeps the inlined subquery from being
-- pulled up into a join that reads the whole partition. Reads only.
CREATE OR REPLACE FUNCTION {schema}.claim_batch_whole(p_slot integer, p_batch_id bigint)
RETURNS TABLE (
    slot integer, batch_id bigint, queue text, claimed_at timestamptz, instance_id uuid,
    job_ids bigint[], run_leases bigint[], attempts integer[], ready_slots integer[],
    ready_seqs bigint[], priorities smallint[], shards smallint[], keyed integer[]
) LANGUAGE sql STABLE AS $fn$
    SELECT b.slot, b.batch_id, b.queue, b.claimed_at, b.instance_id,
           b.job_ids[:], b.run_leases[:], b.attempts[:], b.ready_slots[:],
           b.ready_seqs[:], b.priorities[:], b.shards[:], b.keyed
      FROM {schema}.claim_batches b
     WHERE b.slot = p_slot AND b.batch_id = p_batch_id
     LIMIT 1
$fn$;
