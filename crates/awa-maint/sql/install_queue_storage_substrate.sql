-- awa.install_queue_storage_substrate(schema, queue_slots, lease_slots, claim_slots)
--
-- The single source of substrate DDL: the default substrate in schema awa is
-- installed by calling this, and so is every custom one.
--
-- * Idempotent: re-running with the same shape completes anything missing
--   and changes nothing else.
-- * Serialized per schema by an advisory transaction lock, so concurrent
--   installs of one schema queue up instead of racing on CREATE.
-- * SECURITY INVOKER: the caller needs DDL rights on the target schema; the
--   function grants nothing to anybody.
-- * Activation-neutral: it never reads or writes storage_transition_state or
--   runtime_storage_backends. Preparing a schema routes no work to it.
-- * It never resizes: asked for another shape than the one installed, it
--   refuses, because moving live ring slots is not something DDL can do
--   safely under load.
--
-- Returns 'installed' or 'unchanged'.

-- Templates of the per-substrate runtime functions (enqueue, claim, finish,
-- ...). Each plane writes its functions against the placeholder {schema};
-- the installer instantiates every template for the schema it installs.
-- Kept in a table so a custom substrate prepared long after migrating gets
-- exactly the functions of the schema version in force.
CREATE TABLE IF NOT EXISTS awa.substrate_functions (
    name text    PRIMARY KEY,
    ord  integer NOT NULL,
    body text    NOT NULL
);

CREATE OR REPLACE FUNCTION awa.install_queue_storage_substrate(
    p_schema            text,
    p_queue_slot_count  integer DEFAULT 16,
    p_lease_slot_count  integer DEFAULT 8,
    p_claim_slot_count  integer DEFAULT 8
) RETURNS text LANGUAGE plpgsql SECURITY INVOKER AS $fn$
DECLARE
    c_min_slots constant integer := 4;
    c_max_slots constant integer := 256;
    v_existing record;
    v_info_exists boolean;
    v_was_installed boolean := false;
    v_fn record;
BEGIN
    IF p_schema IS NULL
       OR p_schema !~ '^[a-z_][a-z0-9_]*$'
       OR octet_length(p_schema) > 63 THEN
        RAISE EXCEPTION 'invalid substrate schema name %', quote_literal(coalesce(p_schema, 'NULL'))
            USING ERRCODE = 'invalid_name',
                  HINT = 'Use 1 to 63 lowercase ASCII letters, digits and _, starting with a letter or _.';
    END IF;
    IF p_schema LIKE 'pg\_%' OR p_schema IN ('public', 'information_schema') THEN
        RAISE EXCEPTION 'schema % is reserved and cannot hold a substrate', p_schema
            USING ERRCODE = 'invalid_name',
                  HINT = 'Pick a new schema name that does not start with pg_.';
    END IF;
    IF p_queue_slot_count IS NULL OR p_queue_slot_count NOT BETWEEN c_min_slots AND c_max_slots
       OR p_lease_slot_count IS NULL OR p_lease_slot_count NOT BETWEEN c_min_slots AND c_max_slots
       OR p_claim_slot_count IS NULL OR p_claim_slot_count NOT BETWEEN c_min_slots AND c_max_slots THEN
        RAISE EXCEPTION 'slot counts must each be between % and % (got queue=%, lease=%, claim=%)',
                c_min_slots, c_max_slots, p_queue_slot_count, p_lease_slot_count, p_claim_slot_count
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'The default shape is 16 queue, 8 lease and 8 claim slots.';
    END IF;
    IF p_schema = 'awa' AND (p_queue_slot_count, p_lease_slot_count, p_claim_slot_count) <> (16, 8, 8) THEN
        RAISE EXCEPTION 'the default substrate awa has the fixed shape 16/8/8 and cannot be sized otherwise'
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'Prepare a custom schema (awa storage prepare-queue-storage-schema --schema NAME ...) for a differently sized substrate.';
    END IF;

    -- Class id 0x617761 ("awa") keeps our lock space apart from the
    -- application's single-bigint advisory locks.
    PERFORM pg_advisory_xact_lock(6387553, hashtext('substrate:' || p_schema));

    SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_class c
                     JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
                    WHERE n.nspname = p_schema AND c.relname = 'substrate_info')
      INTO v_info_exists;
    IF v_info_exists THEN
        EXECUTE format('SELECT queue_slot_count, lease_slot_count, claim_slot_count FROM %I.substrate_info', p_schema)
           INTO v_existing;
        -- EXECUTE .. INTO does not set FOUND; no row leaves the fields NULL.
        IF v_existing.queue_slot_count IS NOT NULL THEN
            v_was_installed := true;
            IF (v_existing.queue_slot_count, v_existing.lease_slot_count, v_existing.claim_slot_count)
               <> (p_queue_slot_count, p_lease_slot_count, p_claim_slot_count) THEN
                RAISE EXCEPTION 'substrate % already exists with % queue, % lease and % claim slots; it cannot be resized to %/%/%',
                        p_schema, v_existing.queue_slot_count, v_existing.lease_slot_count, v_existing.claim_slot_count,
                        p_queue_slot_count, p_lease_slot_count, p_claim_slot_count
                    USING ERRCODE = 'invalid_parameter_value',
                          HINT = 'Prepare a new schema with the shape you want and move to it with the storage transition commands (or --reset an unused custom schema).';
            END IF;
        END IF;
    END IF;

    -- The install runs in one transaction, so a custom schema with objects
    -- but no substrate_info was not made by us: refuse to mix our tables
    -- into it. (Schema awa is ours; the control objects live there too.)
    IF NOT v_info_exists AND p_schema <> 'awa' AND EXISTS (
        SELECT 1 FROM pg_catalog.pg_class c
          JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
         WHERE n.nspname = p_schema) THEN
        RAISE EXCEPTION 'schema % already exists and holds objects that are not an Awa substrate', p_schema
            USING ERRCODE = 'duplicate_schema',
                  HINT = 'Choose a schema name that is not in use.';
    END IF;

    EXECUTE format('CREATE SCHEMA IF NOT EXISTS %I', p_schema);
    PERFORM awa.install_control_plane(p_schema, p_queue_slot_count, p_lease_slot_count, p_claim_slot_count);
    PERFORM awa.install_ready_plane(p_schema, p_queue_slot_count);
    PERFORM awa.install_deferred_plane(p_schema);
    PERFORM awa.install_exec_plane(p_schema, p_lease_slot_count, p_claim_slot_count);
    PERFORM awa.install_history_plane(p_schema, p_queue_slot_count);
    PERFORM awa.install_dlq_plane(p_schema);
    -- Runtime functions come last: they may refer to any plane's tables.
    FOR v_fn IN SELECT f.body FROM awa.substrate_functions f ORDER BY f.ord LOOP
        EXECUTE replace(v_fn.body, '{schema}', quote_ident(p_schema));
    END LOOP;
    -- PostgreSQL lets PUBLIC execute every new function; nobody but the
    -- owner and a role granted by awa.grant_runtime_role may run ours (in
    -- schema awa this also covers the installers themselves).
    EXECUTE format('REVOKE EXECUTE ON ALL FUNCTIONS IN SCHEMA %I FROM PUBLIC', p_schema);

    IF v_was_installed THEN
        RETURN 'unchanged';
    END IF;
    EXECUTE format('INSERT INTO %I.substrate_info (queue_slot_count, lease_slot_count, claim_slot_count) VALUES ($1, $2, $3)', p_schema)
      USING p_queue_slot_count, p_lease_slot_count, p_claim_slot_count;
    RETURN 'installed';
END
$fn$;
