-- Baseline: enqueue a batch of jobs of one queue in one statement (the
-- batch is 1 or 1,000 jobs, exactly as our producers send). Models a
-- multi-row INSERT from parameter arrays returning the new ids, plus one
-- NOTIFY so idle workers wake at once rather than at their next poll.
--
-- Fair because our enqueue also returns every id and sends one
-- notification per queue per transaction; in autocommit (no explicit
-- transaction) it is one round trip and one commit per call, as ours is.
-- $1 queue, $2 kinds, $3 args (one element per job).
WITH inserted AS (
    INSERT INTO bench_baseline.jobs (queue, kind, args)
    SELECT $1, new.kind, new.args
      FROM unnest($2::text[], $3::jsonb[]) AS new(kind, args)
    RETURNING id
), woken AS MATERIALIZED (
    SELECT pg_notify('bench_baseline', $1)::text AS sent
)
SELECT inserted.id FROM inserted, woken
