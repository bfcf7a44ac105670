-- awa.install_dlq_plane(schema)
--
-- Dead-lettered jobs held for an operator: full body plus the reason. Kept
-- until retried, purged, or past the queue's retention.
CREATE OR REPLACE FUNCTION awa.install_dlq_plane(p_schema text)
RETURNS void LANGUAGE plpgsql SECURITY INVOKER AS $fn$
BEGIN
    EXECUTE format($ddl$
        CREATE TABLE IF NOT EXISTS %1$I.dlq_entries (
            job_id       bigint      PRIMARY KEY,
            queue        text        NOT NULL,
            priority     smallint    NOT NULL,
            kind         text        NOT NULL,
            args         jsonb       NOT NULL,
            attempt      integer     NOT NULL,
            max_attempts integer     NOT NULL,
            run_lease    bigint      NOT NULL,
            created_at   timestamptz NOT NULL,
            dead_at      timestamptz NOT NULL DEFAULT now(),
            last_error   text,
            metadata     jsonb,
            -- The key the job held until it was dead-lettered; retry takes
            -- it again (dlq_retry).
            unique_key   text,
            -- Records of every attempt (ADR 11), the last one included.
            attempts     jsonb
        )$ddl$, p_schema);
    -- dlq list and retention, by queue and age.
    EXECUTE format('CREATE INDEX IF NOT EXISTS dlq_entries_queue_idx ON %1$I.dlq_entries (queue, dead_at)', p_schema);
    -- Finding dead letters by what their args contain (`awa job list
    -- --args-contains`): held for weeks, so a scan would grow with them;
    -- the index costs only dead-lettering, never the job path.
    EXECUTE format('CREATE INDEX IF NOT EXISTS dlq_entries_args_idx ON %1$I.dlq_entries USING gin (args jsonb_path_ops)', p_schema);
END
$fn$;
