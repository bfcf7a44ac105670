-- Issue 22 (ADR 11): attempt records travel with the job, failures and
-- cancellations are kept outside the rings for a retention of their own.
-- Runs once, in one transaction, as the migrator, before the changed
-- functions and the refresh (which re-runs every installer: that creates
-- the new indexes of dlq_entries and failure_entries and replaces the
-- terminal_jobs view; the templates replace live_jobs, jobs and the
-- runtime functions; the runtime role is re-granted the matrix, which now
-- classifies failure_entries).
DO $ops_history$
DECLARE
    s text;
BEGIN
    FOR s IN SELECT n.nspname
               FROM pg_catalog.pg_class c
               JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
              WHERE c.relname = 'substrate_info' AND c.relkind = 'r'
              ORDER BY n.nspname LOOP
        -- 1. The failure retention setting (default 7 days), at the end of
        --    substrate_info as in install_control_plane.sql.
        EXECUTE format($q$
            ALTER TABLE %I.substrate_info
              ADD COLUMN failure_retention interval NOT NULL DEFAULT interval '7 days'
                CONSTRAINT substrate_info_failure_retention_in_range
                CHECK (failure_retention BETWEEN interval '1 second' AND interval '3650 days')$q$, s);

        -- 2. The attempt records column on every table that carries a
        --    job's body (NULL: none recorded), last in each as in the
        --    installers. On a partitioned parent it reaches every slot.
        EXECUTE format('ALTER TABLE %I.ready_entries ADD COLUMN attempts jsonb', s);
        EXECUTE format('ALTER TABLE %I.deferred_jobs ADD COLUMN attempts jsonb', s);
        EXECUTE format('ALTER TABLE %I.parked_attempts ADD COLUMN attempts jsonb', s);
        EXECUTE format('ALTER TABLE %I.dlq_entries ADD COLUMN attempts jsonb', s);
        EXECUTE format('ALTER TABLE %I.done_entries ADD COLUMN attempts jsonb', s);

        -- 3. ready_tombstone returns the body's columns and its attempt
        --    records now: CREATE OR REPLACE cannot change a result type, so
        --    the old one goes and the template creates it anew. (The draft
        --    drops ready_append's old signature itself: it gained an
        --    argument, p_histories.)
        EXECUTE format('DROP FUNCTION IF EXISTS %I.ready_tombstone(bigint)', s);

        -- 4. failure_entries, exactly as install_history_plane.sql creates
        --    it (the refresh then finds it there), so step 5 can fill it.
        EXECUTE format($q$
            CREATE TABLE IF NOT EXISTS %1$I.failure_entries (
                job_id       bigint      PRIMARY KEY,
                run_lease    bigint      NOT NULL,
                queue        text        NOT NULL,
                state        text        NOT NULL CHECK (state IN ('failed', 'cancelled')),
                attempt      integer     NOT NULL,
                priority     smallint    NOT NULL,
                kind         text        NOT NULL,
                args         jsonb       NOT NULL,
                max_attempts integer     NOT NULL,
                created_at   timestamptz NOT NULL,
                finalized_at timestamptz NOT NULL DEFAULT now(),
                unique_key   text,
                metadata     jsonb,
                last_error   text,
                attempts     jsonb
            )$q$, s);

        -- 5. Failed and cancelled jobs still in the ring move to
        --    failure_entries (kept for the retention, retryable) and leave
        --    done_entries, so no job is listed twice. Facts of slots
        --    already retired are gone for readers and stay to be truncated.
        --    Their count deltas stay where they are: totals do not change.
        --    A job with two facts (not possible before this step) keeps the
        --    newer.
        EXECUTE format($q$
            WITH moved AS (
                DELETE FROM %1$I.done_entries d
                 WHERE d.state IN ('failed', 'cancelled')
                   AND NOT EXISTS (SELECT 1 FROM %1$I.ring_retirements x
                                    WHERE x.ring = 'queue' AND x.slot = d.slot)
                RETURNING d.*
            )
            INSERT INTO %1$I.failure_entries
                (job_id, run_lease, queue, state, attempt, priority, kind, args, max_attempts,
                 created_at, finalized_at, unique_key, metadata, last_error, attempts)
            SELECT DISTINCT ON (m.job_id)
                   m.job_id, m.run_lease, m.queue, m.state, m.attempt,
                   (m.body ->> 'priority')::smallint, m.body ->> 'kind', m.body -> 'args',
                   (m.body ->> 'max_attempts')::integer, (m.body ->> 'created_at')::timestamptz,
                   m.finalized_at, NULL, nullif(m.body -> 'metadata', 'null'::jsonb), m.last_error, NULL
              FROM moved m
             ORDER BY m.job_id, m.run_lease DESC
            ON CONFLICT (job_id) DO NOTHING$q$, s);
    END LOOP;
END
$ops_history$;
