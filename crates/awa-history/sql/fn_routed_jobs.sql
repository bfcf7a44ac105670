-- {schema}.routed_jobs(): every job of every substrate the storage routing
-- reads now (the active one, a transition's target, those still
-- draining), as rows of the `jobs` view: the read view that follows the
-- routing, so a query need not know which substrate holds a job.
-- `awa.routed_jobs()` is the documented entry; every substrate has one.
-- Filter it like the view (`SELECT * FROM awa.routed_jobs() WHERE queue =
-- 'email' AND state = 'failed'`); each substrate's `jobs` view is read in
-- full, so for large histories filter inside one substrate's view instead.
CREATE OR REPLACE FUNCTION {schema}.routed_jobs()
-- jit = off: the views' estimates over never-analyzed ring partitions are
-- far too high, and compiling them costs seconds (see conninfo.rs).
RETURNS SETOF {schema}.jobs LANGUAGE plpgsql STABLE SET jit = off AS $fn$
DECLARE
    v_schema text;
BEGIN
    FOR v_schema IN
        SELECT r.s FROM (
            SELECT t.active_schema AS s, 0 AS o FROM awa.storage_transition_state t
            UNION ALL
            SELECT t.target_schema, 1 FROM awa.storage_transition_state t
             WHERE t.target_schema IS NOT NULL
            UNION ALL
            SELECT d.schema_name, 2 FROM awa.storage_draining d) r
         GROUP BY r.s
         ORDER BY min(r.o), r.s
    LOOP
        RETURN QUERY EXECUTE format('SELECT * FROM %I.jobs', v_schema);
    END LOOP;
END
$fn$;
