-- {schema}.storage_transfer_in(from, limit): move up to `limit` deferred
-- jobs (scheduled, retryable, snoozed, released) and up to `limit`
-- dead-lettered jobs from substrate `from` into this one, in one
-- transaction. Returns how many rows moved. `limit` is 1 to 10000
-- (awa_core::bounds::MAINT_LIMIT; SQLSTATE 22023 otherwise).
--
-- Used while `from` only drains (the old substrate in the mixed phase, a
-- substrate in awa.storage_draining): the leader's transfer task calls it
-- on the write substrate, and storage_finalize calls it until nothing is
-- left. So a retry, snooze or promotion of old work lands in the write
-- substrate, and the old one ends up with nothing but history.
--
-- Safe against everything else that touches those rows: they are not
-- running (no lease, no open claim item), each is taken with FOR UPDATE
-- SKIP LOCKED (a row being promoted, cancelled or retried from the DLQ
-- right now is left for the next pass), and deleted from `from` in the
-- statement that inserts it here. A job keeps its id, attempt count,
-- run_at and unique key: ids and keys are database-wide (awa.job_id_seq,
-- awa.job_uniques), so nothing about the key changes. Attempt records
-- (ADR 11) move with the job.
--
-- The two tables move alike: one statement per table, with the columns
-- read from the catalog (this substrate's table; the other substrate's
-- has the same columns, both made by the same installer and migrations),
-- so a column added to either table moves without a change here.
CREATE OR REPLACE FUNCTION {schema}.storage_transfer_in(p_from text, p_limit integer)
RETURNS integer LANGUAGE plpgsql AS $fn$
DECLARE
    v_table text;
    v_order text;
    v_cols  text;
    v_rows  integer;
    v_moved integer := 0;
BEGIN
    IF p_limit IS NULL OR p_limit NOT BETWEEN 1 AND 10000 THEN
        RAISE EXCEPTION 'storage_transfer_in: limit must be 1 to 10000 (got %)', coalesce(p_limit::text, 'NULL')
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'Rows one maintenance call moves (awa_core::bounds::MAINT_LIMIT); the leader moves 2000 at a time.';
    END IF;
    IF p_from IS NULL OR to_regnamespace(p_from) = to_regnamespace('{schema}') THEN
        RAISE EXCEPTION 'storage_transfer_in: the source must be another substrate (got %)', coalesce(p_from, 'NULL')
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'Call it on the write substrate, naming a substrate that only drains.';
    END IF;
    IF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_class c
                     JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
                    WHERE n.nspname = p_from AND c.relname = 'substrate_info' AND c.relkind = 'r') THEN
        RAISE EXCEPTION 'storage_transfer_in: % is not a substrate', quote_literal(p_from)
            USING ERRCODE = 'invalid_schema_name',
                  HINT = 'Name a prepared substrate (awa storage status lists them).';
    END IF;
    -- Oldest first: deferred jobs by when they run, dead letters by when
    -- they died.
    FOR v_table, v_order IN VALUES ('deferred_jobs', 'run_at'), ('dlq_entries', 'dead_at') LOOP
        SELECT string_agg(quote_ident(a.attname), ', ' ORDER BY a.attnum) INTO v_cols
          FROM pg_catalog.pg_attribute a
         WHERE a.attrelid = format('{schema}.%I', v_table)::regclass
           AND a.attnum > 0 AND NOT a.attisdropped;
        EXECUTE format($q$
            WITH moved AS (
                DELETE FROM %1$I.%2$I d
                 WHERE d.job_id IN (SELECT x.job_id FROM %1$I.%2$I x
                                     ORDER BY x.%3$I LIMIT $1 FOR UPDATE SKIP LOCKED)
                RETURNING %4$s
            )
            INSERT INTO {schema}.%2$I (%4$s)
            SELECT %4$s FROM moved$q$, p_from, v_table, v_order, v_cols) USING p_limit;
        GET DIAGNOSTICS v_rows = ROW_COUNT;
        v_moved := v_moved + v_rows;
    END LOOP;
    RETURN v_moved;
END
$fn$;
