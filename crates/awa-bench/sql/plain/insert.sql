-- Plain insert: one row with the job's payload. The producer sends it
-- inside BEGIN .. COMMIT, exactly as it sends our one-job enqueue, so both
-- pay the same round trips and one commit per job.
-- $1 args (jsonb).
INSERT INTO bench_plain.inserts (args) VALUES ($1)
