-- PgReadyPlane::enqueue_copy, step 1: the session's staging table for
-- COPY, created on first use. A temporary table (no WAL, private to the
-- session, no grant needed beyond PostgreSQL's default TEMPORARY on the
-- database); ON COMMIT DELETE ROWS, and enqueue_input_staged.sql deletes
-- what it consumes, so rows never outlive the call that copied them.
-- Created through to_regclass rather than IF NOT EXISTS, which would send
-- a NOTICE on every call. No parameters.
DO $do$
BEGIN
    IF to_regclass('pg_temp.awa_enqueue_staging') IS NULL THEN
        CREATE TEMPORARY TABLE awa_enqueue_staging (
            ord          bigint   NOT NULL,
            queue        text     NOT NULL,
            kind         text     NOT NULL,
            args         jsonb    NOT NULL,
            priority     smallint NOT NULL,
            max_attempts integer,
            metadata     jsonb
        ) ON COMMIT DELETE ROWS;
    END IF;
END
$do$
