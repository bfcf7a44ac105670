-- awa.grant_runtime_role(role, schema): what workers and the maintenance
-- leader need on one substrate, and nothing more: no DDL anywhere.
--   * USAGE on schema awa and the substrate schema
--   * DML on the substrate's tables and the control tables they write
--   * TRUNCATE on ring partitions only (guarded reclamation)
--   * sequences and the substrate's runtime functions
-- Membership in pg_read_all_stats (so prune can see other sessions'
-- snapshots) needs an administrator and is not granted here.
-- Idempotent; SECURITY INVOKER: the caller must own the objects.
CREATE OR REPLACE FUNCTION awa.grant_runtime_role(p_role text, p_schema text DEFAULT 'awa')
RETURNS void LANGUAGE plpgsql SECURITY INVOKER AS $fn$
DECLARE
    v_table record;
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = p_role) THEN
        RAISE EXCEPTION 'role % does not exist', quote_literal(p_role)
            USING ERRCODE = 'undefined_object', HINT = 'Create it first: CREATE ROLE ... LOGIN.';
    END IF;
    IF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
                    WHERE n.nspname = p_schema AND c.relname = 'substrate_info') THEN
        RAISE EXCEPTION 'schema % is not an Awa substrate', quote_literal(p_schema)
            USING ERRCODE = 'invalid_schema_name', HINT = 'Prepare it first with awa storage prepare-queue-storage-schema.';
    END IF;
    EXECUTE format('GRANT USAGE ON SCHEMA awa, %I TO %I', p_schema, p_role);
    EXECUTE format('GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA %I TO %I', p_schema, p_role);
    EXECUTE format('GRANT USAGE, SELECT, UPDATE ON ALL SEQUENCES IN SCHEMA %I TO %I', p_schema, p_role);
    EXECUTE format('GRANT EXECUTE ON ALL FUNCTIONS IN SCHEMA %I TO %I', p_schema, p_role);
    EXECUTE format('GRANT SELECT ON awa.schema_version, awa.storage_transition_state, awa.cron_jobs TO %I', p_role);
    EXECUTE format('GRANT SELECT, INSERT, UPDATE, DELETE ON awa.queue_meta, awa.runtimes, awa.maintenance_leader,
                    awa.queue_health, awa.runtime_storage_backends TO %I', p_role);
    FOR v_table IN
        SELECT c.relname FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
         WHERE n.nspname = p_schema AND c.relkind = 'r'
           AND c.relname ~ '^(ready_entries|ready_tombstones|done_entries|count_deltas|claim_receipts|claim_closures|leases)_[0-9]+$'
    LOOP
        EXECUTE format('GRANT TRUNCATE ON %I.%I TO %I', p_schema, v_table.relname, p_role);
    END LOOP;
END
$fn$;
