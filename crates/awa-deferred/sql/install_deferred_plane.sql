-- awa.install_deferred_plane(schema)
--
-- Work that is not runnable yet: scheduled, waiting out a retry backoff, or
-- snoozed. An ordinary table: rows are deleted when promoted to the ready
-- ring, so it churns in proportion to deferred work only, never to the
-- whole job stream.
CREATE OR REPLACE FUNCTION awa.install_deferred_plane(p_schema text)
RETURNS void LANGUAGE plpgsql SECURITY INVOKER AS $fn$
BEGIN
    EXECUTE format($ddl$
        CREATE TABLE IF NOT EXISTS %1$I.deferred_jobs (
            job_id       bigint      PRIMARY KEY,
            queue        text        NOT NULL,
            -- Bounds as awa_core::bounds has them, so a raw-SQL producer
            -- cannot store a job no worker would understand.
            priority     smallint    NOT NULL CHECK (priority BETWEEN 1 AND 4),
            kind         text        NOT NULL,
            args         jsonb       NOT NULL,
            attempt      integer     NOT NULL,
            max_attempts integer     NOT NULL CHECK (max_attempts BETWEEN 1 AND 1000),
            run_lease    bigint      NOT NULL,
            run_at       timestamptz NOT NULL,
            reason       text        NOT NULL CHECK (reason IN ('scheduled', 'retry', 'snoozed', 'released')),
            created_at   timestamptz NOT NULL,
            unique_key   text,
            metadata     jsonb,
            last_error   text,
            -- Records of the job's attempts so far (ADR 11), carried back
            -- to the ready ring on promotion.
            attempts     jsonb
        )$ddl$, p_schema);
    -- Promotion takes the earliest due rows first.
    EXECUTE format('CREATE INDEX IF NOT EXISTS deferred_jobs_run_at_idx ON %1$I.deferred_jobs (run_at)', p_schema);
    -- live_jobs filtered by queue: queue stats, pending (--exit-when-idle).
    EXECUTE format('CREATE INDEX IF NOT EXISTS deferred_jobs_queue_idx ON %1$I.deferred_jobs (queue)', p_schema);
END
$fn$;
