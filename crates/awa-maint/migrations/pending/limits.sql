-- Pending upgrade for branch `limits` (issue 23: rate limits and global
-- concurrency, docs/adr/0015). Runs once, in one transaction, as the
-- migrator; the lead folds it into the next numbered migration.
--
-- What it does not need to say, because the migration's refresh derives
-- it: the substrate tables limit_holds and limit_rates (created by
-- awa.install_exec_plane, which the refresh re-runs on every substrate),
-- the runtime functions claim, limit_take and limit_record (templates),
-- and the runtime role's grants on the new tables (the refresh re-grants
-- the matrix, which classifies them).

-- 1. The limits themselves, database-wide beside queue_meta (the same
--    text as control_schema.sql).
CREATE TABLE IF NOT EXISTS awa.queue_limits (
    queue           text        NOT NULL,
    kind            text        NOT NULL DEFAULT '',
    rate_max        integer     CONSTRAINT queue_limits_rate_max_in_range
                                CHECK (rate_max BETWEEN 1 AND 100000),
    rate_period     interval    CONSTRAINT queue_limits_rate_period_in_range
                                CHECK (rate_period BETWEEN interval '1 second' AND interval '1 day'),
    rate_by         text[]      CONSTRAINT queue_limits_rate_by_path
                                CHECK (cardinality(rate_by) BETWEEN 1 AND 8),
    concurrency_max integer     CONSTRAINT queue_limits_concurrency_in_range
                                CHECK (concurrency_max BETWEEN 1 AND 100000),
    concurrency_by  text[]      CONSTRAINT queue_limits_concurrency_by_path
                                CHECK (cardinality(concurrency_by) BETWEEN 1 AND 8),
    updated_at      timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (queue, kind),
    CONSTRAINT queue_limits_rate_whole CHECK ((rate_max IS NULL) = (rate_period IS NULL)),
    CONSTRAINT queue_limits_rate_by_needs_rate CHECK (rate_by IS NULL OR rate_max IS NOT NULL),
    CONSTRAINT queue_limits_by_needs_concurrency
        CHECK (concurrency_by IS NULL OR concurrency_max IS NOT NULL)
);

-- 2. The substrate state tables, in every substrate, in case the lead's
--    step runs before the refresh (the refresh would create them too;
--    IF NOT EXISTS makes the second a no-op). Same text as
--    install_exec_plane.sql.
DO $limits$
DECLARE
    s record;
BEGIN
    FOR s IN SELECT n.nspname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
              WHERE c.relname = 'substrate_info' AND c.relkind = 'r' LOOP
        EXECUTE format($ddl$
            CREATE TABLE IF NOT EXISTS %1$I.limit_holds (
                queue      text    NOT NULL,
                kind       text    NOT NULL,
                part       text    NOT NULL,
                job_id     bigint  NOT NULL,
                run_lease  bigint  NOT NULL,
                claim_slot integer NOT NULL,
                batch_id   bigint  NOT NULL,
                item       integer NOT NULL,
                PRIMARY KEY (queue, kind, part, job_id, run_lease)
            )$ddl$, s.nspname);
        EXECUTE format($ddl$
            CREATE TABLE IF NOT EXISTS %1$I.limit_rates (
                queue text          NOT NULL,
                kind  text          NOT NULL,
                part  text          NOT NULL,
                at    timestamptz[] NOT NULL,
                n     integer[]     NOT NULL,
                PRIMARY KEY (queue, kind, part)
            ) WITH (fillfactor = 50)$ddl$, s.nspname);
    END LOOP;
END
$limits$;
