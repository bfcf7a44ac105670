-- Baseline: the index a user creates for the claim (claim.sql): available
-- jobs of a queue in priority, then run_at, then id order, so the claim is
-- an index range scan that stops after its LIMIT. Partial on state, as the
-- well-known Postgres queues do, so it holds only waiting jobs. Together
-- with the primary key that is every index the job path needs; a second
-- index would only add WAL per job and favour us.
CREATE INDEX IF NOT EXISTS jobs_fetch_idx
    ON bench_baseline.jobs (queue, priority, run_at, id)
 WHERE state = 'available'
