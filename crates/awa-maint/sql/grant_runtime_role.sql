-- awa.grant_runtime_role(role, schema): exactly what workers, the
-- maintenance leader and the job/dlq CLI commands need on one substrate,
-- table by table and operation by operation, and nothing more.
--
-- Why a list and not "ALL TABLES IN SCHEMA": schema awa holds the control
-- tables and the default substrate side by side, and some of them must
-- never be writable by the runtime. awa.substrate_functions holds the code
-- the installer executes as the migrator (a runtime that could write it
-- could run SQL as the migrator); awa.schema_version decides whether any
-- command runs at all (a row 999 locks everybody out); substrate_info is
-- the ring shape every slot computation trusts.
--
-- The matrix (the array c_matrix below is the implementation; keep the two
-- in step). S = SELECT, I = INSERT, U = UPDATE, D = DELETE, T = TRUNCATE.
--
-- Control tables (schema awa, once per database):
--   schema_version            S     every command: compatibility check
--   substrate_functions       -     installer code: migrator only
--   queue_meta                S     enqueue/claim/finish read settings,
--                                   dlq retention; `queue configure` is an
--                                   operator command, run as the owner
--   queue_limits              S     claim reads a queue's rate limits and
--                                   global concurrency (ADR 16); set by
--                                   `queue configure`, run as the owner
--   runtimes                  SIUD  runtime registry: register (upsert),
--                                   touch, deregister, runtime_gc
--   maintenance_leader        SIU   leader record (upsert), storage status
--   cron_jobs                 SIUD  the leader's cron task (read, move last_tick);
--                                   schedules declared at worker start (upsert,
--                                   prune); awa cron add/remove/pause/resume
--   storage_transition_state  S     routing (every runtime reads it; every
--                                   enqueue checks it); storage status.
--                                   Never written by the runtime: the
--                                   transition functions are the migrator's
--   storage_draining          SD    routing reads it; the leader removes a
--                                   substrate once it has drained
--   runtime_storage_backends  SIUD  each runtime registers the substrates it
--                                   uses (upsert, delete what it dropped)
--   queue_health              SIU   health publish (upsert), clear idle
--   queue_minutes             SIUD  health task: activity per minute (upsert),
--                                   rows older than two hours deleted
--   job_uniques               SIUD  enqueue claims a key (U: takes over a
--                                   row past its period, FOR UPDATE);
--                                   finish/cancel release it (D) or mark it
--                                   finished (U) when a key spec keeps it;
--                                   the leader's unique_prune deletes rows
--                                   past their period (database-wide:
--                                   every substrate's functions use it)
--   job_id_seq (sequence)     USAGE enqueue (nextval); never setval
--                                   (database-wide, like job_uniques)
-- Substrate tables (in the substrate's schema):
--   substrate_info            S     ring sizes (ring_slot_count), status
--   ring_ledger               SI    rotate appends generation + 1 (the
--                                   primary key is the compare-and-swap);
--                                   every writer reads its current slot.
--                                   Never U/D: the ledger is append-only,
--                                   and its trigger (ring_ledger_chain)
--                                   accepts only a row ring_rotate would
--                                   write: the next slot, dated now(), off
--                                   a fresh slot onto an empty one
--   ring_retirements          SID   prune: retire marker, dropped after
--                                   truncate or un-retire; terminal_jobs
--   ring_outcomes             SIU   rotate/prune outcome upsert; status
--   lane_heads                SIU   ready_append creates lanes; ready_take
--                                   moves heads and low_gen (FOR UPDATE);
--                                   cancel (ready_tombstone locks FOR UPDATE)
--   ready_sealed              SU    rotate seals queue-ring generations
--                                   (ready_seal); ready_take reads it
--   deferred_jobs             SIUD  enqueue (scheduled), finish (retry,
--                                   snooze, release), promote (FOR UPDATE
--                                   SKIP LOCKED needs U, then D), cancel
--   attempt_state             SIUD  heartbeat upsert; finish/cancel delete
--   parked_attempts           SIUD  prune parks long attempts (exec_park);
--                                   heartbeat updates; finish deletes (the
--                                   guard of a parked attempt); rescue reads
--   worker_buffers            SIUD  each worker engine upserts the jobs it
--                                   holds buffered, deletes its row when it
--                                   stops and expired rows when it starts;
--                                   the read views read it
--   limit_holds               SID   a limited claim inserts the shares its
--                                   jobs hold and deletes closed ones
--   limit_rates               SIU   a limited claim appends its admissions
--                                   (upsert) and prunes them to the period
--   exec_settings             SIU   rescue publishes its bound (upsert);
--                                   workers read it for their cadence
--   history_horizon           SIU   prune moves it on retirement (upsert);
--                                   job dump reads it
--   dlq_entries               SIUD  finish (fail to DLQ), dlq list,
--                                   dlq retry locks the entries it moves
--                                   (FOR UPDATE needs U), dlq
--                                   retry/purge/retention delete
--   failure_entries           SIUD  finish/cancel keep failed and
--                                   cancelled jobs (insert; the upsert
--                                   needs U); retry on demand locks them
--                                   (FOR UPDATE needs U) and deletes; the
--                                   failure_retention task deletes
--   count_rollups             SIU   prune folds deltas (upsert); stats
--   ready_entries             SI    ready_append (enqueue, promote, dlq
--                                   retry); claim/finish/views read
--   ready_tombstones          SI    cancel of a waiting job
--   ready_relocated           SIU   prune's relocation records how far
--                                   it got in a sealed slot (upsert);
--                                   ready_slot_live reads it
--   done_entries              SI    finish: completions of parked attempts
--   done_batches              SI    finish (completions, one row per call
--                                   and slot); views read
--   count_deltas              SID   finish/cancel; prune folds (delete)
--   claim_batches             SI    claim; finish/heartbeat/rescue read
--   claim_floor               SU    the health task's claim_floor_advance
--                                   moves it (the row is made by the
--                                   installer); the read views read it
--   claim_closures            SI    finish, exec_park (the guard: the
--                                   next link's primary key)
--   leases                    SIU   heartbeat
--   <ring family>_<n>         ST    the slot partitions of the eight ring
--                                   families above: ring_slot_empty reads
--                                   them directly; prune locks (T is
--                                   enough for ACCESS EXCLUSIVE) and
--                                   truncates them. Writes go through the
--                                   parent, whose grants apply.
--   terminal_jobs, live_jobs, jobs (views)
--                             S     job dump/list, pending, health, stats
--   live_job_states, lane_entries, open_batch_items (views)
--                             S     health, stats, pending, storage status
--                                   (the parts of live_jobs they read)
--   claim_batch_seq (sequence) USAGE, SELECT  claim (nextval);
--                                   claim_floor_advance reads last_value;
--                                   never setval
--   ready_seq  (sequence)     USAGE, SELECT  ready_append (nextval),
--                                   ready_take reads last_value
-- Functions: EXECUTE on the substrate's runtime functions (those the
-- templates in awa.substrate_functions define) and on nothing else: the
-- installers (awa.install_*), this function and any other function in
-- schema awa or the substrate are revoked from the role and from PUBLIC
-- (PostgreSQL grants EXECUTE to PUBLIC by default). Each runtime function
-- refuses arguments outside awa_core::bounds itself (SQLSTATE 22023, before
-- it writes anything), since the role may call any of them by hand
-- (tests/sql_bounds.rs).
-- Schemas: USAGE on awa and the substrate; never CREATE.
--
-- Every relation of schema awa and of the substrate must be classified
-- here: an unlisted one makes this function refuse (and the roles test
-- fail), so a new table cannot be silently left out or over-granted. To
-- add one, add a row to c_matrix (privileges '' for none) and a
-- line above saying which runtime path needs each operation.
--
-- Re-running converges: every classified relation is first revoked from
-- the role, then granted its row, so older, broader grants are removed.
-- Membership in pg_read_all_stats (so prune can see other sessions'
-- snapshots) needs an administrator and is not granted here.
-- SECURITY INVOKER: the caller must own the objects (the migrator).
CREATE OR REPLACE FUNCTION awa.grant_runtime_role(p_role text, p_schema text DEFAULT 'awa')
RETURNS void LANGUAGE plpgsql SECURITY INVOKER AS $fn$
DECLARE
    -- {scope, name, privileges}. scope 'control': awa.<name>; 'substrate':
    -- <schema>.<name>; 'slot': <schema>.<name>_<n>, the partitions of a
    -- ring family. Privileges '' grant nothing.
    c_matrix constant text[][] := ARRAY[
        ['control',   'schema_version',           'SELECT'],
        ['control',   'substrate_functions',      ''],
        ['control',   'queue_meta',               'SELECT'],
        ['control',   'queue_limits',             'SELECT'],
        ['control',   'runtimes',                 'SELECT, INSERT, UPDATE, DELETE'],
        ['control',   'maintenance_leader',       'SELECT, INSERT, UPDATE'],
        ['control',   'cron_jobs',                'SELECT, INSERT, UPDATE, DELETE'],
        ['control',   'storage_transition_state', 'SELECT'],
        ['control',   'storage_draining',         'SELECT, DELETE'],
        ['control',   'runtime_storage_backends', 'SELECT, INSERT, UPDATE, DELETE'],
        ['control',   'queue_health',             'SELECT, INSERT, UPDATE'],
        ['control',   'queue_minutes',            'SELECT, INSERT, UPDATE, DELETE'],
        ['control',   'job_uniques',              'SELECT, INSERT, UPDATE, DELETE'],
        ['control',   'job_id_seq',               'USAGE'],
        ['substrate', 'substrate_info',           'SELECT'],
        ['substrate', 'ring_ledger',              'SELECT, INSERT'],
        ['substrate', 'ring_retirements',         'SELECT, INSERT, DELETE'],
        ['substrate', 'ring_outcomes',            'SELECT, INSERT, UPDATE'],
        ['substrate', 'lane_heads',               'SELECT, INSERT, UPDATE'],
        ['substrate', 'ready_sealed',             'SELECT, UPDATE'],
        ['substrate', 'deferred_jobs',            'SELECT, INSERT, UPDATE, DELETE'],
        ['substrate', 'attempt_state',            'SELECT, INSERT, UPDATE, DELETE'],
        ['substrate', 'parked_attempts',          'SELECT, INSERT, UPDATE, DELETE'],
        ['substrate', 'worker_buffers',           'SELECT, INSERT, UPDATE, DELETE'],
        ['substrate', 'limit_holds',              'SELECT, INSERT, DELETE'],
        ['substrate', 'limit_rates',              'SELECT, INSERT, UPDATE'],
        ['substrate', 'exec_settings',            'SELECT, INSERT, UPDATE'],
        ['substrate', 'history_horizon',          'SELECT, INSERT, UPDATE'],
        ['substrate', 'dlq_entries',              'SELECT, INSERT, UPDATE, DELETE'],
        ['substrate', 'failure_entries',          'SELECT, INSERT, UPDATE, DELETE'],
        ['substrate', 'count_rollups',            'SELECT, INSERT, UPDATE'],
        ['substrate', 'ready_entries',            'SELECT, INSERT'],
        ['substrate', 'ready_tombstones',         'SELECT, INSERT'],
        ['substrate', 'ready_relocated',          'SELECT, INSERT, UPDATE'],
        ['substrate', 'done_entries',             'SELECT, INSERT'],
        ['substrate', 'done_batches',             'SELECT, INSERT'],
        ['substrate', 'count_deltas',             'SELECT, INSERT, DELETE'],
        ['substrate', 'claim_batches',            'SELECT, INSERT'],
        ['substrate', 'claim_closures',           'SELECT, INSERT'],
        ['substrate', 'claim_floor',              'SELECT, UPDATE'],
        ['substrate', 'leases',                   'SELECT, INSERT, UPDATE'],
        ['substrate', 'terminal_jobs',            'SELECT'],
        ['substrate', 'live_jobs',                'SELECT'],
        ['substrate', 'jobs',                     'SELECT'],
        ['substrate', 'live_job_states',          'SELECT'],
        ['substrate', 'lane_entries',             'SELECT'],
        ['substrate', 'open_batch_items',         'SELECT'],
        ['substrate', 'claim_batch_seq',          'USAGE, SELECT'],
        ['substrate', 'ready_seq',                'USAGE, SELECT'],
        ['slot',      'ready_entries',            'SELECT, TRUNCATE'],
        ['slot',      'ready_tombstones',         'SELECT, TRUNCATE'],
        ['slot',      'done_entries',             'SELECT, TRUNCATE'],
        ['slot',      'done_batches',             'SELECT, TRUNCATE'],
        ['slot',      'count_deltas',             'SELECT, TRUNCATE'],
        ['slot',      'claim_batches',            'SELECT, TRUNCATE'],
        ['slot',      'claim_closures',           'SELECT, TRUNCATE'],
        ['slot',      'leases',                   'SELECT, TRUNCATE']];
    v_rel record;
    v_fn  record;
    v_unclassified text;
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

    -- Classify every relation of both schemas; refuse on a stranger.
    WITH matrix AS (
        SELECT c_matrix[i][1] AS scope, c_matrix[i][2] AS name FROM generate_subscripts(c_matrix, 1) i
    )
    SELECT string_agg(format('%I.%I', n.nspname, c.relname), ', ' ORDER BY n.nspname, c.relname)
      INTO v_unclassified
      FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
     WHERE n.nspname IN ('awa', p_schema) AND c.relkind IN ('r', 'p', 'v', 'm', 'S', 'f')
       AND NOT EXISTS (SELECT 1 FROM matrix m
                        WHERE (m.scope = 'control' AND n.nspname = 'awa' AND c.relname = m.name)
                           OR (m.scope = 'substrate' AND c.relname = m.name)
                           OR (m.scope = 'slot' AND c.relname ~ ('^' || m.name || '_[0-9]+$')));
    IF v_unclassified IS NOT NULL THEN
        RAISE EXCEPTION 'relations not classified in the runtime privileges matrix: %', v_unclassified
            USING ERRCODE = 'object_not_in_prerequisite_state',
                  HINT = 'Add each to the matrix in crates/awa-maint/sql/grant_runtime_role.sql, saying which runtime path needs which operation (privileges '''' for none).';
    END IF;

    EXECUTE format('REVOKE CREATE ON SCHEMA awa, %I FROM %I', p_schema, p_role);
    EXECUTE format('GRANT USAGE ON SCHEMA awa, %I TO %I', p_schema, p_role);

    -- The control tables, and the relations of this substrate only (another
    -- substrate's grants, such as the default one in awa, stay as they are).
    FOR v_rel IN
        WITH matrix AS (
            SELECT c_matrix[i][1] AS scope, c_matrix[i][2] AS name, c_matrix[i][3] AS privileges
              FROM generate_subscripts(c_matrix, 1) i
        )
        SELECT n.nspname, c.relname, m.privileges,
               CASE WHEN c.relkind = 'S' THEN 'SEQUENCE' ELSE 'TABLE' END AS kind
          FROM pg_catalog.pg_class c
          JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
          JOIN matrix m
            ON (m.scope = 'control' AND n.nspname = 'awa' AND c.relname = m.name)
            OR (m.scope = 'substrate' AND n.nspname = p_schema AND c.relname = m.name)
            OR (m.scope = 'slot' AND n.nspname = p_schema AND c.relname ~ ('^' || m.name || '_[0-9]+$'))
         WHERE c.relkind IN ('r', 'p', 'v', 'm', 'S', 'f')
    LOOP
        EXECUTE format('REVOKE ALL ON %s %I.%I FROM %I', v_rel.kind, v_rel.nspname, v_rel.relname, p_role);
        IF v_rel.privileges <> '' THEN
            -- The privilege list is a constant of the matrix above.
            EXECUTE format('GRANT %s ON %s %I.%I TO %I', v_rel.privileges, v_rel.kind,
                           v_rel.nspname, v_rel.relname, p_role);
        END IF;
    END LOOP;

    -- Functions: the runtime functions the templates define, in this
    -- substrate, to the role; every other function of awa and the substrate
    -- (installers, this one) to nobody. The runtime functions of another
    -- substrate (the default one in awa) keep their own grants.
    FOR v_fn IN
        SELECT p.oid::regprocedure AS sig, n.nspname,
               p.proname IN (
                   SELECT (regexp_matches(f.body, 'CREATE OR REPLACE FUNCTION \{schema\}\.([a-z0-9_]+)\s*\(', 'g'))[1]
                     FROM awa.substrate_functions f) AS runtime
          FROM pg_catalog.pg_proc p JOIN pg_catalog.pg_namespace n ON n.oid = p.pronamespace
         WHERE n.nspname IN ('awa', p_schema)
    LOOP
        EXECUTE format('REVOKE ALL ON FUNCTION %s FROM PUBLIC', v_fn.sig);
        IF v_fn.runtime AND v_fn.nspname = p_schema THEN
            EXECUTE format('GRANT EXECUTE ON FUNCTION %s TO %I', v_fn.sig, p_role);
        ELSIF NOT v_fn.runtime THEN
            EXECUTE format('REVOKE ALL ON FUNCTION %s FROM %I', v_fn.sig, p_role);
        END IF;
    END LOOP;
END
$fn$;
