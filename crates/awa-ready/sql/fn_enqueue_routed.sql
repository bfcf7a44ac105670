-- {schema}.enqueue(queues, kinds, args, priorities, run_at, max_attempts,
--                  unique_keys, metadata [, unique]): the public SQL
-- producer function (contract version 1; docs/sql-producer.md; the
-- trailing key specs are optional, so version-1 calls are unchanged).
-- Arguments, result and errors are those of {schema}.enqueue_local
-- (fn_enqueue.sql).
--
-- Routing: the jobs go to the substrate the storage-transition state says
-- receives writes now (awa.storage_transition_state: the active substrate,
-- or the target while a transition is mixed), whichever substrate's
-- enqueue was called. So `awa.enqueue(...)` is a stable entry point for
-- any producer (raw SQL, the Python client), and a caller whose idea of
-- the routing is stale still writes where the state says, in its own
-- transaction. Under READ COMMITTED the state is read by this call; under
-- REPEATABLE READ or SERIALIZABLE it is the state of the transaction's
-- snapshot, so a transaction begun before a step may still write where
-- the routing was (the transition keeps reading that substrate until such
-- transactions are gone: see storage_draining in control_schema.sql).
-- Forwarding to another substrate costs a dynamic statement; the Rust
-- client avoids it by calling the write substrate's enqueue directly.
CREATE OR REPLACE FUNCTION {schema}.enqueue(
    p_queues       text[],
    p_kinds        text[],
    p_args         jsonb[],
    p_priorities   smallint[],
    p_run_at       timestamptz[],
    p_max_attempts integer[],
    p_unique_keys  text[],
    p_metadata     jsonb[],
    p_unique       jsonb[] DEFAULT NULL
) RETURNS TABLE (job_id bigint, inserted boolean, scheduled boolean)
LANGUAGE plpgsql AS $fn$
DECLARE
    v_write text;
BEGIN
    SELECT CASE WHEN t.state = 'mixed' THEN t.target_schema ELSE t.active_schema END
      INTO v_write FROM awa.storage_transition_state t;
    IF to_regnamespace(v_write) IS NOT DISTINCT FROM to_regnamespace('{schema}') THEN
        RETURN QUERY SELECT * FROM {schema}.enqueue_local(
            p_queues, p_kinds, p_args, p_priorities, p_run_at, p_max_attempts,
            p_unique_keys, p_metadata, p_unique);
    ELSE
        RETURN QUERY EXECUTE format(
            'SELECT * FROM %I.enqueue_local($1, $2, $3, $4, $5, $6, $7, $8, $9)', v_write)
            USING p_queues, p_kinds, p_args, p_priorities, p_run_at, p_max_attempts,
                  p_unique_keys, p_metadata, p_unique;
    END IF;
END
$fn$;
