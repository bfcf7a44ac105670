-- Issue 23 (uniqueness by kind, queue, args or args fields, over a period
-- and across chosen final states; ADR 10): awa.job_uniques records how long
-- a key spec keeps a key after its job finished.
--
-- The new columns go at the end, as in control_schema.sql. Existing rows
-- are keys without a spec: NULL in all three, released when their job
-- finishes, exactly as before.
ALTER TABLE awa.job_uniques
    ADD COLUMN hold_until  timestamptz,
    ADD COLUMN hold_states text[],
    ADD COLUMN finished_at timestamptz;

-- The shape of a hold (both or neither; known final states only; a
-- finished row only while it holds), as in control_schema.sql.
ALTER TABLE awa.job_uniques
    ADD CONSTRAINT job_uniques_hold_check CHECK (
        (hold_until IS NULL) = (hold_states IS NULL)
        AND hold_states <@ ARRAY['completed', 'failed', 'cancelled']::text[]
        AND cardinality(hold_states) > 0
        AND (finished_at IS NULL OR hold_until IS NOT NULL));

-- unique_prune's index: finished rows by the end of their period.
CREATE INDEX job_uniques_expiry_idx ON awa.job_uniques (hold_until)
    WHERE finished_at IS NOT NULL;

-- The runtime role gains UPDATE on job_uniques (takeover, finished marks):
-- the refresh at the end of the step re-grants the matrix to every role
-- that holds it. The changed producer functions (awa.enqueue and
-- enqueue_local take an optional trailing argument, unique_take a third)
-- are new signatures: the derived part of the step drops the old ones in
-- every substrate before the refresh creates the new ones.
