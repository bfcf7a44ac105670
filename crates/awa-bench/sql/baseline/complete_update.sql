-- Baseline (default): complete a batch of attempts by marking the rows
-- completed, keeping them as history, as River and Oban do until a cleaner
-- deletes them. $1 job ids, $2 their attempts.
--
-- Fair because it is guarded like our finish: only a row still running
-- the same attempt is completed, so a stale or repeated completion changes
-- nothing; and the worker batches completions as ours does (whatever has
-- accumulated, at most 128 per statement).
UPDATE bench_baseline.jobs AS j
   SET state = 'completed',
       finalized_at = now()
  FROM unnest($1::bigint[], $2::integer[]) AS done(id, attempt)
 WHERE j.id = done.id
   AND j.attempt = done.attempt
   AND j.state = 'running'
