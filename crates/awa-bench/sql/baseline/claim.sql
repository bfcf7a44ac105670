-- Baseline: claim up to $2 available jobs of queue $1 for worker $3. The
-- classic Postgres queue claim: pick the next rows through the fetch index
-- with FOR UPDATE SKIP LOCKED (concurrent claimers skip each other's rows
-- instead of waiting), and mark them running with the attempt counted, in
-- one statement and one commit.
--
-- Fair because the worker driving it asks for the same batch sizes as
-- ours (its free concurrency, at most 128) and gets back what our claim
-- returns: id, attempt (the lease the completion checks), kind, args and
-- the time the job became runnable (for pickup latency).
WITH picked AS (
    SELECT id
      FROM bench_baseline.jobs
     WHERE state = 'available' AND queue = $1 AND run_at <= now()
     ORDER BY priority, run_at, id
     LIMIT $2
       FOR UPDATE SKIP LOCKED
)
UPDATE bench_baseline.jobs AS j
   SET state = 'running',
       attempt = j.attempt + 1,
       attempted_at = now(),
       attempted_by = $3
  FROM picked
 WHERE j.id = picked.id
RETURNING j.id, j.attempt, j.kind, j.args, j.run_at
