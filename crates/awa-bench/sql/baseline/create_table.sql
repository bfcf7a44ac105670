-- Baseline: the one jobs table. Models the hand-written queue a user
-- would otherwise build (the shape River's river_job, Oban's oban_jobs and
-- graphile-worker's jobs share, trimmed to what the bench exercises): one
-- row per job for its whole life, updated in place as it moves from
-- available to running to completed.
--
-- Fair because it carries what our enqueue stores and returns for the
-- same jobs (queue, kind, JSON args, priority, attempt, max attempts,
-- timestamps, who claimed it) and nothing more; no unique keys, no
-- history table, no counts, no maintenance. run_at defaults to
-- clock_timestamp(), as our ready_at is stamped, so pickup latency is
-- measured from the same point.
CREATE TABLE IF NOT EXISTS bench_baseline.jobs (
    id           bigserial   PRIMARY KEY,
    queue        text        NOT NULL,
    kind         text        NOT NULL,
    args         jsonb       NOT NULL DEFAULT '{}',
    priority     smallint    NOT NULL DEFAULT 2,
    state        text        NOT NULL DEFAULT 'available',
    attempt      integer     NOT NULL DEFAULT 0,
    max_attempts integer     NOT NULL DEFAULT 25,
    run_at       timestamptz NOT NULL DEFAULT clock_timestamp(),
    created_at   timestamptz NOT NULL DEFAULT now(),
    attempted_at timestamptz,
    attempted_by text,
    finalized_at timestamptz
)
