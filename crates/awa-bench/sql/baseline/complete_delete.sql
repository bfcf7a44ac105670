-- Baseline (`--baseline-complete delete`): complete a batch of attempts by
-- deleting the rows: the leanest hand-written queue, which keeps no
-- history of finished jobs at all (we keep it, so this variant favours the
-- baseline). $1 job ids, $2 their attempts.
--
-- Fair because it is guarded like our finish (only a row still running the
-- same attempt goes) and batched as ours is (at most 128 per statement).
DELETE FROM bench_baseline.jobs AS j
 USING unnest($1::bigint[], $2::integer[]) AS done(id, attempt)
 WHERE j.id = done.id
   AND j.attempt = done.attempt
   AND j.state = 'running'
