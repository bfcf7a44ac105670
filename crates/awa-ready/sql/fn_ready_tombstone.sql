-- {schema}.ready_tombstone(job_id): cancel a job that is still waiting in
-- the ready ring, without rewriting its entry. Returns the cancelled
-- entry's slot, lane position and body with its attempt records (for its
-- terminal fact), or no row when the job is not waiting (already claimed,
-- or not in the ready ring).
--
-- The lane row is locked first so a concurrent claim cannot take the job
-- between our check and our tombstone: ready_take locks the same row.
CREATE OR REPLACE FUNCTION {schema}.ready_tombstone(p_job_id bigint)
RETURNS TABLE (slot integer, lane_seq bigint, queue text, attempt integer, run_lease bigint,
               priority smallint, kind text, args jsonb, max_attempts integer,
               created_at timestamptz, unique_key text, metadata jsonb, attempts jsonb)
LANGUAGE plpgsql AS $fn$
#variable_conflict use_column
DECLARE
    v_entry record;
    v_head  bigint;
BEGIN
    -- Which lane: any copy of the job's newest entry names it.
    FOR v_entry IN
        SELECT e.queue, e.priority, e.shard
          FROM {schema}.ready_entries e
         WHERE e.job_id = p_job_id
         ORDER BY e.lane_seq DESC
         LIMIT 1
    LOOP
        SELECT h.head_seq INTO v_head
          FROM {schema}.lane_heads h
         WHERE h.queue = v_entry.queue AND h.priority = v_entry.priority AND h.shard = v_entry.shard
           FOR UPDATE;
        -- Under the lane lock, in a new statement: the live copy. A job
        -- moved by ready_relocate has a tombstoned old copy and a live new
        -- one with the same lane position.
        RETURN QUERY
        WITH live AS (
            SELECT e.slot, e.job_id, e.lane_seq, e.attempt, e.run_lease, e.priority, e.kind,
                   e.args, e.max_attempts, e.created_at, e.unique_key, e.metadata, e.attempts
              FROM {schema}.ready_entries e
             WHERE e.job_id = p_job_id AND e.queue = v_entry.queue
               AND e.priority = v_entry.priority AND e.shard = v_entry.shard
               AND e.lane_seq > v_head
               -- A probe per copy, never a join over the slot's tombstones
               -- (ready_take, "Plans that cannot degrade").
               AND (SELECT true FROM {schema}.ready_tombstones x
                     WHERE x.slot = e.slot AND x.job_id = e.job_id AND x.lane_seq = e.lane_seq) IS NULL
             ORDER BY e.lane_seq DESC
             LIMIT 1
        ),
        buried AS (
            INSERT INTO {schema}.ready_tombstones AS t (slot, job_id, lane_seq)
            SELECT l.slot, l.job_id, l.lane_seq FROM live l
            ON CONFLICT DO NOTHING
            RETURNING t.slot, t.lane_seq
        )
        SELECT b.slot, b.lane_seq, v_entry.queue, l.attempt, l.run_lease, l.priority, l.kind,
               l.args, l.max_attempts, l.created_at, l.unique_key, l.metadata, l.attempts
          FROM buried b JOIN live l ON l.slot = b.slot AND l.lane_seq = b.lane_seq;
    END LOOP;
END
$fn$;
