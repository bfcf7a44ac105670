-- Awa migration 2: edges uniqueness attempt history priority activity
--
-- Drafted by `cargo xtask migration draft` (hand-written parts first, then
-- what the sources define), then reviewed. Frozen once on main: never edit
-- it, add a new step. Runs once, in one transaction, as the migrator.

-- Hand-written: edges-runtime.sql
-- Pending migration of branch edges-runtime (issue 20, items 8 and 9).
-- Runs once, in one transaction, as the migrator.
--
-- 1. Priority (item 9): 1 now runs first and 4 last (docs/adr/0012). Until now 4
--    ran first. Every stored priority p becomes 5 - p, so every job keeps
--    its place in the run order across the upgrade (a backlog of former
--    "4" jobs still runs before former "1" jobs), and the number shown
--    for it is the one that means that place now. The default moves from
--    2 to 3 for the same reason: former default jobs (2) become 3, the
--    lane new default jobs join, so FIFO among default jobs holds across
--    the upgrade. Lane keys (queue, priority, shard) are rewritten
--    everywhere they are stored together: ready entries, lane heads, the
--    item arrays of claim and done batches (which find bodies by lane
--    key), parked attempts; plus deferred jobs, dead letters, the bodies
--    copied into done_entries, and cron schedules. The statements take
--    row locks on lane heads, so a claim running at the same time waits
--    for the commit and then sees only the new keys. Cost: one rewrite of
--    every row of those tables (run it when the rings are small).

-- Cron schedules (database-wide): remap, and the new default.
UPDATE awa.cron_jobs SET priority = 5 - priority;
ALTER TABLE awa.cron_jobs ALTER COLUMN priority SET DEFAULT 3;

DO $migration$
DECLARE
    v_schema name;
BEGIN
    -- Every substrate: the schemas holding a substrate_info table.
    FOR v_schema IN
        SELECT n.nspname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
         WHERE c.relname = 'substrate_info' AND c.relkind = 'r'
         ORDER BY n.nspname
    LOOP
        -- Lane heads: the primary key (queue, priority, shard) would
        -- collide mid-statement if swapped in place (1 <-> 4), so move
        -- every key out of range first, then into its new place.
        EXECUTE format('UPDATE %I.lane_heads SET priority = priority + 10', v_schema);
        EXECUTE format('UPDATE %I.lane_heads SET priority = 15 - priority', v_schema);
        -- Bodies (every slot: completed jobs' bodies stay here for history).
        EXECUTE format('UPDATE %I.ready_entries SET priority = 5 - priority', v_schema);
        -- Claim and done batches name each item's body by lane key.
        EXECUTE format($sql$
            UPDATE %I.claim_batches
               SET priorities = ARRAY(SELECT (5 - p)::smallint
                                        FROM unnest(priorities) WITH ORDINALITY AS u(p, i)
                                       ORDER BY i)$sql$, v_schema);
        EXECUTE format($sql$
            UPDATE %I.done_batches
               SET priorities = ARRAY(SELECT (5 - p)::smallint
                                        FROM unnest(priorities) WITH ORDINALITY AS u(p, i)
                                       ORDER BY i)$sql$, v_schema);
        EXECUTE format('UPDATE %I.parked_attempts SET priority = 5 - priority', v_schema);
        EXECUTE format('UPDATE %I.deferred_jobs SET priority = 5 - priority', v_schema);
        EXECUTE format('UPDATE %I.dlq_entries SET priority = 5 - priority', v_schema);
        -- Failed and cancelled jobs' bodies (job_body's JSON).
        EXECUTE format($sql$
            UPDATE %I.done_entries
               SET body = jsonb_set(body, '{priority}', to_jsonb(5 - (body ->> 'priority')::integer))
             WHERE body ? 'priority'$sql$, v_schema);
    END LOOP;
END
$migration$;

-- 2. Buffered is not running (issue 20, item 8): each worker engine says
--    which claimed jobs wait in its local buffer, not started, in one row
--    of {schema}.worker_buffers (awa-exec install_exec_plane.sql); the read
--    views (view_jobs.sql, a template regenerated with the functions)
--    show those as 'buffered'. Create the table in every substrate, and
--    give it to every role that holds the runtime grants there (the
--    grant_runtime_role matrix: SELECT, INSERT, UPDATE, DELETE), found by
--    its INSERT grant on claim_batches. This must run before the view
--    templates are regenerated (they read the table).
DO $migration$
DECLARE
    v_schema name;
    v_role   name;
BEGIN
    FOR v_schema IN
        SELECT n.nspname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
         WHERE c.relname = 'substrate_info' AND c.relkind = 'r'
         ORDER BY n.nspname
    LOOP
        EXECUTE format($ddl$
            CREATE TABLE IF NOT EXISTS %1$I.worker_buffers (
                instance_id uuid        PRIMARY KEY,
                job_ids     bigint[]    NOT NULL,
                updated_at  timestamptz NOT NULL DEFAULT now()
            ) WITH (fillfactor = 50)$ddl$, v_schema);
        FOR v_role IN
            SELECT DISTINCT r.rolname
              FROM pg_class c
             CROSS JOIN LATERAL aclexplode(c.relacl) a
              JOIN pg_roles r ON r.oid = a.grantee
             WHERE c.oid = format('%I.claim_batches', v_schema)::regclass
               AND a.privilege_type = 'INSERT'
               AND a.grantee <> c.relowner
        LOOP
            EXECUTE format('GRANT SELECT, INSERT, UPDATE, DELETE ON %I.worker_buffers TO %I',
                           v_schema, v_role);
        END LOOP;
    END LOOP;
END
$migration$;

-- Hand-written: edges-sql.sql
-- Upgrade for branch edges-sql (issue 20, items 1 to 5): brings a database
-- migrated to version 1 before this branch to the shape a fresh install of
-- this branch has. Runs once, in one transaction, as the migrator. Runtime
-- function templates (fn_*.sql) and CREATE OR REPLACE FUNCTION bodies are
-- regenerated by the migration tooling and are not repeated here.

-- 1. awa.cron_jobs: why the leader could not fire a schedule (item 2). The
--    leader records the error, skips the schedule and fires the others;
--    `awa cron list`, /api/cron and the dashboard show it. Both columns
--    are nullable without a default, so existing rows need no rewrite;
--    they are the table's last columns, as in a fresh install.
ALTER TABLE awa.cron_jobs
    ADD COLUMN IF NOT EXISTS error       text,
    ADD COLUMN IF NOT EXISTS error_since timestamptz;

-- 2. Every substrate's ring_ledger trigger function (item 4): an appended
--    row must be one ring_rotate would write (the next slot, dated now(),
--    off a fresh slot onto an empty one), so the runtime role's INSERT
--    right cannot date a rotation in 1970 (ending a slot's history at
--    once) or rotate onto live rows. The function is created by the
--    control-plane installer per substrate, not from a template, so it is
--    replaced here in each substrate, with the installer's text.
DO $upgrade$
DECLARE
    v_schema text;
BEGIN
    FOR v_schema IN
        SELECT n.nspname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
         WHERE c.relname = 'substrate_info' AND c.relkind = 'r'
    LOOP
    -- The installer's text unindented, so the body is the same as a fresh
    -- install's.
    EXECUTE format($ddl$
        CREATE OR REPLACE FUNCTION %1$I.ring_ledger_chain_check() RETURNS trigger
        LANGUAGE plpgsql AS $trg$
        DECLARE
            v_prev  integer;
            v_slots integer;
        BEGIN
            IF EXISTS (SELECT 1 FROM %1$I.ring_ledger l
                        WHERE l.ring = NEW.ring AND l.generation = NEW.generation) THEN
                RETURN NEW;
            END IF;
            SELECT l.slot INTO v_prev FROM %1$I.ring_ledger l
             WHERE l.ring = NEW.ring AND l.generation = NEW.generation - 1;
            SELECT CASE NEW.ring WHEN 'queue' THEN i.queue_slot_count
                                 WHEN 'lease' THEN i.lease_slot_count
                                 ELSE i.claim_slot_count END
              INTO v_slots FROM %1$I.substrate_info i;
            IF v_prev IS NULL OR v_slots IS NULL OR NEW.slot <> (v_prev + 1) %% v_slots THEN
                RAISE EXCEPTION 'ring_ledger: %% generation %% must follow generation %% in the next slot',
                                NEW.ring, NEW.generation, NEW.generation - 1
                      USING ERRCODE = 'check_violation',
                            HINT = 'Rings move only through ring_rotate.';
            END IF;
            IF NEW.rotated_at IS DISTINCT FROM now() THEN
                RAISE EXCEPTION 'ring_ledger: %% generation %% must be dated now (%%), not %%',
                                NEW.ring, NEW.generation, now(), NEW.rotated_at
                      USING ERRCODE = 'check_violation',
                            HINT = 'Rings move only through ring_rotate.';
            END IF;
            IF NOT %1$I.ring_slot_fresh(NEW.ring, v_prev) THEN
                RAISE EXCEPTION 'ring_ledger: %% slot %% holds nothing new to seal',
                                NEW.ring, v_prev
                      USING ERRCODE = 'check_violation',
                            HINT = 'Rings move only through ring_rotate.';
            END IF;
            IF NOT %1$I.ring_slot_empty(NEW.ring, NEW.slot)
               OR EXISTS (SELECT 1 FROM %1$I.ring_retirements x
                           WHERE x.ring = NEW.ring AND x.slot = NEW.slot) THEN
                RAISE EXCEPTION 'ring_ledger: %% slot %% still holds rows or awaits truncation',
                                NEW.ring, NEW.slot
                      USING ERRCODE = 'check_violation',
                            HINT = 'Rings move only through ring_rotate.';
            END IF;
            RETURN NEW;
        END
        $trg$$ddl$, v_schema);
    END LOOP;
END
$upgrade$;

-- Hand-written: ops-history.sql
-- Issue 22 (ADR 11): attempt records travel with the job, failures and
-- cancellations are kept outside the rings for a retention of their own.
-- Runs once, in one transaction, as the migrator, before the changed
-- functions and the refresh (which re-runs every installer: that creates
-- the new indexes of dlq_entries and failure_entries and replaces the
-- terminal_jobs view; the templates replace live_jobs, jobs and the
-- runtime functions; the runtime role is re-granted the matrix, which now
-- classifies failure_entries).
DO $ops_history$
DECLARE
    s text;
BEGIN
    FOR s IN SELECT n.nspname
               FROM pg_catalog.pg_class c
               JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
              WHERE c.relname = 'substrate_info' AND c.relkind = 'r'
              ORDER BY n.nspname LOOP
        -- 1. The failure retention setting (default 7 days), at the end of
        --    substrate_info as in install_control_plane.sql.
        EXECUTE format($q$
            ALTER TABLE %I.substrate_info
              ADD COLUMN failure_retention interval NOT NULL DEFAULT interval '7 days'
                CONSTRAINT substrate_info_failure_retention_in_range
                CHECK (failure_retention BETWEEN interval '1 second' AND interval '3650 days')$q$, s);

        -- 2. The attempt records column on every table that carries a
        --    job's body (NULL: none recorded), last in each as in the
        --    installers. On a partitioned parent it reaches every slot.
        EXECUTE format('ALTER TABLE %I.ready_entries ADD COLUMN attempts jsonb', s);
        EXECUTE format('ALTER TABLE %I.deferred_jobs ADD COLUMN attempts jsonb', s);
        EXECUTE format('ALTER TABLE %I.parked_attempts ADD COLUMN attempts jsonb', s);
        EXECUTE format('ALTER TABLE %I.dlq_entries ADD COLUMN attempts jsonb', s);
        EXECUTE format('ALTER TABLE %I.done_entries ADD COLUMN attempts jsonb', s);

        -- 3. ready_tombstone returns the body's columns and its attempt
        --    records now: CREATE OR REPLACE cannot change a result type, so
        --    the old one goes and the template creates it anew. (The draft
        --    drops ready_append's old signature itself: it gained an
        --    argument, p_histories.)
        EXECUTE format('DROP FUNCTION IF EXISTS %I.ready_tombstone(bigint)', s);

        -- 4. failure_entries, exactly as install_history_plane.sql creates
        --    it (the refresh then finds it there), so step 5 can fill it.
        EXECUTE format($q$
            CREATE TABLE IF NOT EXISTS %1$I.failure_entries (
                job_id       bigint      PRIMARY KEY,
                run_lease    bigint      NOT NULL,
                queue        text        NOT NULL,
                state        text        NOT NULL CHECK (state IN ('failed', 'cancelled')),
                attempt      integer     NOT NULL,
                priority     smallint    NOT NULL,
                kind         text        NOT NULL,
                args         jsonb       NOT NULL,
                max_attempts integer     NOT NULL,
                created_at   timestamptz NOT NULL,
                finalized_at timestamptz NOT NULL DEFAULT now(),
                unique_key   text,
                metadata     jsonb,
                last_error   text,
                attempts     jsonb
            )$q$, s);

        -- 5. Failed and cancelled jobs still in the ring move to
        --    failure_entries (kept for the retention, retryable) and leave
        --    done_entries, so no job is listed twice. Facts of slots
        --    already retired are gone for readers and stay to be truncated.
        --    Their count deltas stay where they are: totals do not change.
        --    A job with two facts (not possible before this step) keeps the
        --    newer.
        EXECUTE format($q$
            WITH moved AS (
                DELETE FROM %1$I.done_entries d
                 WHERE d.state IN ('failed', 'cancelled')
                   AND NOT EXISTS (SELECT 1 FROM %1$I.ring_retirements x
                                    WHERE x.ring = 'queue' AND x.slot = d.slot)
                RETURNING d.*
            )
            INSERT INTO %1$I.failure_entries
                (job_id, run_lease, queue, state, attempt, priority, kind, args, max_attempts,
                 created_at, finalized_at, unique_key, metadata, last_error, attempts)
            SELECT DISTINCT ON (m.job_id)
                   m.job_id, m.run_lease, m.queue, m.state, m.attempt,
                   (m.body ->> 'priority')::smallint, m.body ->> 'kind', m.body -> 'args',
                   (m.body ->> 'max_attempts')::integer, (m.body ->> 'created_at')::timestamptz,
                   m.finalized_at, NULL, nullif(m.body -> 'metadata', 'null'::jsonb), m.last_error, NULL
              FROM moved m
             ORDER BY m.job_id, m.run_lease DESC
            ON CONFLICT (job_id) DO NOTHING$q$, s);
    END LOOP;
END
$ops_history$;

-- Hand-written: ops-surface.sql
-- ops-surface (issue 22, the operator's surface): bring an existing
-- database to the sources' shape. Runs once, in one transaction, as the
-- migrator; functions, templates and the runtime grants are refreshed by
-- the step's generated part.

-- 1. awa.queue_minutes: activity per queue and minute over the last two
--    hours (the dashboard's charts), written by the maintenance leader's
--    health task. A control table (once per database, in schema awa), so
--    the substrate refresh does not create it. The refresh's re-grant of
--    the runtime matrix gives roles that hold it SELECT, INSERT, UPDATE,
--    DELETE here.
CREATE TABLE IF NOT EXISTS awa.queue_minutes (
    schema_name     text             NOT NULL,
    queue           text             NOT NULL,
    minute          timestamptz      NOT NULL,
    completed       bigint           NOT NULL DEFAULT 0,
    failed          bigint           NOT NULL DEFAULT 0,
    cancelled       bigint           NOT NULL DEFAULT 0,
    dead_lettered   bigint           NOT NULL DEFAULT 0,
    claims_sampled  integer          NOT NULL DEFAULT 0,
    pickup_avg_secs double precision,
    pickup_max_secs double precision,
    wait_max_secs   double precision,
    measured_at     timestamptz      NOT NULL DEFAULT now(),
    PRIMARY KEY (schema_name, queue, minute)
);

-- Hand-written: unique.sql
-- Issue 23 (uniqueness by kind, queue, args or args fields, over a period
-- and across chosen final states; ADR 10): awa.job_uniques records how long
-- a key spec keeps a key after its job finished.
--
-- The new columns go at the end, as in control_schema.sql. Existing rows
-- are keys without a spec: NULL in all three, released when their job
-- finishes, exactly as before.
ALTER TABLE awa.job_uniques
    ADD COLUMN hold_until  timestamptz,
    ADD COLUMN hold_states text[],
    ADD COLUMN finished_at timestamptz;

-- The shape of a hold (both or neither; known final states only; a
-- finished row only while it holds), as in control_schema.sql.
ALTER TABLE awa.job_uniques
    ADD CONSTRAINT job_uniques_hold_check CHECK (
        (hold_until IS NULL) = (hold_states IS NULL)
        AND hold_states <@ ARRAY['completed', 'failed', 'cancelled']::text[]
        AND cardinality(hold_states) > 0
        AND (finished_at IS NULL OR hold_until IS NOT NULL));

-- unique_prune's index: finished rows by the end of their period.
CREATE INDEX job_uniques_expiry_idx ON awa.job_uniques (hold_until)
    WHERE finished_at IS NOT NULL;

-- The runtime role gains UPDATE on job_uniques (takeover, finished marks):
-- the refresh at the end of the step re-grants the matrix to every role
-- that holds it. The changed producer functions (awa.enqueue and
-- enqueue_local take an optional trailing argument, unique_take a third)
-- are new signatures: the derived part of the step drops the old ones in
-- every substrate before the refresh creates the new ones.

-- Control functions, installers and helpers, as the sources define them.
CREATE OR REPLACE FUNCTION awa.grant_runtime_role(p_role text, p_schema text DEFAULT 'awa'::text)
 RETURNS void
 LANGUAGE plpgsql
AS $function$
DECLARE
    -- {scope, name, privileges}. scope 'control': awa.<name>; 'substrate':
    -- <schema>.<name>; 'slot': <schema>.<name>_<n>, the partitions of a
    -- ring family. Privileges '' grant nothing.
    c_matrix constant text[][] := ARRAY[
        ['control',   'schema_version',           'SELECT'],
        ['control',   'substrate_functions',      ''],
        ['control',   'queue_meta',               'SELECT'],
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
        ['substrate', 'deferred_jobs',            'SELECT, INSERT, UPDATE, DELETE'],
        ['substrate', 'attempt_state',            'SELECT, INSERT, UPDATE, DELETE'],
        ['substrate', 'parked_attempts',          'SELECT, INSERT, UPDATE, DELETE'],
        ['substrate', 'worker_buffers',           'SELECT, INSERT, UPDATE, DELETE'],
        ['substrate', 'exec_settings',            'SELECT, INSERT, UPDATE'],
        ['substrate', 'history_horizon',          'SELECT, INSERT, UPDATE'],
        ['substrate', 'dlq_entries',              'SELECT, INSERT, UPDATE, DELETE'],
        ['substrate', 'failure_entries',          'SELECT, INSERT, UPDATE, DELETE'],
        ['substrate', 'count_rollups',            'SELECT, INSERT, UPDATE'],
        ['substrate', 'ready_entries',            'SELECT, INSERT'],
        ['substrate', 'ready_tombstones',         'SELECT, INSERT'],
        ['substrate', 'done_entries',             'SELECT, INSERT'],
        ['substrate', 'done_batches',             'SELECT, INSERT'],
        ['substrate', 'count_deltas',             'SELECT, INSERT, DELETE'],
        ['substrate', 'claim_batches',            'SELECT, INSERT'],
        ['substrate', 'claim_closures',           'SELECT, INSERT'],
        ['substrate', 'leases',                   'SELECT, INSERT, UPDATE'],
        ['substrate', 'terminal_jobs',            'SELECT'],
        ['substrate', 'live_jobs',                'SELECT'],
        ['substrate', 'jobs',                     'SELECT'],
        ['substrate', 'claim_batch_seq',          'USAGE'],
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
$function$;

CREATE OR REPLACE FUNCTION awa.install_control_plane(p_schema text, p_queue_slots integer, p_lease_slots integer, p_claim_slots integer)
 RETURNS void
 LANGUAGE plpgsql
AS $function$
BEGIN
    -- The substrate describes itself, so discovery needs no registry outside
    -- the schema and installing stays activation-neutral.
    EXECUTE format($ddl$
        CREATE TABLE IF NOT EXISTS %1$I.substrate_info (
            singleton          boolean     PRIMARY KEY DEFAULT true CHECK (singleton),
            queue_slot_count   integer     NOT NULL,
            lease_slot_count   integer     NOT NULL,
            claim_slot_count   integer     NOT NULL,
            installed_at       timestamptz NOT NULL DEFAULT now(),
            -- Minimum time a queue-ring slot's terminal history is kept
            -- after the slot is sealed; NULL: (queue slots - 2) x the
            -- leader's rotate interval (see ring_prune).
            history_retention  interval    CHECK (history_retention BETWEEN interval '0' AND interval '3650 days'),
            -- Largest job enqueue accepts: bytes of args + metadata as JSON
            -- text (jsonb::text). Workers hold a claimed job in memory, so
            -- this bounds a worker per job. Change with
            -- UPDATE <schema>.substrate_info SET max_job_bytes = n (migrator).
            max_job_bytes      integer     NOT NULL DEFAULT 1048576
                               CHECK (max_job_bytes BETWEEN 1024 AND 268435456),
            -- How long a failed or cancelled job stays readable (and
            -- retryable) in failure_entries, whatever the ring does; the
            -- leader's failure_retention task deletes older ones. The
            -- range is awa_core::bounds::FAILURE_RETENTION.
            failure_retention  interval    NOT NULL DEFAULT interval '7 days'
                CONSTRAINT substrate_info_failure_retention_in_range
                CHECK (failure_retention BETWEEN interval '1 second' AND interval '3650 days')
        )$ddl$, p_schema);

    -- Append-only ring cursors: the newest generation of a ring is its
    -- current slot. Rotation inserts generation + 1; the primary key makes
    -- two racing rotators a compare-and-swap where only one row lands.
    EXECUTE format($ddl$
        CREATE TABLE IF NOT EXISTS %1$I.ring_ledger (
            ring       text        NOT NULL CHECK (ring IN ('queue', 'lease', 'claim')),
            generation bigint      NOT NULL CHECK (generation >= 0),
            slot       integer     NOT NULL CHECK (slot >= 0),
            rotated_at timestamptz NOT NULL DEFAULT now(),
            rotated_by text        NOT NULL DEFAULT 'install',
            PRIMARY KEY (ring, generation)
        )$ddl$, p_schema);
    EXECUTE format($ddl$
        INSERT INTO %1$I.ring_ledger (ring, generation, slot)
        VALUES ('queue', 0, 0), ('lease', 0, 0), ('claim', 0, 0)
        ON CONFLICT DO NOTHING$ddl$, p_schema);
    -- The ledger is one chain: generation g + 1 writes the slot after
    -- generation g's. The runtime role may append (rotation needs INSERT),
    -- so every appended row is checked here rather than trusted to
    -- ring_rotate: it must be a row ring_rotate itself would write. The
    -- next link of the chain (a bogus slot would make every writer pick a
    -- wrong one); dated now(), the transaction's time (rotated_at decides
    -- when the slot it seals may lose its history, ring_slot_sealed_at,
    -- and what the new slot counts as fresh: a row dated 1970 would end a
    -- slot's history retention at once); off a slot worth sealing
    -- (ring_slot_fresh) onto one that is empty and not awaiting truncation
    -- (ring_slot_empty, ring_retirements: a rotation onto live rows would
    -- mix them into the write slot). A generation already taken is left
    -- to the primary key (ring_rotate's ON CONFLICT DO NOTHING reports a
    -- lost race; any other insert fails). (A trigger's function needs no
    -- EXECUTE grant to fire, and the runtime role, not owning the table,
    -- cannot disable it.)
    EXECUTE format($ddl$
        CREATE OR REPLACE FUNCTION %1$I.ring_ledger_chain_check() RETURNS trigger
        LANGUAGE plpgsql AS $trg$
        DECLARE
            v_prev  integer;
            v_slots integer;
        BEGIN
            IF EXISTS (SELECT 1 FROM %1$I.ring_ledger l
                        WHERE l.ring = NEW.ring AND l.generation = NEW.generation) THEN
                RETURN NEW;
            END IF;
            SELECT l.slot INTO v_prev FROM %1$I.ring_ledger l
             WHERE l.ring = NEW.ring AND l.generation = NEW.generation - 1;
            SELECT CASE NEW.ring WHEN 'queue' THEN i.queue_slot_count
                                 WHEN 'lease' THEN i.lease_slot_count
                                 ELSE i.claim_slot_count END
              INTO v_slots FROM %1$I.substrate_info i;
            IF v_prev IS NULL OR v_slots IS NULL OR NEW.slot <> (v_prev + 1) %% v_slots THEN
                RAISE EXCEPTION 'ring_ledger: %% generation %% must follow generation %% in the next slot',
                                NEW.ring, NEW.generation, NEW.generation - 1
                      USING ERRCODE = 'check_violation',
                            HINT = 'Rings move only through ring_rotate.';
            END IF;
            IF NEW.rotated_at IS DISTINCT FROM now() THEN
                RAISE EXCEPTION 'ring_ledger: %% generation %% must be dated now (%%), not %%',
                                NEW.ring, NEW.generation, now(), NEW.rotated_at
                      USING ERRCODE = 'check_violation',
                            HINT = 'Rings move only through ring_rotate.';
            END IF;
            IF NOT %1$I.ring_slot_fresh(NEW.ring, v_prev) THEN
                RAISE EXCEPTION 'ring_ledger: %% slot %% holds nothing new to seal',
                                NEW.ring, v_prev
                      USING ERRCODE = 'check_violation',
                            HINT = 'Rings move only through ring_rotate.';
            END IF;
            IF NOT %1$I.ring_slot_empty(NEW.ring, NEW.slot)
               OR EXISTS (SELECT 1 FROM %1$I.ring_retirements x
                           WHERE x.ring = NEW.ring AND x.slot = NEW.slot) THEN
                RAISE EXCEPTION 'ring_ledger: %% slot %% still holds rows or awaits truncation',
                                NEW.ring, NEW.slot
                      USING ERRCODE = 'check_violation',
                            HINT = 'Rings move only through ring_rotate.';
            END IF;
            RETURN NEW;
        END
        $trg$$ddl$, p_schema);
    EXECUTE format($ddl$
        CREATE OR REPLACE TRIGGER ring_ledger_chain BEFORE INSERT ON %1$I.ring_ledger
        FOR EACH ROW WHEN (NEW.generation > 0)
        EXECUTE FUNCTION %1$I.ring_ledger_chain_check()$ddl$, p_schema);

    -- Slots proven dead and logically removed, waiting to be truncated. A
    -- snapshot taken after the marker committed no longer shows the slot's
    -- rows in the read views; the slot is truncated only once every older
    -- snapshot has ended (TRUNCATE is not MVCC-safe; this marker is).
    EXECUTE format($ddl$
        CREATE TABLE IF NOT EXISTS %1$I.ring_retirements (
            ring        text        NOT NULL CHECK (ring IN ('queue', 'lease', 'claim')),
            slot        integer     NOT NULL,
            retired_xid xid8        NOT NULL,
            retired_at  timestamptz NOT NULL DEFAULT now(),
            PRIMARY KEY (ring, slot)
        )$ddl$, p_schema);

    -- Outcome of the latest rotate/prune attempt per ring and slot, for
    -- operators; overwritten in place, a few rows per ring.
    EXECUTE format($ddl$
        CREATE TABLE IF NOT EXISTS %1$I.ring_outcomes (
            ring       text        NOT NULL,
            task       text        NOT NULL CHECK (task IN ('rotate', 'prune')),
            outcome    text        NOT NULL,
            detail     text,
            at         timestamptz NOT NULL DEFAULT now(),
            PRIMARY KEY (ring, task)
        )$ddl$, p_schema);

    -- One row per lane (queue, priority, shard): everything in the lane at or
    -- below head_seq has been claimed or tombstoned. Updated once per claim
    -- batch, never per job; the low fillfactor keeps those updates HOT.
    EXECUTE format($ddl$
        CREATE TABLE IF NOT EXISTS %1$I.lane_heads (
            queue    text     NOT NULL,
            priority smallint NOT NULL,
            shard    smallint NOT NULL,
            head_seq bigint   NOT NULL DEFAULT 0,
            PRIMARY KEY (queue, priority, shard)
        ) WITH (fillfactor = 50)$ddl$, p_schema);

    -- Unique keys and job ids are database-wide, not per substrate: see
    -- awa.job_uniques and awa.job_id_seq in control_schema.sql.
END
$function$;

CREATE OR REPLACE FUNCTION awa.install_deferred_plane(p_schema text)
 RETURNS void
 LANGUAGE plpgsql
AS $function$
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
$function$;

CREATE OR REPLACE FUNCTION awa.install_dlq_plane(p_schema text)
 RETURNS void
 LANGUAGE plpgsql
AS $function$
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
$function$;

CREATE OR REPLACE FUNCTION awa.install_exec_plane(p_schema text, p_lease_slots integer, p_claim_slots integer)
 RETURNS void
 LANGUAGE plpgsql
AS $function$
DECLARE
    i integer;
BEGIN
    EXECUTE format('CREATE SEQUENCE IF NOT EXISTS %1$I.claim_batch_seq AS bigint', p_schema);
    EXECUTE format($ddl$
        CREATE TABLE IF NOT EXISTS %1$I.claim_batches (
            slot        integer     NOT NULL,
            batch_id    bigint      NOT NULL,
            queue       text        NOT NULL,
            claimed_at  timestamptz NOT NULL DEFAULT now(),
            instance_id uuid,
            -- The distinct queue slots holding the items' bodies (usually
            -- one): exec_slot_live('queue') filters on it.
            body_slots  integer[]   NOT NULL,
            -- Item i (1-based) of the batch: job_ids[i], run_leases[i], ...
            job_ids     bigint[]    NOT NULL,
            run_leases  bigint[]    NOT NULL,
            attempts    integer[]   NOT NULL,
            ready_slots integer[]   NOT NULL,  -- where each body lives
            ready_seqs  bigint[]    NOT NULL,
            priorities  smallint[]  NOT NULL,  -- with queue and ready_seqs:
            shards      smallint[]  NOT NULL,  -- the body's lane index key
            -- Items whose job holds a unique key (NULL: none). Completing
            -- any other item needs nothing from its body.
            keyed       integer[],
            PRIMARY KEY (slot, batch_id)
        ) PARTITION BY LIST (slot)$ddl$, p_schema);
    EXECUTE format($ddl$
        CREATE TABLE IF NOT EXISTS %1$I.claim_closures (
            slot       integer     NOT NULL,
            batch_id   bigint      NOT NULL,
            link       integer     NOT NULL CHECK (link >= 1),
            items      integer[]   NOT NULL,  -- the items this link closed
            -- One outcome for every item, or 'mixed' with one per item.
            outcome    text        NOT NULL CHECK (outcome IN
                       ('completed', 'retried', 'snoozed', 'cancelled', 'failed', 'dead_lettered', 'rescued', 'released',
                        'parked', 'mixed')),
            outcomes   text[]      CHECK ((outcome = 'mixed') = (outcomes IS NOT NULL)),
            -- Items of the batch still open after this link; 0 closes the
            -- batch, which lets liveness checks skip it with one probe.
            open_after integer     NOT NULL CHECK (open_after >= 0),
            closed_at  timestamptz NOT NULL DEFAULT now(),
            PRIMARY KEY (slot, batch_id, link)
        ) PARTITION BY LIST (slot)$ddl$, p_schema);
    FOR i IN 0 .. p_claim_slots - 1 LOOP
        -- toast_tuple_target: a batch of a few hundred items stays in its
        -- heap row instead of going to TOAST (a second table and index).
        EXECUTE format('CREATE TABLE IF NOT EXISTS %1$I.%2$I PARTITION OF %1$I.claim_batches FOR VALUES IN (%3$s) WITH (toast_tuple_target = 8160)',
                       p_schema, 'claim_batches_' || i, i);
        EXECUTE format('CREATE TABLE IF NOT EXISTS %1$I.%2$I PARTITION OF %1$I.claim_closures FOR VALUES IN (%3$s)',
                       p_schema, 'claim_closures_' || i, i);
    END LOOP;
    -- Rescue looks for old batches (one entry per claim call, not per job).
    EXECUTE format('CREATE INDEX IF NOT EXISTS claim_batches_claimed_idx ON %1$I.claim_batches (claimed_at)', p_schema);

    EXECUTE format($ddl$
        CREATE TABLE IF NOT EXISTS %1$I.leases (
            slot             integer     NOT NULL,
            job_id           bigint      NOT NULL,
            run_lease        bigint      NOT NULL,
            claim_slot       integer     NOT NULL,  -- the attempt's batch item
            batch_id         bigint      NOT NULL,
            item             integer     NOT NULL,
            heartbeat_at     timestamptz NOT NULL DEFAULT now(),
            deadline_at      timestamptz,
            callback_id      uuid,
            callback_timeout timestamptz,
            PRIMARY KEY (slot, job_id, run_lease)
        ) PARTITION BY LIST (slot)$ddl$, p_schema);
    FOR i IN 0 .. p_lease_slots - 1 LOOP
        EXECUTE format('CREATE TABLE IF NOT EXISTS %1$I.%2$I PARTITION OF %1$I.leases FOR VALUES IN (%3$s) WITH (fillfactor = 70)',
                       p_schema, 'leases_' || i, i);
    END LOOP;

    -- Attempts moved out of the rings (see exec_park): a job that runs longer
    -- than a ring takes to come round would otherwise keep its batch's
    -- claim slot, its body's queue slot and its lease slot live, and the
    -- rings could not rotate past it. Parking closes the item with a
    -- 'parked' link and copies everything the attempt still needs here, in one
    -- transaction; the attempt is then finished by deleting its row (the
    -- delete's row lock lets exactly one finisher win). One open attempt per
    -- job, so the job id is the key. Rows are few (long jobs only) and each
    -- is deleted once, so this table's churn is bounded by long jobs, not by
    -- throughput.
    EXECUTE format($ddl$
        CREATE TABLE IF NOT EXISTS %1$I.parked_attempts (
            job_id           bigint      PRIMARY KEY,
            run_lease        bigint      NOT NULL,
            claim_slot       integer     NOT NULL,  -- the attempt token's batch item
            batch_id         bigint      NOT NULL,
            item             integer     NOT NULL,
            queue            text        NOT NULL,
            attempt          integer     NOT NULL,
            claimed_at       timestamptz NOT NULL,
            deadline_at      timestamptz,
            instance_id      uuid,
            heartbeat_at     timestamptz,
            callback_id      uuid,
            callback_timeout timestamptz,
            -- The body, as the ready entry held it.
            ready_seq        bigint      NOT NULL,
            kind             text        NOT NULL,
            args             jsonb       NOT NULL,
            priority         smallint    NOT NULL,
            max_attempts     integer     NOT NULL,
            created_at       timestamptz NOT NULL,
            unique_key       text,
            metadata         jsonb,
            parked_at        timestamptz NOT NULL DEFAULT now(),
            -- The body's attempt records (ADR 11).
            attempts         jsonb
        ) WITH (fillfactor = 70)$ddl$, p_schema);

    -- Progress and checkpoints survive retries, so they live outside the
    -- rings, keyed by job.
    EXECUTE format($ddl$
        CREATE TABLE IF NOT EXISTS %1$I.attempt_state (
            job_id     bigint      PRIMARY KEY,
            run_lease  bigint      NOT NULL,
            percent    smallint    CHECK (percent BETWEEN 0 AND 100),
            message    text,
            checkpoint jsonb,
            updated_at timestamptz NOT NULL DEFAULT now()
        )$ddl$, p_schema);

    -- The rescue bound maintenance uses on this substrate, published by the
    -- leader's rescue task so workers (often other processes) can heartbeat
    -- at a third of it: a short --rescue-after then cannot take healthy
    -- long jobs. No row: no leader has published yet (workers use their
    -- own cadence). The range is awa_core::bounds::RESCUE_AFTER.
    EXECUTE format($ddl$
        CREATE TABLE IF NOT EXISTS %1$I.exec_settings (
            singleton    boolean     PRIMARY KEY DEFAULT true CHECK (singleton),
            rescue_after interval    NOT NULL
                CONSTRAINT exec_settings_rescue_after_in_range
                CHECK (rescue_after BETWEEN interval '1 second' AND interval '1 day'),
            changed_at   timestamptz NOT NULL DEFAULT now()
        )$ddl$, p_schema);

    -- Which claimed jobs each worker holds in its local buffer, not started
    -- (the read views call them 'buffered', the other open items
    -- 'running'). A claimed job's start is not written per job: each
    -- worker engine rewrites its one row at most once a second, when its
    -- buffer changed (and every few minutes while it is not empty), and
    -- deletes it when it stops. So the split is true to about a second,
    -- and costs the hot path nothing per job. A row left by a worker that
    -- died names attempts that are indeed not running (rescue closes
    -- them); rows not refreshed for an hour are removed by the next
    -- worker engine that starts. Few rows, rewritten in place: the low
    -- fillfactor keeps the updates HOT.
    EXECUTE format($ddl$
        CREATE TABLE IF NOT EXISTS %1$I.worker_buffers (
            instance_id uuid        PRIMARY KEY,  -- claim_batches.instance_id
            job_ids     bigint[]    NOT NULL,
            updated_at  timestamptz NOT NULL DEFAULT now()
        ) WITH (fillfactor = 50)$ddl$, p_schema);
END
$function$;

CREATE OR REPLACE FUNCTION awa.install_history_plane(p_schema text, p_queue_slots integer)
 RETURNS void
 LANGUAGE plpgsql
AS $function$
DECLARE
    i integer;
BEGIN
    EXECUTE format($ddl$
        CREATE TABLE IF NOT EXISTS %1$I.done_entries (
            slot         integer     NOT NULL,
            job_id       bigint      NOT NULL,
            run_lease    bigint      NOT NULL,
            queue        text        NOT NULL,
            state        text        NOT NULL CHECK (state IN ('completed', 'failed', 'cancelled')),
            attempt      integer     NOT NULL,
            finalized_at timestamptz NOT NULL DEFAULT now(),
            -- The job's body (kind, args, priority, max_attempts,
            -- created_at, metadata): these rows are rare, and carrying the
            -- body spares the read views a lookup by id.
            body         jsonb       NOT NULL,
            last_error   text,
            -- Records of every attempt, the completing one included (ADR 11).
            attempts     jsonb
        ) PARTITION BY LIST (slot)$ddl$, p_schema);
    FOR i IN 0 .. p_queue_slots - 1 LOOP
        EXECUTE format('CREATE TABLE IF NOT EXISTS %1$I.%2$I PARTITION OF %1$I.done_entries FOR VALUES IN (%3$s)',
                       p_schema, 'done_entries_' || i, i);
    END LOOP;
    -- job dump / list by id (the hot path never reads history).
    EXECUTE format('CREATE INDEX IF NOT EXISTS done_entries_job_idx ON %1$I.done_entries (job_id)', p_schema);

    EXECUTE format($ddl$
        CREATE TABLE IF NOT EXISTS %1$I.done_batches (
            slot         integer     NOT NULL,
            queue        text        NOT NULL,
            finalized_at timestamptz NOT NULL DEFAULT now(),
            lo_job_id    bigint      NOT NULL,  -- min(job_ids), max(job_ids):
            hi_job_id    bigint      NOT NULL,  -- what the lookup index covers
            -- Completed job i: job_ids[i], its lease, attempt and the lane
            -- position of its body in ready_entries of this slot.
            job_ids      bigint[]    NOT NULL,
            run_leases   bigint[]    NOT NULL,
            attempts     integer[]   NOT NULL,
            ready_seqs   bigint[]    NOT NULL,
            priorities   smallint[]  NOT NULL,  -- with queue and ready_seqs:
            shards       smallint[]  NOT NULL,  -- the body's lane index key
            CHECK (lo_job_id <= hi_job_id)
        ) PARTITION BY LIST (slot)$ddl$, p_schema);
    FOR i IN 0 .. p_queue_slots - 1 LOOP
        EXECUTE format('CREATE TABLE IF NOT EXISTS %1$I.%2$I PARTITION OF %1$I.done_batches FOR VALUES IN (%3$s) WITH (toast_tuple_target = 8160)',
                       p_schema, 'done_batches_' || i, i);
    END LOOP;
    -- job dump / list by id: which batches may hold a job (one entry per
    -- batch row, not per job).
    EXECUTE format('CREATE INDEX IF NOT EXISTS done_batches_jobs_idx ON %1$I.done_batches USING gist (int8range(lo_job_id, hi_job_id, ''[]''))', p_schema);

    -- Failed and cancelled jobs, kept for failure_retention whatever the
    -- ring does. An ordinary table: one insert per failure and one delete
    -- a retention later (or when the job is retried), so its churn follows
    -- the failures, never the job stream. At most one row per job: a job
    -- is terminal once until an operator retries it, which deletes the row.
    EXECUTE format($ddl$
        CREATE TABLE IF NOT EXISTS %1$I.failure_entries (
            job_id       bigint      PRIMARY KEY,
            run_lease    bigint      NOT NULL,
            queue        text        NOT NULL,
            state        text        NOT NULL CHECK (state IN ('failed', 'cancelled')),
            attempt      integer     NOT NULL,
            priority     smallint    NOT NULL,
            kind         text        NOT NULL,
            args         jsonb       NOT NULL,
            max_attempts integer     NOT NULL,
            created_at   timestamptz NOT NULL,
            finalized_at timestamptz NOT NULL DEFAULT now(),
            -- Released when the job ended; a retry takes it again.
            unique_key   text,
            metadata     jsonb,
            last_error   text,
            attempts     jsonb
        )$ddl$, p_schema);
    -- Retention deletes the oldest first.
    EXECUTE format('CREATE INDEX IF NOT EXISTS failure_entries_finalized_idx ON %1$I.failure_entries (finalized_at)', p_schema);
    -- Bulk retry and lists by queue and state (`awa job retry --queue Q
    -- --state failed`).
    EXECUTE format('CREATE INDEX IF NOT EXISTS failure_entries_queue_idx ON %1$I.failure_entries (queue, state, finalized_at)', p_schema);
    -- Finding failures by what their args contain (`--args-contains`):
    -- days of failures would make that a long scan; the index costs only
    -- the failure path.
    EXECUTE format('CREATE INDEX IF NOT EXISTS failure_entries_args_idx ON %1$I.failure_entries USING gin (args jsonb_path_ops)', p_schema);

    -- Exact counts without counting rows: terminal transitions append deltas
    -- in the queue-ring slot of the job's terminal fact; retiring a slot
    -- folds its deltas into the rollups (see history_retire_slot), so the
    -- totals outlive the slot.
    EXECUTE format($ddl$
        CREATE TABLE IF NOT EXISTS %1$I.count_deltas (
            slot  integer     NOT NULL,
            queue text        NOT NULL,
            state text        NOT NULL,
            delta bigint      NOT NULL,
            at    timestamptz NOT NULL DEFAULT now()
        ) PARTITION BY LIST (slot)$ddl$, p_schema);
    FOR i IN 0 .. p_queue_slots - 1 LOOP
        EXECUTE format('CREATE TABLE IF NOT EXISTS %1$I.%2$I PARTITION OF %1$I.count_deltas FOR VALUES IN (%3$s)',
                       p_schema, 'count_deltas_' || i, i);
    END LOOP;
    EXECUTE format($ddl$
        CREATE TABLE IF NOT EXISTS %1$I.count_rollups (
            queue      text        NOT NULL,
            state      text        NOT NULL,
            total      bigint      NOT NULL DEFAULT 0,
            updated_at timestamptz NOT NULL DEFAULT now(),
            PRIMARY KEY (queue, state)
        )$ddl$, p_schema);

    -- How far pruning has gone: every job whose terminal fact was in a
    -- retired slot has an id at or below pruned_through_job_id. One row,
    -- updated once per retired slot.
    EXECUTE format($ddl$
        CREATE TABLE IF NOT EXISTS %1$I.history_horizon (
            singleton             boolean     PRIMARY KEY DEFAULT true CHECK (singleton),
            pruned_through_job_id bigint      NOT NULL,
            pruned_at             timestamptz NOT NULL
        )$ddl$, p_schema);

    -- The public read view: terminal facts hydrated with their bodies, one
    -- row per terminal job whichever shape its fact has. attempts: the
    -- job's attempt records (ADR 11); a completion from a batch gets its
    -- completing attempt derived from the batch (number and end), which is
    -- all a completion writes. ring_slot: NULL for a kept failure.
    EXECUTE format($ddl$
        CREATE OR REPLACE VIEW %1$I.terminal_jobs AS
        SELECT d.job_id                                AS id,
               d.queue,
               d.body ->> 'kind'                       AS kind,
               d.body -> 'args'                        AS args,
               (d.body ->> 'priority')::smallint       AS priority,
               d.state,
               d.attempt,
               (d.body ->> 'max_attempts')::integer    AS max_attempts,
               d.run_lease,
               (d.body ->> 'created_at')::timestamptz  AS created_at,
               d.finalized_at,
               d.last_error,
               d.body -> 'metadata'                    AS metadata,
               d.slot                                  AS ring_slot,
               d.attempts
          FROM %1$I.done_entries d
         -- A retired slot is gone for every snapshot that sees its marker.
         WHERE NOT EXISTS (SELECT 1 FROM %1$I.ring_retirements x
                            WHERE x.ring = 'queue' AND x.slot = d.slot)
        UNION ALL
        SELECT u.job_id, b.queue, r.kind, r.args, r.priority, 'completed'::text, u.attempt,
               r.max_attempts, u.run_lease, r.created_at, b.finalized_at, NULL::text, r.metadata,
               b.slot,
               coalesce(r.attempts, '[]'::jsonb) || jsonb_build_array(jsonb_build_object(
                   'attempt', u.attempt, 'ended_at', b.finalized_at, 'outcome', 'completed'))
          FROM %1$I.done_batches b
         CROSS JOIN LATERAL unnest(b.job_ids, b.run_leases, b.attempts, b.ready_seqs,
                                   b.priorities, b.shards)
               AS u(job_id, run_lease, attempt, ready_seq, priority, shard)
          -- LATERAL + LIMIT: one probe of the lane index per job, whatever
          -- filters a caller puts on the view (they cannot be pushed inside
          -- and turn the join into a scan of every entry per batch).
          LEFT JOIN LATERAL (
                SELECT r.* FROM %1$I.ready_entries r
                 WHERE r.slot = b.slot AND r.queue = b.queue AND r.priority = u.priority
                   AND r.shard = u.shard AND r.lane_seq = u.ready_seq AND r.job_id = u.job_id
                 LIMIT 1) r ON true
         WHERE NOT EXISTS (SELECT 1 FROM %1$I.ring_retirements x
                            WHERE x.ring = 'queue' AND x.slot = b.slot)
        UNION ALL
        -- Kept failures are outside the rings: no retirement hides them.
        SELECT f.job_id, f.queue, f.kind, f.args, f.priority, f.state, f.attempt,
               f.max_attempts, f.run_lease, f.created_at, f.finalized_at, f.last_error,
               f.metadata, NULL::integer, f.attempts
          FROM %1$I.failure_entries f
    $ddl$, p_schema);
END
$function$;

CREATE OR REPLACE FUNCTION awa.install_ready_plane(p_schema text, p_queue_slots integer)
 RETURNS void
 LANGUAGE plpgsql
AS $function$
DECLARE
    i integer;
BEGIN
    -- Job ids come from awa.job_id_seq, shared by every substrate
    -- (control_schema.sql).
    -- Lane positions. CACHE 1 is load-bearing: the claim frontier reads
    -- last_value as an upper bound of every position handed out so far,
    -- which per-session caches would break.
    EXECUTE format('CREATE SEQUENCE IF NOT EXISTS %1$I.ready_seq AS bigint CACHE 1', p_schema);

    EXECUTE format($ddl$
        CREATE TABLE IF NOT EXISTS %1$I.ready_entries (
            slot         integer     NOT NULL,
            queue        text        NOT NULL,
            -- Bounds as awa_core::bounds has them, so a raw-SQL producer
            -- cannot store a job no worker would understand.
            priority     smallint    NOT NULL CHECK (priority BETWEEN 1 AND 4),
            shard        smallint    NOT NULL,
            lane_seq     bigint      NOT NULL,
            job_id       bigint      NOT NULL,
            kind         text        NOT NULL,
            args         jsonb       NOT NULL,
            attempt      integer     NOT NULL,  -- attempts already made
            max_attempts integer     NOT NULL CHECK (max_attempts BETWEEN 1 AND 1000),
            run_lease    bigint      NOT NULL,  -- leases already issued
            created_at   timestamptz NOT NULL,  -- first enqueue of the job
            ready_at     timestamptz NOT NULL,  -- when this row became runnable
            unique_key   text,
            metadata     jsonb,
            -- Records of the job's earlier attempts (ADR 11; attempt_push):
            -- NULL for a job that has not run yet, so a first run costs
            -- nothing here.
            attempts     jsonb
        ) PARTITION BY LIST (slot)$ddl$, p_schema);

    FOR i IN 0 .. p_queue_slots - 1 LOOP
        EXECUTE format('CREATE TABLE IF NOT EXISTS %1$I.%2$I PARTITION OF %1$I.ready_entries FOR VALUES IN (%3$s)',
                       p_schema, 'ready_entries_' || i, i);
    END LOOP;
    -- Every index here costs WAL for every job, so there are two.
    -- The lane index serves the claim (a lane in order from its head) and
    -- every lookup of a body whose lane is known: finish, park, and the
    -- read views hydrating claim and done batches (they carry each item's
    -- priority and shard for this).
    EXECUTE format('CREATE INDEX IF NOT EXISTS ready_entries_lane_idx ON %1$I.ready_entries (queue, priority, shard, lane_seq)', p_schema);
    -- Lookups by id alone (cancel of a waiting job, job dump and list) are
    -- operator paths: a BRIN index over job ids, which arrive roughly in
    -- order, costs nothing per insert (ranges are summarized in the
    -- background as they fill, autosummarize) and narrows a lookup to a
    -- few small page ranges plus the unsummarized tail of the slot.
    EXECUTE format('CREATE INDEX IF NOT EXISTS ready_entries_job_brin ON %1$I.ready_entries USING brin (job_id) WITH (pages_per_range = 8, autosummarize = on)', p_schema);

    -- Cancelled-before-claim markers, in the same slot as the entry they
    -- cancel so both disappear together.
    EXECUTE format($ddl$
        CREATE TABLE IF NOT EXISTS %1$I.ready_tombstones (
            slot         integer     NOT NULL,
            job_id       bigint      NOT NULL,
            lane_seq     bigint      NOT NULL,
            cancelled_at timestamptz NOT NULL DEFAULT now(),
            PRIMARY KEY (slot, job_id, lane_seq)
        ) PARTITION BY LIST (slot)$ddl$, p_schema);
    FOR i IN 0 .. p_queue_slots - 1 LOOP
        EXECUTE format('CREATE TABLE IF NOT EXISTS %1$I.%2$I PARTITION OF %1$I.ready_tombstones FOR VALUES IN (%3$s)',
                       p_schema, 'ready_tombstones_' || i, i);
    END LOOP;
END
$function$;

DO $drop$
DECLARE s record;
BEGIN
    FOR s IN SELECT n.nspname FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
              WHERE c.relname = 'substrate_info' AND c.relkind = 'r' LOOP
        EXECUTE format('DROP FUNCTION IF EXISTS %I.enqueue(p_queues text[], p_kinds text[], p_args jsonb[], p_priorities smallint[], p_run_at timestamp with time zone[], p_max_attempts integer[], p_unique_keys text[], p_metadata jsonb[])', s.nspname);
    END LOOP;
END
$drop$;

DO $drop$
DECLARE s record;
BEGIN
    FOR s IN SELECT n.nspname FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
              WHERE c.relname = 'substrate_info' AND c.relkind = 'r' LOOP
        EXECUTE format('DROP FUNCTION IF EXISTS %I.enqueue_local(p_queues text[], p_kinds text[], p_args jsonb[], p_priorities smallint[], p_run_at timestamp with time zone[], p_max_attempts integer[], p_unique_keys text[], p_metadata jsonb[])', s.nspname);
    END LOOP;
END
$drop$;

DO $drop$
DECLARE s record;
BEGIN
    FOR s IN SELECT n.nspname FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
              WHERE c.relname = 'substrate_info' AND c.relkind = 'r' LOOP
        EXECUTE format('DROP FUNCTION IF EXISTS %I.ready_append(p_job_ids bigint[], p_queues text[], p_priorities smallint[], p_kinds text[], p_args jsonb[], p_attempts integer[], p_max_attempts integer[], p_run_leases bigint[], p_created_at timestamp with time zone[], p_unique_keys text[], p_metadata jsonb[])', s.nspname);
    END LOOP;
END
$drop$;

DO $drop$
DECLARE s record;
BEGIN
    FOR s IN SELECT n.nspname FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
              WHERE c.relname = 'substrate_info' AND c.relkind = 'r' LOOP
        EXECUTE format('DROP FUNCTION IF EXISTS %I.unique_take(p_keys text[], p_job_ids bigint[])', s.nspname);
    END LOOP;
END
$drop$;

-- Runtime function templates, as the sources define them.
INSERT INTO awa.substrate_functions (name, ord, body) VALUES ('attempt_push', 14, $awa_template$-- {schema}.attempt_push(prior, attempt, outcome, next_state, started_at,
--                       instance, error):
-- a job's attempt records (ADR 11) with one more: the attempt that just
-- ended. Called by finish for every attempt that ends other than by a
-- completion from a batch (whose record is derived on read), in the row
-- it writes for that outcome anyway, so the history travels with the
-- job's body and is reclaimed with it.
--
-- A record: {attempt, started_at (the claim), ended_at (now), outcome,
-- error, runtime: {id, host, pid}}. outcome names what happened to the
-- attempt (as the closure link records it): retried, rescued, snoozed,
-- released, failed, cancelled, dead_lettered, completed. The runtime's
-- host and pid are copied from awa.runtimes now, because the registry
-- forgets dead runtimes; an unknown instance keeps its id only.
--
-- Bounded: the latest c_keep records (awa_core::bounds::ATTEMPT_HISTORY),
-- each error already at most 8 KiB (Finish::error). A plain SQL function:
-- one expression, no table written.
CREATE OR REPLACE FUNCTION {schema}.attempt_push(
    p_prior      jsonb,
    p_attempt    integer,
    p_outcome    text,
    p_next_state text,
    p_started_at timestamptz,
    p_instance   uuid,
    p_error      text
) RETURNS jsonb LANGUAGE sql STABLE AS $fn$
    WITH c AS (SELECT 25 AS c_keep),
    h AS (
        SELECT coalesce(p_prior, '[]'::jsonb) || jsonb_build_array(jsonb_build_object(
                   'attempt', p_attempt,
                   'started_at', p_started_at,
                   'ended_at', now(),
                   'outcome', CASE p_outcome
                                  WHEN 'rescue' THEN 'rescued'
                                  WHEN 'release' THEN 'released'
                                  WHEN 'retry' THEN CASE p_next_state WHEN 'retryable' THEN 'retried'
                                                                      ELSE p_next_state END
                                  ELSE p_next_state
                              END,
                   'error', p_error,
                   'runtime', CASE WHEN p_instance IS NOT NULL THEN
                                  jsonb_build_object('id', p_instance, 'host', r.host, 'pid', r.pid)
                              END)) AS hist
          FROM (SELECT 1) one
          LEFT JOIN awa.runtimes r ON r.instance_id = p_instance
    )
    SELECT CASE WHEN jsonb_array_length(h.hist) <= c.c_keep THEN h.hist
                ELSE (SELECT jsonb_agg(e.rec ORDER BY e.n)
                        FROM jsonb_array_elements(h.hist) WITH ORDINALITY AS e(rec, n)
                       WHERE e.n > jsonb_array_length(h.hist) - c.c_keep)
           END
      FROM h, c
$fn$;
$awa_template$)
ON CONFLICT (name) DO UPDATE SET ord = EXCLUDED.ord, body = EXCLUDED.body;
INSERT INTO awa.substrate_functions (name, ord, body) VALUES ('cancel_job', 17, $awa_template$-- {schema}.cancel_job(job_id): cancel a job wherever it is.
--   waiting in the ready ring -> tombstone + terminal fact (with its body)
--   deferred                  -> removed, terminal fact carries the body
-- The terminal fact of a cancelled job is a failure_entries row (kept for
-- failure_retention, retryable; ADR 11) with the job's attempt records; no
-- attempt ran, so none is added. The count delta goes to the queue ring.
--   running                   -> its live attempt is finished as cancelled
--                                through the guarded path; the worker's later
--                                writes for that attempt are rejected, and
--                                NOTIFY awa_cancel 'job_id:run_lease:cancelled'
--                                (delivered at commit) tells the worker at
--                                once, so its handler stops (the cancel rule,
--                                awa-exec/src/worker/mod.rs)
-- Its unique key is released, or kept until its period ends when its key
-- spec keeps cancelled jobs (unique_held), as finish does.
-- Returns the state the job was in, or NULL when it was not cancellable
-- (unknown, or already terminal).
CREATE OR REPLACE FUNCTION {schema}.cancel_job(p_job_id bigint)
RETURNS text LANGUAGE plpgsql AS $fn$
#variable_conflict use_column
DECLARE
    v_t record;
    v_d record;
    v_r record;
    v_slot integer;
BEGIN
    SELECT * INTO v_t FROM {schema}.ready_tombstone(p_job_id);
    IF FOUND THEN
        INSERT INTO {schema}.failure_entries AS f
            (job_id, run_lease, queue, state, attempt, priority, kind, args, max_attempts,
             created_at, unique_key, metadata, attempts)
        VALUES (p_job_id, v_t.run_lease, v_t.queue, 'cancelled', v_t.attempt, v_t.priority,
                v_t.kind, v_t.args, v_t.max_attempts, v_t.created_at, v_t.unique_key,
                v_t.metadata, v_t.attempts)
        ON CONFLICT (job_id) DO UPDATE
           SET run_lease = EXCLUDED.run_lease, queue = EXCLUDED.queue, state = EXCLUDED.state,
               attempt = EXCLUDED.attempt, priority = EXCLUDED.priority, kind = EXCLUDED.kind,
               args = EXCLUDED.args, max_attempts = EXCLUDED.max_attempts,
               created_at = EXCLUDED.created_at, finalized_at = EXCLUDED.finalized_at,
               unique_key = EXCLUDED.unique_key, metadata = EXCLUDED.metadata,
               last_error = NULL, attempts = EXCLUDED.attempts;
        INSERT INTO {schema}.count_deltas (slot, queue, state, delta) VALUES (v_t.slot, v_t.queue, 'cancelled', 1);
        DELETE FROM awa.job_uniques u
         WHERE u.job_id = p_job_id AND NOT {schema}.unique_held(u.hold_until, u.hold_states, 'cancelled');
        UPDATE awa.job_uniques u SET finished_at = now()
         WHERE u.job_id = p_job_id AND {schema}.unique_held(u.hold_until, u.hold_states, 'cancelled');
        RETURN 'available';
    END IF;

    DELETE FROM {schema}.deferred_jobs d WHERE d.job_id = p_job_id RETURNING * INTO v_d;
    IF FOUND THEN
        SELECT g.slot INTO v_slot
          FROM {schema}.ring_ledger g WHERE g.ring = 'queue' ORDER BY g.generation DESC LIMIT 1;
        INSERT INTO {schema}.failure_entries AS f
            (job_id, run_lease, queue, state, attempt, priority, kind, args, max_attempts,
             created_at, unique_key, metadata, last_error, attempts)
        VALUES (p_job_id, v_d.run_lease, v_d.queue, 'cancelled', v_d.attempt, v_d.priority,
                v_d.kind, v_d.args, v_d.max_attempts, v_d.created_at, v_d.unique_key,
                v_d.metadata, v_d.last_error, v_d.attempts)
        ON CONFLICT (job_id) DO UPDATE
           SET run_lease = EXCLUDED.run_lease, queue = EXCLUDED.queue, state = EXCLUDED.state,
               attempt = EXCLUDED.attempt, priority = EXCLUDED.priority, kind = EXCLUDED.kind,
               args = EXCLUDED.args, max_attempts = EXCLUDED.max_attempts,
               created_at = EXCLUDED.created_at, finalized_at = EXCLUDED.finalized_at,
               unique_key = EXCLUDED.unique_key, metadata = EXCLUDED.metadata,
               last_error = EXCLUDED.last_error, attempts = EXCLUDED.attempts;
        INSERT INTO {schema}.count_deltas (slot, queue, state, delta) VALUES (v_slot, v_d.queue, 'cancelled', 1);
        DELETE FROM awa.job_uniques u
         WHERE u.job_id = p_job_id AND NOT {schema}.unique_held(u.hold_until, u.hold_states, 'cancelled');
        UPDATE awa.job_uniques u SET finished_at = now()
         WHERE u.job_id = p_job_id AND {schema}.unique_held(u.hold_until, u.hold_states, 'cancelled');
        DELETE FROM {schema}.attempt_state WHERE job_id = p_job_id;
        RETURN v_d.reason;
    END IF;

    -- Running: its open batch item, or its parked row (exec_park moved it
    -- out of the rings). Batches are not indexed by job: this scans the
    -- batch rows of the claim ring (one per claim call), which an operator
    -- command can afford and the hot path never does.
    SELECT x.run_lease, x.slot, x.batch_id, x.item INTO v_r
      FROM (SELECT u.run_lease, b.slot, b.batch_id, u.item::integer AS item
              FROM {schema}.claim_batches b
             CROSS JOIN LATERAL unnest(b.job_ids, b.run_leases) WITH ORDINALITY AS u(job_id, run_lease, item)
             WHERE p_job_id = ANY (b.job_ids) AND u.job_id = p_job_id
               AND NOT EXISTS (SELECT 1 FROM {schema}.claim_closures c
                                WHERE c.slot = b.slot AND c.batch_id = b.batch_id AND u.item = ANY (c.items))
            UNION ALL
            SELECT p.run_lease, p.claim_slot, p.batch_id, p.item
              FROM {schema}.parked_attempts p
             WHERE p.job_id = p_job_id) x
     ORDER BY x.run_lease DESC
     LIMIT 1;
    IF FOUND THEN
        PERFORM 1 FROM {schema}.finish(ARRAY[p_job_id], ARRAY[v_r.run_lease], ARRAY[v_r.slot],
                                       ARRAY[v_r.batch_id], ARRAY[v_r.item],
                                       ARRAY['cancel'], ARRAY[NULL::interval], ARRAY['cancelled by operator'])
         WHERE accepted;
        IF FOUND THEN
            PERFORM pg_notify('awa_cancel', p_job_id || ':' || v_r.run_lease || ':cancelled');
            RETURN 'running';
        END IF;
    END IF;
    RETURN NULL;
END
$fn$;
$awa_template$)
ON CONFLICT (name) DO UPDATE SET ord = EXCLUDED.ord, body = EXCLUDED.body;
INSERT INTO awa.substrate_functions (name, ord, body) VALUES ('claim', 13, $awa_template$-- {schema}.claim(queue, limit, cand_seq, cand_xid, instance): claim up to
-- `limit` jobs of a queue in one statement: take them from the ready plane
-- (which advances the lane heads) and write ONE claim batch row for all of
-- them in the current claim-ring slot (item i = the i-th job returned).
-- Each claim issues run_lease + 1 and counts the attempt (the first run is
-- attempt 1). The attempt token is (job_id, run_lease, claim_slot,
-- batch_id, item): finishing goes straight to its item.
--
-- cand_seq/cand_xid: the frontier candidate returned by the previous
-- call (NULL on the first); see ready_take. Every returned row carries the
-- next candidate; a row with job_id NULL carries only that.
--
-- waiting: work is visible in the queue but the frontier has not settled
-- past it yet; the caller should look again shortly rather than wait for a
-- notification that already came.
--
-- A paused queue hands out nothing.
--
-- Bounds: limit within awa_core::bounds::CLAIM_BATCH, 1 to 1024 (SQLSTATE
-- 22023, before anything is read).
CREATE OR REPLACE FUNCTION {schema}.claim(
    p_queue     text,
    p_limit     integer,
    p_cand_seq  bigint,
    p_cand_xid  xid8,
    p_instance  uuid
) RETURNS TABLE (
    job_id bigint, run_lease bigint, claim_slot integer, batch_id bigint, item integer,
    ready_slot integer, ready_seq bigint,
    kind text, args jsonb, priority smallint, attempt integer, max_attempts integer,
    created_at timestamptz, ready_at timestamptz, unique_key text, metadata jsonb,
    next_seq bigint, next_xid xid8, waiting boolean
) LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan AS $fn$
#variable_conflict use_column
DECLARE
    v_claim_slot integer;
    v_aging      interval;
    v_paused     boolean;
BEGIN
    IF p_limit IS NULL OR p_limit NOT BETWEEN 1 AND 1024 THEN
        RAISE EXCEPTION 'claim limit must be 1 to 1024 (got %)', coalesce(p_limit::text, 'NULL')
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'Claim at most a claim batch (awa_core::bounds::CLAIM_BATCH) per call.';
    END IF;
    SELECT m.priority_aging_interval, m.paused INTO v_aging, v_paused
      FROM awa.queue_meta m WHERE m.queue = p_queue;
    IF coalesce(v_paused, false) THEN
        RETURN QUERY SELECT NULL::bigint, NULL::bigint, NULL::integer, NULL::bigint, NULL::integer,
                            NULL::integer, NULL::bigint,
                            NULL::text, NULL::jsonb, NULL::smallint, NULL::integer, NULL::integer,
                            NULL::timestamptz, NULL::timestamptz, NULL::text, NULL::jsonb,
                            p_cand_seq, p_cand_xid, false;
        RETURN;
    END IF;

    SELECT l.slot INTO v_claim_slot
      FROM {schema}.ring_ledger l
     WHERE l.ring = 'claim'
     ORDER BY l.generation DESC
     LIMIT 1;

    RETURN QUERY
    WITH taken AS MATERIALIZED (
        SELECT t.*, row_number() OVER () AS ord
          FROM {schema}.ready_take(p_queue, p_limit, p_cand_seq, p_cand_xid, v_aging) t
    ),
    items AS (
        SELECT t.*, row_number() OVER (ORDER BY t.ord)::integer AS item
          FROM taken t
         WHERE t.job_id IS NOT NULL
    ),
    batch AS (
        -- One row for the whole claim; nothing when nothing was taken.
        INSERT INTO {schema}.claim_batches
            (slot, batch_id, queue, instance_id, body_slots,
             job_ids, run_leases, attempts, ready_slots, ready_seqs, priorities, shards, keyed)
        SELECT v_claim_slot, nextval('{schema}.claim_batch_seq'), p_queue, p_instance,
               ARRAY(SELECT DISTINCT i2.slot FROM items i2),
               array_agg(i.job_id ORDER BY i.item), array_agg(i.run_lease + 1 ORDER BY i.item),
               array_agg(i.attempt + 1 ORDER BY i.item), array_agg(i.slot ORDER BY i.item),
               array_agg(i.lane_seq ORDER BY i.item), array_agg(i.priority ORDER BY i.item),
               array_agg(i.shard ORDER BY i.item),
               array_agg(i.item ORDER BY i.item) FILTER (WHERE i.unique_key IS NOT NULL)
          FROM items i
        HAVING count(*) > 0
        RETURNING batch_id
    )
    SELECT t.job_id, t.run_lease + 1, v_claim_slot, b.batch_id, i.item, t.slot, t.lane_seq,
           t.kind, t.args, t.priority, t.attempt + 1, t.max_attempts,
           t.created_at, t.ready_at, t.unique_key, t.metadata,
           t.next_seq, t.next_xid, coalesce(t.frontier < t.next_seq, false)
      FROM taken t
      LEFT JOIN items i ON i.ord = t.ord
      LEFT JOIN batch b ON t.job_id IS NOT NULL
     ORDER BY t.ord;
END
$fn$;
$awa_template$)
ON CONFLICT (name) DO UPDATE SET ord = EXCLUDED.ord, body = EXCLUDED.body;
INSERT INTO awa.substrate_functions (name, ord, body) VALUES ('deferred_promote', 12, $awa_template$-- {schema}.deferred_promote(limit): move up to `limit` due jobs into the
-- ready ring, earliest first, with their attempt records. Returns how many
-- moved.
--
-- Safe with several promoters: rows are taken FOR UPDATE SKIP LOCKED, so
-- two promoters split the due work instead of moving a job twice; the
-- delete and the append commit together or not at all.
--
-- `limit` is 1 to 10000 (awa_core::bounds::MAINT_LIMIT; SQLSTATE 22023).
CREATE OR REPLACE FUNCTION {schema}.deferred_promote(p_limit integer)
RETURNS integer LANGUAGE plpgsql AS $fn$
#variable_conflict use_column
DECLARE
    v_count integer;
BEGIN
    IF p_limit IS NULL OR p_limit NOT BETWEEN 1 AND 10000 THEN
        RAISE EXCEPTION 'deferred_promote: limit must be 1 to 10000 (got %)', coalesce(p_limit::text, 'NULL')
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'Rows one maintenance call moves (awa_core::bounds::MAINT_LIMIT); the leader promotes 2000 at a time.';
    END IF;
    WITH due AS (
        DELETE FROM {schema}.deferred_jobs d
         WHERE d.job_id IN (SELECT x.job_id FROM {schema}.deferred_jobs x
                             WHERE x.run_at <= now()
                             ORDER BY x.run_at
                             LIMIT p_limit
                               FOR UPDATE SKIP LOCKED)
        RETURNING d.*
    ),
    ordered AS (
        SELECT * FROM due ORDER BY run_at, job_id
    )
    SELECT count(*) INTO v_count
      FROM {schema}.ready_append(
          ARRAY(SELECT job_id FROM ordered),
          ARRAY(SELECT queue FROM ordered),
          ARRAY(SELECT priority FROM ordered),
          ARRAY(SELECT kind FROM ordered),
          ARRAY(SELECT args FROM ordered),
          ARRAY(SELECT attempt FROM ordered),
          ARRAY(SELECT max_attempts FROM ordered),
          ARRAY(SELECT run_lease FROM ordered),
          ARRAY(SELECT created_at FROM ordered),
          ARRAY(SELECT unique_key FROM ordered),
          ARRAY(SELECT metadata FROM ordered),
          ARRAY(SELECT attempts FROM ordered));
    RETURN v_count;
END
$fn$;
$awa_template$)
ON CONFLICT (name) DO UPDATE SET ord = EXCLUDED.ord, body = EXCLUDED.body;
INSERT INTO awa.substrate_functions (name, ord, body) VALUES ('deferred_schedule', 11, $awa_template$-- {schema}.deferred_schedule(...): hold jobs that are not runnable yet.
-- Parallel arrays, one element per job; run_at is when it becomes due.
-- Called by enqueue, which checks its input; the runtime role may call it
-- directly, so it refuses (SQLSTATE 22023) arrays of different lengths, a
-- NULL id, queue, kind, args or run_at, a priority outside 1..4
-- (awa_core::bounds::PRIORITY) and max attempts outside 1..1000
-- (MAX_ATTEMPTS), before anything is written.
CREATE OR REPLACE FUNCTION {schema}.deferred_schedule(
    p_job_ids      bigint[],
    p_queues       text[],
    p_priorities   smallint[],
    p_kinds        text[],
    p_args         jsonb[],
    p_max_attempts integer[],
    p_run_at       timestamptz[],
    p_unique_keys  text[],
    p_metadata     jsonb[]
) RETURNS void LANGUAGE plpgsql AS $fn$
#variable_conflict use_column
BEGIN
    IF array_length(p_queues, 1) IS DISTINCT FROM array_length(p_job_ids, 1)
       OR array_length(p_priorities, 1) IS DISTINCT FROM array_length(p_job_ids, 1)
       OR array_length(p_kinds, 1) IS DISTINCT FROM array_length(p_job_ids, 1)
       OR array_length(p_args, 1) IS DISTINCT FROM array_length(p_job_ids, 1)
       OR array_length(p_max_attempts, 1) IS DISTINCT FROM array_length(p_job_ids, 1)
       OR array_length(p_run_at, 1) IS DISTINCT FROM array_length(p_job_ids, 1)
       OR array_length(p_unique_keys, 1) IS DISTINCT FROM array_length(p_job_ids, 1)
       OR array_length(p_metadata, 1) IS DISTINCT FROM array_length(p_job_ids, 1) THEN
        RAISE EXCEPTION 'deferred_schedule arrays differ in length' USING ERRCODE = 'invalid_parameter_value',
              HINT = 'Send one element per job in every array.';
    END IF;
    IF EXISTS (SELECT 1
                 FROM unnest(p_job_ids, p_queues, p_priorities, p_kinds, p_args, p_max_attempts, p_run_at)
                      AS i(id, q, p, k, a, m, r)
                WHERE i.id IS NULL OR i.q IS NULL OR i.k IS NULL OR i.a IS NULL OR i.r IS NULL
                   OR i.p IS NULL OR i.p NOT BETWEEN 1 AND 4
                   OR i.m IS NULL OR i.m NOT BETWEEN 1 AND 1000) THEN
        RAISE EXCEPTION 'deferred_schedule: a job has no id, queue, kind, args or run_at, or a priority or max attempts out of range'
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'Priority is 1 to 4, max attempts 1 to 1000. Producers call enqueue, which checks its input.';
    END IF;
    INSERT INTO {schema}.deferred_jobs
        (job_id, queue, priority, kind, args, attempt, max_attempts, run_lease, run_at,
         reason, created_at, unique_key, metadata)
    SELECT i.job_id, i.queue, i.priority, i.kind, i.args, 0, i.max_attempts, 0, i.run_at,
           'scheduled', now(), i.unique_key, i.metadata
      FROM unnest(p_job_ids, p_queues, p_priorities, p_kinds, p_args, p_max_attempts,
                  p_run_at, p_unique_keys, p_metadata)
           AS i(job_id, queue, priority, kind, args, max_attempts, run_at, unique_key, metadata);
END
$fn$;
$awa_template$)
ON CONFLICT (name) DO UPDATE SET ord = EXCLUDED.ord, body = EXCLUDED.body;
INSERT INTO awa.substrate_functions (name, ord, body) VALUES ('dlq_retry', 21, $awa_template$-- {schema}.dlq_retry(job_id, queue, all): put dead-lettered jobs back as
-- fresh work (attempt 0, same id, run_lease continuing so any old writer
-- stays rejected, attempt records kept). Either one id, or every entry (optionally of one queue).
--
-- Returns one row per selected entry: held_by NULL when it was retried;
-- otherwise the entry stays in the DLQ and held_by names the job that now
-- holds its unique_key.
--
-- The rule that must not be broken: a job that was enqueued with a unique
-- key runs again only as the key's owner. Dead-lettering released the key
-- (or, for a key spec that keeps failed jobs, marked it finished until its
-- period ends), so the retry takes it again through unique_take (the same
-- decision enqueue makes, in the same transaction as the append; a row
-- the job itself kept is taken over with its hold). When a newer job
-- holds the key, retrying would make two unfinished jobs with one key, and
-- dropping the key would silently drop the job's uniqueness: the entry is
-- kept instead, for the operator to retry after that job finishes, or to
-- purge.
--
-- The selection is one job (job_id, all false; queue NULL) or all of them
-- (job_id NULL, all true; optionally of one queue); anything else is
-- refused (SQLSTATE 22023), as the CLI refuses it.
CREATE OR REPLACE FUNCTION {schema}.dlq_retry(p_job_id bigint, p_queue text, p_all boolean)
RETURNS TABLE (job_id bigint, unique_key text, held_by bigint)
LANGUAGE plpgsql AS $fn$
#variable_conflict use_column
DECLARE
    v_ids    bigint[];
    v_keys   text[];
    v_owners bigint[];
BEGIN
    IF p_all IS NULL OR p_all = (p_job_id IS NOT NULL) OR (p_job_id IS NOT NULL AND p_queue IS NOT NULL) THEN
        RAISE EXCEPTION 'dlq_retry: name one job (job_id, all = false) or all of them (job_id NULL, all = true, optionally a queue)'
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'awa dlq retry --id ID, or --all [--queue Q].';
    END IF;
    -- Lock the selection: a concurrent retry or purge of an entry waits,
    -- then finds it gone.
    SELECT coalesce(array_agg(s.job_id ORDER BY s.dead_at, s.job_id), '{}'),
           coalesce(array_agg(s.unique_key ORDER BY s.dead_at, s.job_id), '{}')
      INTO v_ids, v_keys
      FROM (SELECT d.job_id, d.dead_at, d.unique_key
              FROM {schema}.dlq_entries d
             WHERE (p_all OR d.job_id = p_job_id)
               AND (p_queue IS NULL OR d.queue = p_queue)
               FOR UPDATE) s;
    IF cardinality(v_ids) = 0 THEN
        RETURN;
    END IF;

    v_owners := {schema}.unique_take(v_keys, v_ids);

    RETURN QUERY
    WITH taken AS (
        DELETE FROM {schema}.dlq_entries d
         WHERE d.job_id = ANY (ARRAY(SELECT o.id FROM unnest(v_ids, v_owners) AS o(id, owner)
                                      WHERE o.id = o.owner))
        RETURNING d.*
    ),
    ordered AS (SELECT * FROM taken ORDER BY dead_at, job_id),
    appended AS (
        SELECT a.job_id FROM {schema}.ready_append(
            ARRAY(SELECT job_id FROM ordered),
            ARRAY(SELECT queue FROM ordered),
            ARRAY(SELECT priority FROM ordered),
            ARRAY(SELECT kind FROM ordered),
            ARRAY(SELECT args FROM ordered),
            ARRAY(SELECT 0 FROM ordered),
            ARRAY(SELECT max_attempts FROM ordered),
            ARRAY(SELECT run_lease FROM ordered),
            ARRAY(SELECT created_at FROM ordered),
            ARRAY(SELECT unique_key FROM ordered),
            ARRAY(SELECT metadata FROM ordered),
            ARRAY(SELECT attempts FROM ordered)) a
    )
    SELECT a.job_id, NULL::text, NULL::bigint FROM appended a
    UNION ALL
    SELECT o.id, o.key, o.owner
      FROM unnest(v_ids, v_keys, v_owners) WITH ORDINALITY AS o(id, key, owner, ord)
     WHERE o.id <> o.owner;
END
$fn$;
$awa_template$)
ON CONFLICT (name) DO UPDATE SET ord = EXCLUDED.ord, body = EXCLUDED.body;
INSERT INTO awa.substrate_functions (name, ord, body) VALUES ('enqueue', 8, $awa_template$-- {schema}.enqueue(queues, kinds, args, priorities, run_at, max_attempts,
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
$awa_template$)
ON CONFLICT (name) DO UPDATE SET ord = EXCLUDED.ord, body = EXCLUDED.body;
INSERT INTO awa.substrate_functions (name, ord, body) VALUES ('enqueue_local', 7, $awa_template$-- {schema}.enqueue_local(...): the producer's work, inside the caller's
-- transaction (commit makes the jobs visible, rollback leaves no trace).
-- Parallel arrays, one element per job; many jobs per call.
--
-- * max_attempts NULL takes the queue's default (awa.queue_meta, else 25).
-- * run_at NULL or not in the future: runnable now, appended to the ready
--   ring in array order; otherwise held by the deferred plane.
-- * unique_key: at most one non-terminal job per key (unique_take). A job
--   whose key is taken is not inserted; its row reports the owner's id and
--   inserted = false. A job is created exactly when this call inserted its
--   key row, so a key never commits without its job. A concurrent enqueue
--   of the same key waits for the first to commit or roll back (the primary
--   key of job_uniques). Within one call the first element with a key wins;
--   later ones report it. Under REPEATABLE READ / SERIALIZABLE, a key taken
--   by a transaction that committed after the caller's snapshot is refused
--   with SQLSTATE 40001 (retry the transaction).
-- * unique (optional, a trailing argument: callers of contract version 1
--   leave it out): per element NULL, or a key spec (unique_derive): the
--   element's key is then derived from the spec, its kind, queue, args
--   and unique_key, and may keep holding after the job finished until
--   its period ends. Elements without a spec use unique_key as given.
--
-- * size: args + metadata of one job, as JSON text (jsonb::text), must not
--   exceed the substrate's max_job_bytes (substrate_info, default 1 MiB).
--   A larger job refuses the whole call (SQLSTATE 54000,
--   program_limit_exceeded) before anything is written: workers hold a
--   claimed job in memory, and every producer path comes through here.
--
-- * substrate: exactly this one, whatever the routing says. The routed
--   entry point is {schema}.enqueue (fn_enqueue_routed.sql), which calls
--   this on the substrate that receives writes; PgReadyPlane pinned to a
--   schema calls this directly.
--
-- * bounds (awa_core::bounds), checked before anything is written or an
--   id drawn, with the SQLSTATEs of the producer contract
--   (docs/sql-producer.md): a NULL queue, kind, args or priority 23502; a
--   priority outside 1..4 or max attempts outside 1..1000 23514.
--
-- Returns one row per input element, in input order.
CREATE OR REPLACE FUNCTION {schema}.enqueue_local(
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
#variable_conflict use_column
DECLARE
    v_n      integer := coalesce(array_length(p_queues, 1), 0);
    v_ids    bigint[];
    v_owners bigint[];
    v_max    integer[];
    v_keys   text[] := p_unique_keys;
    v_holds  jsonb[];
    v_now_runnable boolean;
    v_limit     integer;
    v_big_ord   bigint;
    v_big_bytes bigint;
    v_bad       text;
    a_ids bigint[]; a_queues text[]; a_priorities smallint[]; a_kinds text[]; a_args jsonb[];
    a_max integer[]; a_run_at timestamptz[]; a_keys text[]; a_meta jsonb[];
BEGIN
    IF v_n = 0 THEN
        RETURN;
    END IF;
    IF array_length(p_kinds, 1) IS DISTINCT FROM v_n OR array_length(p_args, 1) IS DISTINCT FROM v_n
       OR array_length(p_priorities, 1) IS DISTINCT FROM v_n OR array_length(p_run_at, 1) IS DISTINCT FROM v_n
       OR array_length(p_max_attempts, 1) IS DISTINCT FROM v_n OR array_length(p_unique_keys, 1) IS DISTINCT FROM v_n
       OR array_length(p_metadata, 1) IS DISTINCT FROM v_n
       OR (p_unique IS NOT NULL AND array_length(p_unique, 1) IS DISTINCT FROM v_n) THEN
        RAISE EXCEPTION 'enqueue arrays differ in length' USING ERRCODE = 'invalid_parameter_value',
              HINT = 'Send one element per job in every array.';
    END IF;
    -- The bounds, before any id is drawn (sequences do not roll back).
    SELECT b.ord, b.what INTO v_big_ord, v_bad
      FROM (SELECT i.ord,
                   CASE WHEN i.q IS NULL THEN 'queue' WHEN i.k IS NULL THEN 'kind'
                        WHEN i.a IS NULL THEN 'args' WHEN i.p IS NULL THEN 'priority'
                        WHEN i.p NOT BETWEEN 1 AND 4 THEN 'priority ' || i.p
                        WHEN i.m NOT BETWEEN 1 AND 1000 THEN 'max attempts ' || i.m END AS what
              FROM unnest(p_queues, p_kinds, p_args, p_priorities, p_max_attempts)
                   WITH ORDINALITY AS i(q, k, a, p, m, ord)) b
     WHERE b.what IS NOT NULL
     ORDER BY b.ord
     LIMIT 1;
    IF FOUND AND v_bad IN ('queue', 'kind', 'args', 'priority') THEN
        RAISE EXCEPTION 'job % of this enqueue has no %', v_big_ord, v_bad
            USING ERRCODE = 'not_null_violation',
                  HINT = 'Every job needs a queue, a kind, args (any JSON) and a priority (1 to 4).';
    ELSIF FOUND THEN
        RAISE EXCEPTION 'job % of this enqueue has % (priority is 1 to 4, max attempts 1 to 1000)',
                        v_big_ord, v_bad
            USING ERRCODE = 'check_violation',
                  HINT = 'Send a priority of 1 (runs first) to 4 (runs last) and max attempts of 1 to 1000, or NULL for the queue''s default.';
    END IF;

    -- The size limit. Rendering to text costs, so only values whose stored
    -- size could reach the limit are measured (JSON text is at most ~6x the
    -- binary jsonb size: a control character, 1 byte stored, is 6 as
    -- \u0001; we allow 8x), plus any compressed value, whose stored size
    -- says nothing.
    SELECT s.max_job_bytes INTO v_limit FROM {schema}.substrate_info s;
    SELECT b.ord, b.bytes INTO v_big_ord, v_big_bytes
      FROM (SELECT i.ord, octet_length(i.a::text) + coalesce(octet_length(i.md::text), 0) AS bytes
              FROM unnest(p_args, p_metadata) WITH ORDINALITY AS i(a, md, ord)
             WHERE (coalesce(pg_column_size(i.a), 0) + coalesce(pg_column_size(i.md), 0))::bigint * 8 > v_limit
                OR pg_column_compression(i.a) IS NOT NULL
                OR pg_column_compression(i.md) IS NOT NULL) b
     WHERE b.bytes > v_limit
     ORDER BY b.ord
     LIMIT 1;
    IF FOUND THEN
        PERFORM {schema}.enqueue_oversized(v_big_ord, p_queues[v_big_ord], p_kinds[v_big_ord],
                                           v_big_bytes, v_limit);
    END IF;

    -- ready_append's ordering rule: xid before any lane position.
    PERFORM pg_current_xact_id();

    v_ids := ARRAY(SELECT nextval('awa.job_id_seq') FROM generate_series(1, v_n));
    v_max := ARRAY(SELECT coalesce(i.max_attempts, m.max_attempts, 25)
                     FROM unnest(p_queues, p_max_attempts) WITH ORDINALITY AS i(queue, max_attempts, ord)
                     LEFT JOIN awa.queue_meta m ON m.queue = i.queue
                    ORDER BY i.ord);

    -- Key specs become keys (and holds) here, for every producer alike.
    -- A call without specs pays one NULL test.
    IF p_unique IS NOT NULL AND EXISTS (SELECT 1 FROM unnest(p_unique) s WHERE s IS NOT NULL) THEN
        v_holds := ARRAY(SELECT CASE WHEN i.spec IS NOT NULL
                                     THEN {schema}.unique_derive(i.key, i.spec, i.q, i.k, i.a) END
                           FROM unnest(p_unique_keys, p_unique, p_queues, p_kinds, p_args)
                                WITH ORDINALITY AS i(key, spec, q, k, a, ord)
                          ORDER BY i.ord);
        v_keys := ARRAY(SELECT coalesce(i.derived ->> 'key', i.key)
                          FROM unnest(v_holds, p_unique_keys) WITH ORDINALITY AS i(derived, key, ord)
                         ORDER BY i.ord);
    END IF;

    -- The common case, everything runnable now and no unique keys, goes
    -- straight to the ready ring without splitting the arrays.
    IF NOT EXISTS (SELECT 1 FROM unnest(v_keys, p_run_at) AS k(key, run_at)
                    WHERE k.key IS NOT NULL OR k.run_at > now()) THEN
        PERFORM 1 FROM {schema}.ready_append(
            v_ids, p_queues, p_priorities, p_kinds, p_args,
            array_fill(0, ARRAY[v_n]), v_max, array_fill(0::bigint, ARRAY[v_n]),
            array_fill(now(), ARRAY[v_n]), v_keys, p_metadata);
        RETURN QUERY SELECT i.id, true, false FROM unnest(v_ids) WITH ORDINALITY AS i(id, ord) ORDER BY i.ord;
        RETURN;
    END IF;

    -- Ownership of every key is decided by what unique_take inserted for
    -- it; an element is created below only when it owns its key.
    IF EXISTS (SELECT 1 FROM unnest(v_keys) k WHERE k IS NOT NULL) THEN
        v_owners := {schema}.unique_take(v_keys, v_ids, v_holds);
    ELSE
        v_owners := v_ids;
    END IF;

    -- Split the jobs that are ours to insert into runnable and scheduled,
    -- keeping input order (array_agg ... ORDER BY ord).
    FOR v_now_runnable IN SELECT true UNION ALL SELECT false LOOP
        SELECT array_agg(i.id ORDER BY i.ord), array_agg(i.q ORDER BY i.ord),
               array_agg(i.p ORDER BY i.ord), array_agg(i.k ORDER BY i.ord),
               array_agg(i.a ORDER BY i.ord), array_agg(i.m ORDER BY i.ord),
               array_agg(i.run_at ORDER BY i.ord), array_agg(i.u ORDER BY i.ord),
               array_agg(i.md ORDER BY i.ord)
          INTO a_ids, a_queues, a_priorities, a_kinds, a_args, a_max, a_run_at, a_keys, a_meta
          FROM unnest(v_ids, v_owners, p_run_at, p_queues, p_priorities, p_kinds, p_args,
                      v_max, v_keys, p_metadata)
               WITH ORDINALITY AS i(id, owner, run_at, q, p, k, a, m, u, md, ord)
         WHERE i.id = i.owner
           AND (i.run_at IS NULL OR i.run_at <= now()) = v_now_runnable;
        CONTINUE WHEN a_ids IS NULL;
        IF v_now_runnable THEN
            PERFORM 1 FROM {schema}.ready_append(
                a_ids, a_queues, a_priorities, a_kinds, a_args,
                array_fill(0, ARRAY[cardinality(a_ids)]), a_max,
                array_fill(0::bigint, ARRAY[cardinality(a_ids)]),
                array_fill(now(), ARRAY[cardinality(a_ids)]), a_keys, a_meta);
        ELSE
            PERFORM {schema}.deferred_schedule(
                a_ids, a_queues, a_priorities, a_kinds, a_args, a_max, a_run_at, a_keys, a_meta);
        END IF;
    END LOOP;

    RETURN QUERY
    SELECT i.owner, i.id = i.owner, i.run_at IS NOT NULL AND i.run_at > now()
      FROM unnest(v_ids, v_owners, p_run_at) WITH ORDINALITY AS i(id, owner, run_at, ord)
     ORDER BY i.ord;
END
$fn$;
$awa_template$)
ON CONFLICT (name) DO UPDATE SET ord = EXCLUDED.ord, body = EXCLUDED.body;
INSERT INTO awa.substrate_functions (name, ord, body) VALUES ('enqueue_oversized', 6, $awa_template$-- {schema}.enqueue_oversized(ord, queue, kind, bytes, limit): refuse an
-- enqueue because job `ord` has `bytes` of args plus metadata (as JSON
-- text), over the substrate's max_job_bytes `limit`. Always raises SQLSTATE
-- 54000 (program_limit_exceeded); never returns.
--
-- The one wording of the refusal, shared by every enqueue path
-- ({schema}.enqueue, call_enqueue_now.sql, call_enqueue_staged.sql), which
-- call it only for a job already found over the limit, so the common path
-- never enters PL/pgSQL for it.
--
-- The rule that must not be broken: nothing of a refused enqueue is
-- written. The callers raise from the statement (or function) that would
-- write, so the error undoes the whole call.
CREATE OR REPLACE FUNCTION {schema}.enqueue_oversized(
    p_ord   bigint,
    p_queue text,
    p_kind  text,
    p_bytes bigint,
    p_limit integer
) RETURNS integer
LANGUAGE plpgsql AS $fn$
BEGIN
    RAISE EXCEPTION 'job % of this enqueue (queue %, kind %) has % bytes of args and metadata, over the limit of % bytes',
                    p_ord, p_queue, p_kind, p_bytes, p_limit
        USING ERRCODE = 'program_limit_exceeded',
              DETAIL = 'Nothing of this enqueue was written.',
              HINT = 'Store large payloads elsewhere (a table, object storage) and pass a reference in args; '
                     'the limit is max_job_bytes in the substrate''s substrate_info.';
END
$fn$;
$awa_template$)
ON CONFLICT (name) DO UPDATE SET ord = EXCLUDED.ord, body = EXCLUDED.body;
INSERT INTO awa.substrate_functions (name, ord, body) VALUES ('exec_park', 20, $awa_template$-- {schema}.exec_park(ring, slot, limit): move up to `limit` open attempts
-- that keep ring slot `slot` live out of the rings, into parked_attempts.
-- Called by ring_prune for the slot a ring must rotate onto next, so a job
-- that runs for hours never stops reclamation.
--
--   queue: open items whose body is in that queue slot
--   claim: open items of the batches in that claim slot
--   lease: open items whose lease is in that lease slot
--
-- The move, in this one transaction: per batch, insert the next closure
-- link listing its items being parked (outcome 'parked'), exactly as
-- finish does (same numbering, same primary key), and, only for the links
-- this call inserted, a parked_attempts row per item with the batch item,
-- the lease's heartbeat and callback, and the job's body. So parking and
-- finishing exclude each other: a finisher that took the link number first
-- makes this park of that batch do nothing (the next prune tries again);
-- once parked, finish can only win by deleting the parked row (see finish).
-- Either way the attempt has exactly one open piece of evidence at a time.
--
-- The worker's token (job_id, run_lease, claim_slot, batch_id, item) stays
-- valid: finish and heartbeat look for a parked row when the item is
-- closed.
--
-- Returns how many attempts were parked. An unknown ring, a slot not of
-- that ring, or a limit outside 1..10000 (awa_core::bounds::MAINT_LIMIT)
-- is refused (22023).
CREATE OR REPLACE FUNCTION {schema}.exec_park(p_ring text, p_slot integer, p_limit integer)
RETURNS integer LANGUAGE plpgsql AS $fn$
#variable_conflict use_column
DECLARE
    v_slots   integer[];
    v_batches bigint[];
    v_items   integer[];
    v_parked  integer;
BEGIN
    -- A slot of this ring (ring_slot_count refuses an unknown ring).
    IF p_slot IS NULL OR p_slot NOT BETWEEN 0 AND {schema}.ring_slot_count(p_ring) - 1 THEN
        RAISE EXCEPTION 'slot % is not a slot of the % ring', coalesce(p_slot::text, 'NULL'), p_ring
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'Slots are numbered from 0 to the ring''s slot count - 1 (substrate_info).';
    END IF;
    IF p_limit IS NULL OR p_limit NOT BETWEEN 1 AND 10000 THEN
        RAISE EXCEPTION 'exec_park: limit must be 1 to 10000 (got %)', coalesce(p_limit::text, 'NULL')
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'Attempts one maintenance call parks (awa_core::bounds::MAINT_LIMIT); prune parks 1000 at a time.';
    END IF;
    -- Which items: one statement per ring, each shaped so the planner can
    -- prune to the partitions it names (claim: one claim slot; lease: one
    -- lease slot, then batches by primary key; queue: batches whose
    -- body_slots name the slot).
    IF p_ring = 'claim' THEN
        SELECT array_agg(o.slot), array_agg(o.batch_id), array_agg(o.item)
          INTO v_slots, v_batches, v_items
          FROM (SELECT b.slot, b.batch_id, u.item::integer AS item
                  FROM {schema}.claim_batches b
                 CROSS JOIN LATERAL generate_subscripts(b.job_ids, 1) AS u(item)
                 WHERE b.slot = p_slot
                   AND NOT EXISTS (SELECT 1 FROM {schema}.claim_closures c
                                    WHERE c.slot = b.slot AND c.batch_id = b.batch_id AND c.open_after = 0)
                   AND NOT EXISTS (SELECT 1 FROM {schema}.claim_closures c
                                    WHERE c.slot = b.slot AND c.batch_id = b.batch_id AND u.item = ANY (c.items))
                 ORDER BY b.batch_id, u.item LIMIT p_limit) o;
    ELSIF p_ring = 'lease' THEN
        SELECT array_agg(o.slot), array_agg(o.batch_id), array_agg(o.item)
          INTO v_slots, v_batches, v_items
          FROM (SELECT DISTINCT l.claim_slot AS slot, l.batch_id, l.item
                  FROM {schema}.leases l
                  JOIN {schema}.claim_batches b ON b.slot = l.claim_slot AND b.batch_id = l.batch_id
                 WHERE l.slot = p_slot
                   AND NOT EXISTS (SELECT 1 FROM {schema}.claim_closures c
                                    WHERE c.slot = l.claim_slot AND c.batch_id = l.batch_id AND l.item = ANY (c.items))
                 ORDER BY l.batch_id, l.item LIMIT p_limit) o;
    ELSE
        SELECT array_agg(o.slot), array_agg(o.batch_id), array_agg(o.item)
          INTO v_slots, v_batches, v_items
          FROM (SELECT b.slot, b.batch_id, u.item::integer AS item
                  FROM {schema}.claim_batches b
                 CROSS JOIN LATERAL unnest(b.ready_slots) WITH ORDINALITY AS u(ready_slot, item)
                 WHERE p_slot = ANY (b.body_slots) AND u.ready_slot = p_slot
                   AND NOT EXISTS (SELECT 1 FROM {schema}.claim_closures c
                                    WHERE c.slot = b.slot AND c.batch_id = b.batch_id AND c.open_after = 0)
                   AND NOT EXISTS (SELECT 1 FROM {schema}.claim_closures c
                                    WHERE c.slot = b.slot AND c.batch_id = b.batch_id AND u.item = ANY (c.items))
                 ORDER BY b.batch_id, u.item LIMIT p_limit) o;
    END IF;
    IF v_items IS NULL THEN
        RETURN 0;
    END IF;

    WITH open AS (
        -- Inner join with the body: an open item always has it (the queue
        -- slot is not reclaimed while the item is open).
        SELECT k.slot, k.batch_id, k.item, b.job_ids[k.item] AS job_id,
               b.run_leases[k.item] AS run_lease, b.queue, b.attempts[k.item] AS attempt,
               b.claimed_at, b.instance_id, b.ready_seqs[k.item] AS ready_seq,
               cardinality(b.job_ids) AS size,
               e.kind, e.args, e.priority, e.max_attempts, e.created_at, e.unique_key, e.metadata,
               e.attempts
          FROM unnest(v_slots, v_batches, v_items) AS k(slot, batch_id, item)
          JOIN {schema}.claim_batches b ON b.slot = k.slot AND b.batch_id = k.batch_id
          JOIN {schema}.ready_entries e
            ON e.slot = b.ready_slots[k.item] AND e.queue = b.queue
           AND e.priority = b.priorities[k.item] AND e.shard = b.shards[k.item]
           AND e.lane_seq = b.ready_seqs[k.item] AND e.job_id = b.job_ids[k.item]
         -- Again, in the snapshot the links below are numbered in: an item
         -- a finisher closed since the choice above is not parked.
         WHERE NOT EXISTS (SELECT 1 FROM {schema}.claim_closures c
                            WHERE c.slot = k.slot AND c.batch_id = k.batch_id AND k.item = ANY (c.items))
    ),
    links AS (
        -- The next link of each batch, given what its links have closed
        -- (read in this statement's snapshot, like finish does).
        SELECT o.slot, o.batch_id, ch.last_link + 1 AS link,
               array_agg(o.item ORDER BY o.item) AS items,
               (min(o.size) - min(ch.closed) - count(*))::integer AS open_after
          FROM open o
         CROSS JOIN LATERAL (
                SELECT coalesce(max(c.link), 0) AS last_link,
                       coalesce(sum(cardinality(c.items)), 0) AS closed
                  FROM {schema}.claim_closures c
                 WHERE c.slot = o.slot AND c.batch_id = o.batch_id) ch
         GROUP BY o.slot, o.batch_id, ch.last_link
         ORDER BY o.slot, o.batch_id
    ),
    closed AS (
        INSERT INTO {schema}.claim_closures AS c (slot, batch_id, link, items, outcome, open_after)
        SELECT l.slot, l.batch_id, l.link, l.items, 'parked', l.open_after FROM links l
        ON CONFLICT DO NOTHING
        RETURNING c.slot, c.batch_id
    ),
    parked AS (
        INSERT INTO {schema}.parked_attempts
            (job_id, run_lease, claim_slot, batch_id, item, queue, attempt, claimed_at, deadline_at,
             instance_id, heartbeat_at, callback_id, callback_timeout,
             ready_seq, kind, args, priority, max_attempts, created_at, unique_key, metadata,
             attempts)
        SELECT o.job_id, o.run_lease, o.slot, o.batch_id, o.item, o.queue, o.attempt, o.claimed_at,
               l.deadline_at, o.instance_id, l.heartbeat_at, l.callback_id, l.callback_timeout,
               o.ready_seq, o.kind, o.args, o.priority, o.max_attempts, o.created_at,
               o.unique_key, o.metadata, o.attempts
          FROM open o
          JOIN closed c ON c.slot = o.slot AND c.batch_id = o.batch_id
          LEFT JOIN LATERAL (
                SELECT l.heartbeat_at, l.deadline_at, l.callback_id, l.callback_timeout
                  FROM {schema}.leases l
                 WHERE l.job_id = o.job_id AND l.run_lease = o.run_lease
                 ORDER BY l.heartbeat_at DESC
                 LIMIT 1) l ON true
        RETURNING 1
    )
    SELECT count(*)::integer INTO v_parked FROM parked;
    RETURN v_parked;
END
$fn$;
$awa_template$)
ON CONFLICT (name) DO UPDATE SET ord = EXCLUDED.ord, body = EXCLUDED.body;
INSERT INTO awa.substrate_functions (name, ord, body) VALUES ('exec_slot_live', 18, $awa_template$-- {schema}.exec_slot_live(ring, slot): why a ring slot still holds a live
-- attempt, or NULL. Used by ring_prune before and after locking the slot.
-- An attempt is an item of a claim batch; it is open while no closure link
-- of its batch lists it, and a closed item is dead everywhere.
--   queue: an open item whose job body is in that queue slot (finishing it
--          reads the body, and writes its terminal fact there)
--   claim: a batch in that claim slot with an open item. The last link of
--          a batch records how many items it left open (links are
--          serialized by their primary key, so that count is exact), so a
--          batch is open iff no link says 0.
--   lease: a lease in that lease slot whose item is still open
-- An unknown ring or a slot not of that ring is refused (22023).
CREATE OR REPLACE FUNCTION {schema}.exec_slot_live(p_ring text, p_slot integer)
RETURNS text LANGUAGE plpgsql STABLE AS $fn$
BEGIN
    -- A slot of this ring (ring_slot_count refuses an unknown ring).
    IF p_slot IS NULL OR p_slot NOT BETWEEN 0 AND {schema}.ring_slot_count(p_ring) - 1 THEN
        RAISE EXCEPTION 'slot % is not a slot of the % ring', coalesce(p_slot::text, 'NULL'), p_ring
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'Slots are numbered from 0 to the ring''s slot count - 1 (substrate_info).';
    END IF;
    RETURN (
        SELECT 'attempt ' || u.job_id || '/' || u.run_lease || ' is still open'
          FROM {schema}.claim_batches b
         CROSS JOIN LATERAL unnest(b.job_ids, b.run_leases, b.ready_slots)
               WITH ORDINALITY AS u(job_id, run_lease, ready_slot, item)
         WHERE p_ring = 'queue' AND p_slot = ANY (b.body_slots) AND u.ready_slot = p_slot
           AND NOT EXISTS (SELECT 1 FROM {schema}.claim_closures c
                            WHERE c.slot = b.slot AND c.batch_id = b.batch_id AND c.open_after = 0)
           AND NOT EXISTS (SELECT 1 FROM {schema}.claim_closures c
                            WHERE c.slot = b.slot AND c.batch_id = b.batch_id AND u.item = ANY (c.items))
        UNION ALL
        SELECT 'claim batch ' || b.batch_id || ' has open attempts (first job ' || b.job_ids[1] || ')'
          FROM {schema}.claim_batches b
         WHERE p_ring = 'claim' AND b.slot = p_slot
           AND NOT EXISTS (SELECT 1 FROM {schema}.claim_closures c
                            WHERE c.slot = b.slot AND c.batch_id = b.batch_id AND c.open_after = 0)
        UNION ALL
        SELECT 'lease of attempt ' || l.job_id || '/' || l.run_lease || ' is still live'
          FROM {schema}.leases l
         WHERE p_ring = 'lease' AND l.slot = p_slot
           AND EXISTS (SELECT 1 FROM {schema}.claim_batches b
                        WHERE b.slot = l.claim_slot AND b.batch_id = l.batch_id)
           AND NOT EXISTS (SELECT 1 FROM {schema}.claim_closures c
                            WHERE c.slot = l.claim_slot AND c.batch_id = l.batch_id AND l.item = ANY (c.items))
        LIMIT 1);
END
$fn$;
$awa_template$)
ON CONFLICT (name) DO UPDATE SET ord = EXCLUDED.ord, body = EXCLUDED.body;
INSERT INTO awa.substrate_functions (name, ord, body) VALUES ('failure_retry', 26, $awa_template$-- {schema}.failure_retry(job_ids): put failed or cancelled jobs back as
-- fresh work (ADR 11): attempt 0, the same id, run_lease continuing so any
-- old writer stays rejected, attempt records kept. Only jobs whose failure
-- this substrate keeps (failure_entries) are taken; other ids are ignored.
--
-- Returns one row per job found: held_by NULL when it was retried;
-- otherwise its failure stays kept and held_by names the unfinished job
-- that now holds its unique key (the rule of dlq_retry: a job enqueued with
-- a unique key runs again only as the key's owner, so it is kept for the
-- operator to retry once that job has finished).
--
-- Locking: the selected rows are locked FOR UPDATE first, so a concurrent
-- retry or the retention pass (SKIP LOCKED) leaves them alone and a second
-- retry of the same job finds nothing. The delete and the append commit
-- together: every snapshot sees the job failed, or back in the ready ring.
-- The append goes to this substrate's ready ring; workers claim from every
-- substrate the routing reads, so the caller retries only in those.
CREATE OR REPLACE FUNCTION {schema}.failure_retry(p_job_ids bigint[])
RETURNS TABLE (job_id bigint, unique_key text, held_by bigint)
LANGUAGE plpgsql AS $fn$
#variable_conflict use_column
DECLARE
    v_ids    bigint[];
    v_keys   text[];
    v_owners bigint[];
BEGIN
    SELECT coalesce(array_agg(s.job_id ORDER BY s.job_id), '{}'),
           coalesce(array_agg(s.unique_key ORDER BY s.job_id), '{}')
      INTO v_ids, v_keys
      FROM (SELECT f.job_id, f.unique_key
              FROM {schema}.failure_entries f
             WHERE f.job_id = ANY (p_job_ids)
             ORDER BY f.job_id
               FOR UPDATE) s;
    IF cardinality(v_ids) = 0 THEN
        RETURN;
    END IF;

    v_owners := {schema}.unique_take(v_keys, v_ids);

    RETURN QUERY
    WITH taken AS (
        DELETE FROM {schema}.failure_entries f
         WHERE f.job_id = ANY (ARRAY(SELECT o.id FROM unnest(v_ids, v_owners) AS o(id, owner)
                                      WHERE o.id = o.owner))
        RETURNING f.*
    ),
    ordered AS (SELECT * FROM taken ORDER BY job_id),
    appended AS (
        SELECT a.job_id FROM {schema}.ready_append(
            ARRAY(SELECT job_id FROM ordered),
            ARRAY(SELECT queue FROM ordered),
            ARRAY(SELECT priority FROM ordered),
            ARRAY(SELECT kind FROM ordered),
            ARRAY(SELECT args FROM ordered),
            ARRAY(SELECT 0 FROM ordered),
            ARRAY(SELECT max_attempts FROM ordered),
            ARRAY(SELECT run_lease FROM ordered),
            ARRAY(SELECT created_at FROM ordered),
            ARRAY(SELECT unique_key FROM ordered),
            ARRAY(SELECT metadata FROM ordered),
            ARRAY(SELECT attempts FROM ordered)) a
    )
    SELECT a.job_id, NULL::text, NULL::bigint FROM appended a
    UNION ALL
    SELECT o.id, o.key, o.owner
      FROM unnest(v_ids, v_keys, v_owners) AS o(id, key, owner)
     WHERE o.id <> o.owner;
END
$fn$;
$awa_template$)
ON CONFLICT (name) DO UPDATE SET ord = EXCLUDED.ord, body = EXCLUDED.body;
INSERT INTO awa.substrate_functions (name, ord, body) VALUES ('finish', 15, $awa_template$-- {schema}.finish(job_ids, run_leases, claim_slots, batch_ids, items,
--                 outcomes, delays, errors):
-- the guarded finish path. Every way an attempt ends goes through here:
-- the worker's complete/retry/snooze/cancel/fail, graceful-shutdown
-- release, and maintenance's rescue. Many attempts per call; each is named
-- by its token (job_id, run_lease, claim_slot, batch_id, item).
--
-- outcomes: complete | retry | snooze | cancel | fail | release | rescue
-- delays:   for retry/snooze, NULL means the default backoff
--           (2^attempt seconds, at most an hour, +-25% jitter).
--
-- The guard. An attempt is finished only if its batch item still names it
-- (job_ids[item] = job_id, run_leases[item] = run_lease), no closure link
-- of its batch lists the item, and this call inserts the next link of the
-- batch listing it. A call reads all links of each batch it touches and
-- inserts, per batch, ONE link numbered max(link) + 1 with every item it
-- closes there (ON CONFLICT DO NOTHING). Two finishers of one batch that
-- read the same links both try the same number; the primary key (slot,
-- batch_id, link) lets one insert it and the other gets nothing back
-- (under READ COMMITTED it waits for the winner's commit first; under
-- REPEATABLE READ or SERIALIZABLE the conflict with an invisible row is a
-- serialization failure, 40001). So whoever inserts link n saw links
-- 1..n-1: every item is listed by at most one link, whatever the
-- isolation level. A call whose link lost the race reports those items
-- `contended`, and finish runs them again in a new statement (a new
-- snapshot that sees the winner's link): they are then finished, or
-- rejected because the winner closed them. A stale lease, a second
-- completion, or a completion racing a rescue or a cancel thus gets
-- accepted = false and changes nothing.
--
-- Parked attempts (see exec_park) have their item closed by a 'parked'
-- link and a row in parked_attempts: for them the guard is the DELETE of
-- that row, whose row lock lets exactly one deleter win. exec_park writes
-- the link and the row in one transaction and only for items whose link it
-- inserted, so an attempt has exactly one open piece of evidence at a
-- time. Their terminal fact goes to the current queue slot with the body
-- copied in (their original slot may be gone).
--
-- Evidence written (the hot path is the first line):
--   completed (from a batch) -> one done_batches row per queue slot and
--                               queue touched, body left in its ready slot
--   completed from parked    -> one done_entries row each, body copied in
--   cancelled / failed       -> one failure_entries row each, body copied
--                               in, kept for failure_retention (ADR 11)
--   dead_lettered                   -> dlq_entries (queue opted in)
--   retryable / snoozed / available -> deferred_jobs, promoted when due
-- plus one count delta per (slot, queue, state). Retries past
-- max_attempts fail (or dead-letter); snooze and release do not count the
-- attempt. Every row but the completion's carries the job's attempt
-- records with this attempt's appended (attempt_push, ADR 11): those rows
-- copy the body anyway, and a completion from a batch writes nothing new.
--
-- Bounds (SQLSTATE 22023, before anything is read or written; the Rust
-- side clamps what handlers return to the same): arrays of one length, an
-- outcome from the list above, a delay NULL or 0 to 30 days
-- (awa_core::bounds::MAX_HANDLER_DELAY), an error NULL or at most 8 KiB
-- (MAX_ERROR_BYTES).
CREATE OR REPLACE FUNCTION {schema}.finish_pass(
    p_job_ids     bigint[],
    p_run_leases  bigint[],
    p_claim_slots integer[],
    p_batch_ids   bigint[],
    p_items       integer[],
    p_outcomes    text[],
    p_delays      interval[],
    p_errors      text[]
) RETURNS TABLE (job_id bigint, run_lease bigint, accepted boolean, next_state text, contended boolean)
LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan AS $fn$
#variable_conflict use_column
BEGIN
    IF array_length(p_run_leases, 1) IS DISTINCT FROM array_length(p_job_ids, 1)
       OR array_length(p_claim_slots, 1) IS DISTINCT FROM array_length(p_job_ids, 1)
       OR array_length(p_batch_ids, 1) IS DISTINCT FROM array_length(p_job_ids, 1)
       OR array_length(p_items, 1) IS DISTINCT FROM array_length(p_job_ids, 1)
       OR array_length(p_outcomes, 1) IS DISTINCT FROM array_length(p_job_ids, 1)
       OR array_length(p_delays, 1) IS DISTINCT FROM array_length(p_job_ids, 1)
       OR array_length(p_errors, 1) IS DISTINCT FROM array_length(p_job_ids, 1) THEN
        RAISE EXCEPTION 'finish arrays differ in length' USING ERRCODE = 'invalid_parameter_value',
              HINT = 'Send one element per attempt in every array.';
    END IF;
    IF EXISTS (SELECT 1 FROM unnest(p_outcomes) o
                WHERE o IS NULL OR o NOT IN ('complete', 'retry', 'snooze', 'cancel', 'fail', 'release', 'rescue')) THEN
        RAISE EXCEPTION 'unknown finish outcome in %', p_outcomes
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'Use complete, retry, snooze, cancel, fail, release or rescue.';
    END IF;
    IF EXISTS (SELECT 1 FROM unnest(p_delays, p_errors) AS x(delay, error)
                WHERE x.delay NOT BETWEEN interval '0' AND interval '30 days'
                   OR octet_length(x.error) > 8192) THEN
        RAISE EXCEPTION 'finish: a delay is outside 0 to 30 days, or an error is longer than 8192 bytes'
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'Clamp retry and snooze delays to 30 days and cut error text to 8 KiB (awa_core::bounds::handler_delay, error_text).';
    END IF;

    RETURN QUERY
    WITH input AS (
        -- A pair named twice in one call is finished once: the first wins.
        SELECT DISTINCT ON (i.job_id, i.run_lease) i.*
          FROM unnest(p_job_ids, p_run_leases, p_claim_slots, p_batch_ids, p_items,
                      p_outcomes, p_delays, p_errors)
               WITH ORDINALITY AS i(job_id, run_lease, claim_slot, batch_id, item, outcome, delay, error, ord)
         ORDER BY i.job_id, i.run_lease, i.ord
    ),
    batches AS MATERIALIZED (
        -- Each batch touched, with what its links have closed so far. The
        -- lookups are LATERAL so they stay index probes per batch whatever
        -- the planner thinks of the (unknown) batch count.
        SELECT b.slot, b.batch_id, b.queue, b.job_ids, b.run_leases, b.attempts,
               b.ready_slots, b.ready_seqs, b.priorities, b.shards, b.keyed, ch.last_link, ch.closed,
               b.claimed_at, b.instance_id
          FROM (SELECT DISTINCT i.claim_slot, i.batch_id FROM input i) k
         CROSS JOIN LATERAL (
                SELECT b.* FROM {schema}.claim_batches b
                 WHERE b.slot = k.claim_slot AND b.batch_id = k.batch_id) b
         CROSS JOIN LATERAL (
                SELECT coalesce(max(c.link), 0) AS last_link,
                       coalesce((SELECT array_agg(x) FROM {schema}.claim_closures c2, unnest(c2.items) x
                                  WHERE c2.slot = b.slot AND c2.batch_id = b.batch_id), '{}') AS closed
                  FROM {schema}.claim_closures c
                 WHERE c.slot = b.slot AND c.batch_id = b.batch_id) ch
    ),
    probe AS (
        -- Each input against its batch: open = the item still names this
        -- attempt and no link lists it.
        SELECT i.*, b.queue, b.attempts[i.item] AS attempt,
               b.ready_slots[i.item] AS hist_slot, b.ready_seqs[i.item] AS hist_seq,
               b.priorities[i.item] AS lane_priority, b.shards[i.item] AS lane_shard,
               coalesce(b.job_ids[i.item] = i.job_id AND b.run_leases[i.item] = i.run_lease
                        AND NOT (i.item = ANY (b.closed)), false) AS open,
               -- The body is read only when the outcome needs it: a retry
               -- or a failure copies it, a keyed job releases its key. A
               -- plain completion leaves it where it is, unread.
               (i.outcome <> 'complete' OR coalesce(i.item = ANY (b.keyed), false)) AS needs_body,
               b.claimed_at AS started_at, b.instance_id
          FROM input i
          LEFT JOIN batches b ON b.slot = i.claim_slot AND b.batch_id = i.batch_id
    ),
    live_batch AS (
        SELECT p.job_id, p.run_lease, p.claim_slot, p.batch_id, p.item, p.outcome, p.delay,
               p.error, p.ord, 'batch'::text AS src, p.queue, p.attempt, p.hist_slot, p.hist_seq,
               p.lane_priority, p.lane_shard, NULL::jsonb AS hist_body,
               e.kind, e.args, e.priority, e.max_attempts, e.created_at, e.unique_key, e.metadata,
               coalesce(m.dlq_enabled, false) AS dlq,
               p.started_at, p.instance_id, e.attempts AS history
          FROM probe p
          LEFT JOIN LATERAL (
                SELECT e.* FROM {schema}.ready_entries e
                 WHERE p.needs_body AND e.slot = p.hist_slot AND e.queue = p.queue
                   AND e.priority = p.lane_priority AND e.shard = p.lane_shard
                   AND e.lane_seq = p.hist_seq AND e.job_id = p.job_id
                 LIMIT 1) e ON true
          LEFT JOIN LATERAL (
                SELECT m.dlq_enabled FROM awa.queue_meta m
                 WHERE p.outcome <> 'complete' AND m.queue = p.queue) m ON true
         WHERE p.open
           -- A body that is needed is there (the slot is live while the
           -- item is open); without it the item is not finished.
           AND (NOT p.needs_body OR e.job_id IS NOT NULL)
    ),
    live_parked AS (
        -- Only an item closed in its batch can be parked: one index probe
        -- each on a small table, none on the hot path.
        SELECT i.job_id, i.run_lease, i.claim_slot, i.batch_id, i.item, i.outcome, i.delay,
               i.error, i.ord, 'parked'::text AS src, p.queue, p.attempt,
               (SELECT g.slot FROM {schema}.ring_ledger g
                 WHERE g.ring = 'queue' ORDER BY g.generation DESC LIMIT 1) AS hist_slot,
               NULL::bigint AS hist_seq, NULL::smallint AS lane_priority, NULL::smallint AS lane_shard,
               {schema}.job_body(p.kind, p.args, p.priority, p.max_attempts, p.created_at, p.metadata) AS hist_body,
               p.kind, p.args, p.priority, p.max_attempts, p.created_at, p.unique_key, p.metadata,
               coalesce(m.dlq_enabled, false) AS dlq,
               p.claimed_at, p.instance_id, p.attempts
          FROM probe i
          JOIN {schema}.parked_attempts p ON p.job_id = i.job_id AND p.run_lease = i.run_lease
          LEFT JOIN awa.queue_meta m ON m.queue = p.queue
         WHERE NOT i.open
    ),
    decided AS (
        SELECT l.*,
               CASE
                   WHEN l.outcome = 'complete' THEN 'completed'
                   WHEN l.outcome = 'cancel' THEN 'cancelled'
                   WHEN l.outcome = 'snooze' THEN 'snoozed'
                   WHEN l.outcome = 'release' THEN 'available'
                   WHEN l.outcome IN ('retry', 'rescue') AND l.attempt < l.max_attempts THEN 'retryable'
                   WHEN l.dlq THEN 'dead_lettered'
                   ELSE 'failed'
               END AS next_state
          FROM (SELECT * FROM live_batch UNION ALL SELECT * FROM live_parked) l
    ),
    coded AS (
        -- What the closure link records for each item.
        SELECT d.*,
               CASE d.outcome
                   WHEN 'rescue' THEN 'rescued'
                   WHEN 'release' THEN 'released'
                   WHEN 'retry' THEN CASE d.next_state WHEN 'retryable' THEN 'retried' ELSE d.next_state END
                   ELSE d.next_state
               END AS code
          FROM decided d
         WHERE d.src = 'batch'
    ),
    links AS (
        -- One link per batch, in (slot, batch_id) order so two calls that
        -- touch the same batches wait for each other in the same order.
        SELECT c.claim_slot, c.batch_id,
               min(b.last_link) + 1 AS link,
               array_agg(c.item ORDER BY c.item) AS items,
               CASE WHEN count(DISTINCT c.code) = 1 THEN min(c.code) ELSE 'mixed' END AS outcome,
               CASE WHEN count(DISTINCT c.code) = 1 THEN NULL
                    ELSE array_agg(c.code ORDER BY c.item) END AS outcomes,
               (min(cardinality(b.job_ids)) - min(cardinality(b.closed)) - count(*))::integer AS open_after
          FROM coded c
          JOIN batches b ON b.slot = c.claim_slot AND b.batch_id = c.batch_id
         GROUP BY c.claim_slot, c.batch_id
         ORDER BY c.claim_slot, c.batch_id
    ),
    closed AS (
        INSERT INTO {schema}.claim_closures AS c (slot, batch_id, link, items, outcome, outcomes, open_after)
        SELECT l.claim_slot, l.batch_id, l.link, l.items, l.outcome, l.outcomes, l.open_after
          FROM links l
        ON CONFLICT DO NOTHING
        RETURNING c.slot, c.batch_id
    ),
    unparked AS (
        DELETE FROM {schema}.parked_attempts p
         USING decided d
         WHERE d.src = 'parked' AND p.job_id = d.job_id AND p.run_lease = d.run_lease
        RETURNING p.job_id, p.run_lease
    ),
    won AS (
        SELECT d.*
          FROM decided d
          JOIN closed c ON c.slot = d.claim_slot AND c.batch_id = d.batch_id
         WHERE d.src = 'batch'
        UNION ALL
        SELECT d.*
          FROM decided d
          JOIN unparked u ON u.job_id = d.job_id AND u.run_lease = d.run_lease
         WHERE d.src = 'parked'
    ),
    done_batch AS (
        -- The hot path: one compact row per (queue slot, queue).
        INSERT INTO {schema}.done_batches
            (slot, queue, lo_job_id, hi_job_id, job_ids, run_leases, attempts, ready_seqs,
             priorities, shards)
        SELECT w.hist_slot, w.queue, min(w.job_id), max(w.job_id),
               array_agg(w.job_id ORDER BY w.job_id), array_agg(w.run_lease ORDER BY w.job_id),
               array_agg(w.attempt ORDER BY w.job_id), array_agg(w.hist_seq ORDER BY w.job_id),
               array_agg(w.lane_priority ORDER BY w.job_id), array_agg(w.lane_shard ORDER BY w.job_id)
          FROM won w
         WHERE w.src = 'batch' AND w.next_state = 'completed'
         GROUP BY w.hist_slot, w.queue
    ),
    history AS (
        -- A parked attempt's body may be in a slot that is gone: the fact
        -- carries it.
        INSERT INTO {schema}.done_entries
            (slot, job_id, run_lease, queue, state, attempt, body, last_error, attempts)
        SELECT w.hist_slot, w.job_id, w.run_lease, w.queue, w.next_state, w.attempt,
               w.hist_body, w.error,
               {schema}.attempt_push(w.history, w.attempt, w.outcome, w.next_state,
                                     w.started_at, w.instance_id, w.error)
          FROM won w
         WHERE w.next_state = 'completed' AND w.src = 'parked'
    ),
    failures AS (
        -- Failed and cancelled jobs leave the ring (ADR 11): kept for the
        -- substrate's failure_retention, readable and retryable meanwhile.
        -- A job is terminal once until it is retried, which deletes its
        -- row; should a row be there anyway, the newer fact replaces it.
        INSERT INTO {schema}.failure_entries AS f
            (job_id, run_lease, queue, state, attempt, priority, kind, args, max_attempts,
             created_at, unique_key, metadata, last_error, attempts)
        SELECT w.job_id, w.run_lease, w.queue, w.next_state, w.attempt, w.priority, w.kind,
               w.args, w.max_attempts, w.created_at, w.unique_key, w.metadata, w.error,
               {schema}.attempt_push(w.history, w.attempt, w.outcome, w.next_state,
                                     w.started_at, w.instance_id, w.error)
          FROM won w
         WHERE w.next_state IN ('cancelled', 'failed')
        ON CONFLICT (job_id) DO UPDATE
           SET run_lease = EXCLUDED.run_lease, queue = EXCLUDED.queue, state = EXCLUDED.state,
               attempt = EXCLUDED.attempt, priority = EXCLUDED.priority, kind = EXCLUDED.kind,
               args = EXCLUDED.args, max_attempts = EXCLUDED.max_attempts,
               created_at = EXCLUDED.created_at, finalized_at = EXCLUDED.finalized_at,
               unique_key = EXCLUDED.unique_key, metadata = EXCLUDED.metadata,
               last_error = EXCLUDED.last_error, attempts = EXCLUDED.attempts
    ),
    deferred AS (
        INSERT INTO {schema}.deferred_jobs
            (job_id, queue, priority, kind, args, attempt, max_attempts, run_lease, run_at,
             reason, created_at, unique_key, metadata, last_error, attempts)
        SELECT w.job_id, w.queue, w.priority, w.kind, w.args,
               CASE WHEN w.next_state = 'retryable' THEN w.attempt ELSE w.attempt - 1 END,
               w.max_attempts, w.run_lease,
               CASE WHEN w.next_state = 'available' THEN now()
                    ELSE now() + coalesce(w.delay,
                        make_interval(secs => least(power(2, w.attempt), 3600) * (0.75 + random() * 0.5)))
               END,
               CASE w.next_state WHEN 'retryable' THEN 'retry' WHEN 'snoozed' THEN 'snoozed' ELSE 'released' END,
               w.created_at, w.unique_key, w.metadata, w.error,
               {schema}.attempt_push(w.history, w.attempt, w.outcome, w.next_state,
                                     w.started_at, w.instance_id, w.error)
          FROM won w
         WHERE w.next_state IN ('retryable', 'snoozed', 'available')
    ),
    dead AS (
        INSERT INTO {schema}.dlq_entries
            (job_id, queue, priority, kind, args, attempt, max_attempts, run_lease,
             created_at, last_error, metadata, unique_key, attempts)
        SELECT w.job_id, w.queue, w.priority, w.kind, w.args, w.attempt, w.max_attempts,
               w.run_lease, w.created_at, w.error, w.metadata, w.unique_key,
               {schema}.attempt_push(w.history, w.attempt, w.outcome, w.next_state,
                                     w.started_at, w.instance_id, w.error)
          FROM won w
         WHERE w.next_state = 'dead_lettered'
    ),
    counted AS (
        INSERT INTO {schema}.count_deltas (slot, queue, state, delta)
        SELECT w.hist_slot, w.queue, w.next_state, count(*)
          FROM won w
         WHERE w.next_state IN ('completed', 'cancelled', 'failed', 'dead_lettered')
         GROUP BY w.hist_slot, w.queue, w.next_state
    ),
    -- Key lookups through = ANY(array): index probes, no join to plan.
    -- A key row is released, unless its key spec keeps holding it in the
    -- job's final state until the period ends (unique_held; only rows
    -- with a hold_until ask): then it is marked finished instead.
    unique_released AS (
        DELETE FROM awa.job_uniques u
         WHERE u.unique_key = ANY (ARRAY(
                   SELECT w.unique_key FROM won w
                    WHERE w.unique_key IS NOT NULL
                      AND w.next_state IN ('completed', 'cancelled', 'failed', 'dead_lettered')))
           AND u.job_id = ANY (ARRAY(SELECT w.job_id FROM won w))
           AND (u.hold_until IS NULL
                OR NOT {schema}.unique_held(u.hold_until, u.hold_states,
                       (SELECT w.next_state FROM won w WHERE w.job_id = u.job_id LIMIT 1)))
    ),
    unique_kept AS (
        UPDATE awa.job_uniques u SET finished_at = now()
         WHERE u.unique_key = ANY (ARRAY(
                   SELECT w.unique_key FROM won w
                    WHERE w.unique_key IS NOT NULL
                      AND w.next_state IN ('completed', 'cancelled', 'failed', 'dead_lettered')))
           AND u.job_id = ANY (ARRAY(SELECT w.job_id FROM won w))
           AND u.hold_until IS NOT NULL
           AND {schema}.unique_held(u.hold_until, u.hold_states,
               (SELECT w.next_state FROM won w WHERE w.job_id = u.job_id LIMIT 1))
    ),
    state_dropped AS (
        DELETE FROM {schema}.attempt_state s
         WHERE s.job_id = ANY (ARRAY(
                   SELECT w.job_id FROM won w
                    WHERE w.next_state IN ('completed', 'cancelled', 'failed', 'dead_lettered')))
    )
    SELECT r.job_id, r.run_lease, w.job_id IS NOT NULL, w.next_state,
           -- Live in its batch, but another finisher took this link number.
           (w.job_id IS NULL AND EXISTS (SELECT 1 FROM coded c WHERE c.ord = r.ord))
      FROM unnest(p_job_ids, p_run_leases) WITH ORDINALITY AS r(job_id, run_lease, ord)
      LEFT JOIN won w ON w.ord = r.ord
     ORDER BY r.ord;
END
$fn$;

-- finish: finish_pass, then again for what lost a link race, each time in a
-- new statement (a new snapshot). Every round that finds contention means
-- another finisher committed a link of the same batch, so the rounds are
-- bounded by the finishers racing for it; after 8 the call gives up with a
-- serialization failure (40001), which the completer retries.
CREATE OR REPLACE FUNCTION {schema}.finish(
    p_job_ids     bigint[],
    p_run_leases  bigint[],
    p_claim_slots integer[],
    p_batch_ids   bigint[],
    p_items       integer[],
    p_outcomes    text[],
    p_delays      interval[],
    p_errors      text[]
) RETURNS TABLE (job_id bigint, run_lease bigint, accepted boolean, next_state text)
LANGUAGE plpgsql AS $fn$
#variable_conflict use_column
DECLARE
    v_accepted  boolean[];
    v_next      text[];
    v_contended boolean[];
    v_acc       boolean[];
    v_nx        text[];
    v_todo      integer[];   -- indexes into the inputs still to decide
    v_again     integer[];
    v_round     integer := 1;
    k integer;
BEGIN
    SELECT array_agg(f.accepted ORDER BY f.ord), array_agg(f.next_state ORDER BY f.ord),
           array_agg(f.contended ORDER BY f.ord)
      INTO v_accepted, v_next, v_contended
      FROM {schema}.finish_pass(p_job_ids, p_run_leases, p_claim_slots, p_batch_ids, p_items,
                                p_outcomes, p_delays, p_errors)
           WITH ORDINALITY AS f(job_id, run_lease, accepted, next_state, contended, ord);

    -- The hot path ends here: nobody raced us for a link.
    v_todo := ARRAY(SELECT x.i FROM generate_subscripts(v_contended, 1) AS x(i)
                     WHERE v_contended[x.i] ORDER BY x.i);
    WHILE cardinality(v_todo) > 0 LOOP
        v_round := v_round + 1;
        IF v_round > 8 THEN
            RAISE EXCEPTION 'finish lost the race for a claim batch link % times in a row', v_round - 1
                USING ERRCODE = 'serialization_failure',
                      HINT = 'Other finishers keep closing items of the same batches; retry the call.';
        END IF;
        SELECT array_agg(f.accepted ORDER BY f.ord), array_agg(f.next_state ORDER BY f.ord),
               array_agg(f.contended ORDER BY f.ord)
          INTO v_acc, v_nx, v_contended
          FROM {schema}.finish_pass(
                   ARRAY(SELECT p_job_ids[x.i] FROM unnest(v_todo) WITH ORDINALITY AS x(i, o) ORDER BY x.o),
                   ARRAY(SELECT p_run_leases[x.i] FROM unnest(v_todo) WITH ORDINALITY AS x(i, o) ORDER BY x.o),
                   ARRAY(SELECT p_claim_slots[x.i] FROM unnest(v_todo) WITH ORDINALITY AS x(i, o) ORDER BY x.o),
                   ARRAY(SELECT p_batch_ids[x.i] FROM unnest(v_todo) WITH ORDINALITY AS x(i, o) ORDER BY x.o),
                   ARRAY(SELECT p_items[x.i] FROM unnest(v_todo) WITH ORDINALITY AS x(i, o) ORDER BY x.o),
                   ARRAY(SELECT p_outcomes[x.i] FROM unnest(v_todo) WITH ORDINALITY AS x(i, o) ORDER BY x.o),
                   ARRAY(SELECT p_delays[x.i] FROM unnest(v_todo) WITH ORDINALITY AS x(i, o) ORDER BY x.o),
                   ARRAY(SELECT p_errors[x.i] FROM unnest(v_todo) WITH ORDINALITY AS x(i, o) ORDER BY x.o))
               WITH ORDINALITY AS f(job_id, run_lease, accepted, next_state, contended, ord);
        v_again := '{}';
        FOR k IN 1 .. cardinality(v_todo) LOOP
            v_accepted[v_todo[k]] := v_acc[k];
            v_next[v_todo[k]] := v_nx[k];
            IF v_contended[k] THEN
                v_again := v_again || v_todo[k];
            END IF;
        END LOOP;
        v_todo := v_again;
    END LOOP;

    RETURN QUERY
    SELECT p_job_ids[x.i], p_run_leases[x.i], v_accepted[x.i], v_next[x.i]
      FROM generate_subscripts(p_job_ids, 1) AS x(i)
     ORDER BY x.i;
END
$fn$;
$awa_template$)
ON CONFLICT (name) DO UPDATE SET ord = EXCLUDED.ord, body = EXCLUDED.body;
INSERT INTO awa.substrate_functions (name, ord, body) VALUES ('heartbeat', 16, $awa_template$-- {schema}.heartbeat(job_id, run_lease, claim_slot, batch_id, item,
--                    percent, message, checkpoint):
-- record that a long attempt is alive, materializing its own lease on
-- first use in the current lease-ring slot (the batch row stays as it
-- was); with progress, also upsert attempt_state (kept across retries).
-- Short jobs never call this.
--
-- A parked attempt (moved out of the rings by exec_park) heartbeats on its
-- parked_attempts row instead.
--
-- Returns false, and writes nothing, when the attempt is no longer live
-- (finished, rescued, cancelled): the handler should stop.
--
-- Bounds (SQLSTATE 22023, before anything is written): percent NULL or 0
-- to 100; message NULL or at most 8 KiB (awa_core::bounds::MAX_ERROR_BYTES,
-- as the Rust side cuts it).
CREATE OR REPLACE FUNCTION {schema}.heartbeat(
    p_job_id bigint, p_run_lease bigint, p_claim_slot integer, p_batch_id bigint, p_item integer,
    p_percent smallint, p_message text, p_checkpoint jsonb
) RETURNS boolean LANGUAGE plpgsql AS $fn$
#variable_conflict use_column
DECLARE
    v_lease_slot integer;
BEGIN
    IF p_percent NOT BETWEEN 0 AND 100 OR octet_length(p_message) > 8192 THEN
        RAISE EXCEPTION 'heartbeat: progress percent must be 0 to 100 (got %) and its message at most 8192 bytes (got %)',
                        p_percent, octet_length(p_message)
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'Report progress as a whole percentage and a short message.';
    END IF;
    IF EXISTS (SELECT 1 FROM {schema}.claim_batches b
                WHERE b.slot = p_claim_slot AND b.batch_id = p_batch_id
                  AND b.job_ids[p_item] = p_job_id AND b.run_leases[p_item] = p_run_lease)
       AND NOT EXISTS (SELECT 1 FROM {schema}.claim_closures c
                        WHERE c.slot = p_claim_slot AND c.batch_id = p_batch_id AND p_item = ANY (c.items)) THEN
        -- An existing lease stays in its slot; a new one goes to the current slot.
        UPDATE {schema}.leases l SET heartbeat_at = now()
         WHERE l.job_id = p_job_id AND l.run_lease = p_run_lease;
        IF NOT FOUND THEN
            SELECT g.slot INTO v_lease_slot FROM {schema}.ring_ledger g
             WHERE g.ring = 'lease' ORDER BY g.generation DESC LIMIT 1;
            INSERT INTO {schema}.leases (slot, job_id, run_lease, claim_slot, batch_id, item)
            VALUES (v_lease_slot, p_job_id, p_run_lease, p_claim_slot, p_batch_id, p_item);
        END IF;
    ELSE
        -- Closed or gone: maybe parked (exec_park). This is a later
        -- statement than the check above, so it sees a park that closed
        -- the item before that check ran.
        UPDATE {schema}.parked_attempts p SET heartbeat_at = now()
         WHERE p.job_id = p_job_id AND p.run_lease = p_run_lease;
        IF NOT FOUND THEN
            RETURN false;
        END IF;
    END IF;

    IF p_percent IS NOT NULL OR p_message IS NOT NULL OR p_checkpoint IS NOT NULL THEN
        INSERT INTO {schema}.attempt_state AS s (job_id, run_lease, percent, message, checkpoint)
        VALUES (p_job_id, p_run_lease, p_percent, p_message, p_checkpoint)
        ON CONFLICT (job_id) DO UPDATE
           SET run_lease  = EXCLUDED.run_lease,
               percent    = coalesce(EXCLUDED.percent, s.percent),
               message    = coalesce(EXCLUDED.message, s.message),
               checkpoint = coalesce(EXCLUDED.checkpoint, s.checkpoint),
               updated_at = now();
    END IF;
    RETURN true;
END
$fn$;
$awa_template$)
ON CONFLICT (name) DO UPDATE SET ord = EXCLUDED.ord, body = EXCLUDED.body;
INSERT INTO awa.substrate_functions (name, ord, body) VALUES ('history_retire_slot', 27, $awa_template$-- {schema}.history_retire_slot(slot): move queue-ring slot `slot`'s count
-- deltas into the rollups, in the transaction that retires the slot. The
-- delete is MVCC: snapshots older than the retirement still count the
-- deltas (and not the new rollup values), newer ones count the rollups; the
-- later TRUNCATE of the slot changes nothing any snapshot can still see.
--
-- It also moves history_horizon past the slot's newest job id, so a lookup
-- of a job that is no longer anywhere can say its history was pruned, and
-- when, instead of "no such job". A slot that is not one of the queue
-- ring's is refused (22023).
CREATE OR REPLACE FUNCTION {schema}.history_retire_slot(p_slot integer)
RETURNS void LANGUAGE plpgsql AS $fn$
#variable_conflict use_column
BEGIN
    -- A slot of this ring (ring_slot_count refuses an unknown ring).
    IF p_slot IS NULL OR p_slot NOT BETWEEN 0 AND {schema}.ring_slot_count('queue') - 1 THEN
        RAISE EXCEPTION 'slot % is not a slot of the % ring', coalesce(p_slot::text, 'NULL'), 'queue'
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'Slots are numbered from 0 to the ring''s slot count - 1 (substrate_info).';
    END IF;
    WITH moved AS (
        DELETE FROM {schema}.count_deltas d WHERE d.slot = p_slot
        RETURNING d.queue, d.state, d.delta
    )
    INSERT INTO {schema}.count_rollups AS r (queue, state, total)
    SELECT m.queue, m.state, sum(m.delta) FROM moved m GROUP BY m.queue, m.state
    ON CONFLICT (queue, state) DO UPDATE
       SET total = r.total + EXCLUDED.total, updated_at = now();
    INSERT INTO {schema}.history_horizon AS h (singleton, pruned_through_job_id, pruned_at)
    SELECT true, max(x.job_id), now()
      FROM (SELECT max(d.job_id) AS job_id FROM {schema}.done_entries d WHERE d.slot = p_slot
            UNION ALL
            SELECT max(b.hi_job_id) FROM {schema}.done_batches b WHERE b.slot = p_slot) x
    HAVING max(x.job_id) IS NOT NULL
    ON CONFLICT (singleton) DO UPDATE
       SET pruned_through_job_id = greatest(h.pruned_through_job_id, EXCLUDED.pruned_through_job_id),
           pruned_at = now();
END
$fn$;
$awa_template$)
ON CONFLICT (name) DO UPDATE SET ord = EXCLUDED.ord, body = EXCLUDED.body;
INSERT INTO awa.substrate_functions (name, ord, body) VALUES ('job_body', 25, $awa_template$-- {schema}.job_body(kind, args, priority, max_attempts, created_at, metadata):
-- a job's body as a done_entries row carries it, the one place its keys are
-- chosen (terminal_jobs reads them back). A plain SQL expression, so it is
-- inlined where it is used.
CREATE OR REPLACE FUNCTION {schema}.job_body(
    p_kind text, p_args jsonb, p_priority smallint, p_max_attempts integer,
    p_created_at timestamptz, p_metadata jsonb
) RETURNS jsonb LANGUAGE sql IMMUTABLE AS $fn$
    SELECT jsonb_build_object('kind', p_kind, 'args', p_args, 'priority', p_priority,
                              'max_attempts', p_max_attempts, 'created_at', p_created_at,
                              'metadata', p_metadata)
$fn$;
$awa_template$)
ON CONFLICT (name) DO UPDATE SET ord = EXCLUDED.ord, body = EXCLUDED.body;
INSERT INTO awa.substrate_functions (name, ord, body) VALUES ('jobs', 22, $awa_template$-- {schema}.live_jobs / {schema}.jobs: every non-terminal job (live_jobs)
-- or every job (jobs) the substrate knows, with the state the planes
-- together give it. live_jobs never reads history, so its cost is bounded
-- by live work, not by retained history. For operators and tests; the hot path never reads it.
--   available      ready entry past its lane head, not tombstoned
--   running        an open item of a claim batch (no closure link lists
--                  it), or a parked attempt, whose worker does not list it
--                  in worker_buffers (its handler has started)
--   buffered       the same, listed in its worker's worker_buffers row:
--                  claimed, waiting in the worker's local buffer, not
--                  started (the worker rewrites that row at most once a
--                  second, so the split is true to about a second)
--   scheduled / retryable / snoozed   deferred row (released: available)
--   completed / failed / cancelled    terminal_jobs
--   dead_lettered  dlq entry
-- attempts: the records of the job's ended attempts (ADR 11; a running
-- attempt is not among them). holder: the runtime (awa.runtimes
-- instance id) that claimed a running job; NULL in every other state.
-- Columns a query does not name are not computed (each branch is a
-- subquery whose unused outputs the planner drops).
-- Live rows are never hidden: a retired slot holds none unless a late
-- writer committed one there, and then it must show (and the slot is
-- un-retired by the next prune). Only terminal_jobs leaves retired slots out.
CREATE OR REPLACE VIEW {schema}.live_jobs AS
SELECT e.job_id AS id, e.queue, e.kind, e.args, e.priority, 'available'::text AS state,
       e.attempt, e.max_attempts, e.run_lease, e.created_at, e.ready_at AS at,
       NULL::text AS last_error, e.metadata, e.attempts, NULL::uuid AS holder
  FROM {schema}.ready_entries e
  JOIN {schema}.lane_heads h ON h.queue = e.queue AND h.priority = e.priority AND h.shard = e.shard
 WHERE e.lane_seq > h.head_seq
   AND NOT EXISTS (SELECT 1 FROM {schema}.ready_tombstones t
                    WHERE t.slot = e.slot AND t.job_id = e.job_id AND t.lane_seq = e.lane_seq)
UNION ALL
SELECT u.job_id, b.queue, e.kind, e.args, e.priority,
       CASE WHEN EXISTS (SELECT 1 FROM {schema}.worker_buffers w
                          WHERE w.instance_id = b.instance_id AND u.job_id = ANY (w.job_ids))
            THEN 'buffered' ELSE 'running' END,
       u.attempt, e.max_attempts,
       u.run_lease, e.created_at, b.claimed_at, NULL, e.metadata, e.attempts, b.instance_id
  FROM {schema}.claim_batches b
 CROSS JOIN LATERAL unnest(b.job_ids, b.run_leases, b.attempts, b.ready_slots, b.ready_seqs,
                           b.priorities, b.shards)
       WITH ORDINALITY AS u(job_id, run_lease, attempt, ready_slot, ready_seq, priority, shard, item)
  -- LATERAL + LIMIT: one index probe per item, whatever filters a caller adds.
 CROSS JOIN LATERAL (
        SELECT e.* FROM {schema}.ready_entries e
         WHERE e.slot = u.ready_slot AND e.queue = b.queue AND e.priority = u.priority
           AND e.shard = u.shard AND e.lane_seq = u.ready_seq AND e.job_id = u.job_id
         LIMIT 1) e
 -- A batch whose last link closed it is skipped with one probe.
 WHERE NOT EXISTS (SELECT 1 FROM {schema}.claim_closures c
                    WHERE c.slot = b.slot AND c.batch_id = b.batch_id AND c.open_after = 0)
   AND NOT EXISTS (SELECT 1 FROM {schema}.claim_closures c
                    WHERE c.slot = b.slot AND c.batch_id = b.batch_id AND u.item = ANY (c.items))
UNION ALL
SELECT p.job_id, p.queue, p.kind, p.args, p.priority,
       CASE WHEN EXISTS (SELECT 1 FROM {schema}.worker_buffers w
                          WHERE w.instance_id = p.instance_id AND p.job_id = ANY (w.job_ids))
            THEN 'buffered' ELSE 'running' END,
       p.attempt, p.max_attempts,
       p.run_lease, p.created_at, p.claimed_at, NULL, p.metadata, p.attempts, p.instance_id
  FROM {schema}.parked_attempts p
UNION ALL
SELECT d.job_id, d.queue, d.kind, d.args, d.priority,
       CASE d.reason WHEN 'retry' THEN 'retryable' WHEN 'released' THEN 'available' ELSE d.reason END,
       d.attempt, d.max_attempts, d.run_lease, d.created_at, d.run_at, d.last_error, d.metadata,
       d.attempts, NULL
  FROM {schema}.deferred_jobs d;

-- {schema}.jobs: live_jobs plus terminal history and dead letters.
CREATE OR REPLACE VIEW {schema}.jobs AS
SELECT * FROM {schema}.live_jobs
UNION ALL
SELECT t.id, t.queue, t.kind, t.args, t.priority, t.state, t.attempt, t.max_attempts,
       t.run_lease, t.created_at, t.finalized_at, t.last_error, t.metadata, t.attempts, NULL
  FROM {schema}.terminal_jobs t
UNION ALL
SELECT q.job_id, q.queue, q.kind, q.args, q.priority, 'dead_lettered', q.attempt, q.max_attempts,
       q.run_lease, q.created_at, q.dead_at, q.last_error, q.metadata, q.attempts, NULL
  FROM {schema}.dlq_entries q;
$awa_template$)
ON CONFLICT (name) DO UPDATE SET ord = EXCLUDED.ord, body = EXCLUDED.body;
INSERT INTO awa.substrate_functions (name, ord, body) VALUES ('ready_append', 0, $awa_template$-- {schema}.ready_append(...): append runnable jobs to the current queue-ring
-- slot. Used by enqueue, promotion and release; nothing else inserts into
-- ready_entries.
--
-- Parameters are parallel arrays, one element per job, in lane order;
-- p_histories (the jobs' attempt records, ADR 11) may be left out: new
-- jobs have none. Returns each job's id, slot and lane position. Refused
-- with SQLSTATE 22023 before anything is written (the runtime role may
-- call this directly): arrays of different lengths, a NULL id, queue, kind
-- or args, a priority outside 1..4 (awa_core::bounds::PRIORITY), max
-- attempts outside 1..1000 (MAX_ATTEMPTS), a negative attempt or run lease.
--
-- Ordering rule that must not be broken: the transaction id is assigned,
-- and the per-queue producer lock taken, BEFORE any lane position is drawn
-- from ready_seq. The claim frontier
-- (see ready_take) proves a position settled by waiting for every
-- transaction that was running when it read ready_seq; a writer that drew
-- a position before it had an xid would be invisible to that proof.
--
-- Lane heads are created here on first use; ON CONFLICT DO NOTHING finds
-- an existing lane in the index and writes nothing. Creating a lane is the
-- one moment two producers of the same lane wait for each other: the
-- second waits for the first one's transaction to end.
CREATE OR REPLACE FUNCTION {schema}.ready_append(
    p_job_ids      bigint[],
    p_queues       text[],
    p_priorities   smallint[],
    p_kinds        text[],
    p_args         jsonb[],
    p_attempts     integer[],
    p_max_attempts integer[],
    p_run_leases   bigint[],
    p_created_at   timestamptz[],
    p_unique_keys  text[],
    p_metadata     jsonb[],
    p_histories    jsonb[] DEFAULT NULL
) RETURNS TABLE (job_id bigint, slot integer, lane_seq bigint)
LANGUAGE plpgsql AS $fn$
#variable_conflict use_column
DECLARE
    v_slot integer;
    v_n    integer := coalesce(array_length(p_job_ids, 1), 0);
BEGIN
    IF array_length(p_queues, 1) IS DISTINCT FROM array_length(p_job_ids, 1)
       OR array_length(p_priorities, 1) IS DISTINCT FROM array_length(p_job_ids, 1)
       OR array_length(p_kinds, 1) IS DISTINCT FROM array_length(p_job_ids, 1)
       OR array_length(p_args, 1) IS DISTINCT FROM array_length(p_job_ids, 1)
       OR array_length(p_attempts, 1) IS DISTINCT FROM array_length(p_job_ids, 1)
       OR array_length(p_max_attempts, 1) IS DISTINCT FROM array_length(p_job_ids, 1)
       OR array_length(p_run_leases, 1) IS DISTINCT FROM array_length(p_job_ids, 1)
       OR array_length(p_created_at, 1) IS DISTINCT FROM array_length(p_job_ids, 1)
       OR array_length(p_unique_keys, 1) IS DISTINCT FROM array_length(p_job_ids, 1)
       OR array_length(p_metadata, 1) IS DISTINCT FROM array_length(p_job_ids, 1)
       OR (p_histories IS NOT NULL
           AND array_length(p_histories, 1) IS DISTINCT FROM array_length(p_job_ids, 1)) THEN
        RAISE EXCEPTION 'ready_append arrays differ in length' USING ERRCODE = 'invalid_parameter_value',
              HINT = 'Send one element per job in every array.';
    END IF;
    IF v_n = 0 THEN
        RETURN;
    END IF;
    IF EXISTS (SELECT 1
                 FROM unnest(p_job_ids, p_queues, p_priorities, p_kinds, p_args, p_attempts,
                             p_max_attempts, p_run_leases)
                      AS i(id, q, p, k, a, att, m, rl)
                WHERE i.id IS NULL OR i.q IS NULL OR i.k IS NULL OR i.a IS NULL
                   OR i.p IS NULL OR i.p NOT BETWEEN 1 AND 4
                   OR i.m IS NULL OR i.m NOT BETWEEN 1 AND 1000
                   OR i.att IS NULL OR i.att < 0
                   OR i.rl IS NULL OR i.rl < 0) THEN
        RAISE EXCEPTION 'ready_append: a job has no id, queue, kind or args, or a priority, max attempts, attempt or run lease out of range'
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'Priority is 1 to 4, max attempts 1 to 1000, attempt and run lease at least 0. Producers call enqueue, which checks its input.';
    END IF;
    PERFORM pg_current_xact_id();
    -- Announce "this transaction may hold lane positions of these queues"
    -- until it ends (shared: producers never wait for each other). Lets
    -- ready_take tell a producer from any other long transaction.
    PERFORM pg_advisory_xact_lock_shared(6387554, hashtext(q))
       FROM (SELECT DISTINCT unnest(p_queues) AS q) s;

    SELECT l.slot INTO v_slot
      FROM {schema}.ring_ledger l
     WHERE l.ring = 'queue'
     ORDER BY l.generation DESC
     LIMIT 1;

    INSERT INTO {schema}.lane_heads (queue, priority, shard)
    SELECT DISTINCT i.queue, i.priority, (i.job_id % coalesce(m.shard_count, 1))::smallint
      FROM unnest(p_queues, p_priorities, p_job_ids) AS i(queue, priority, job_id)
      LEFT JOIN awa.queue_meta m ON m.queue = i.queue
    ON CONFLICT DO NOTHING;

    -- unnest preserves array order, so lane positions follow it.
    RETURN QUERY
    INSERT INTO {schema}.ready_entries AS r
        (slot, queue, priority, shard, lane_seq, job_id, kind, args, attempt,
         max_attempts, run_lease, created_at, ready_at, unique_key, metadata, attempts)
    SELECT v_slot, i.queue, i.priority,
           (i.job_id % coalesce(m.shard_count, 1))::smallint,
           nextval('{schema}.ready_seq'),
           i.job_id, i.kind, i.args, i.attempt, i.max_attempts, i.run_lease,
           i.created_at, clock_timestamp(), i.unique_key, i.metadata, i.history
      -- A multi-argument unnest pads a shorter (or NULL) array with NULLs.
      FROM unnest(p_job_ids, p_queues, p_priorities, p_kinds, p_args, p_attempts,
                  p_max_attempts, p_run_leases, p_created_at, p_unique_keys, p_metadata,
                  p_histories)
           WITH ORDINALITY
           AS i(job_id, queue, priority, kind, args, attempt, max_attempts, run_lease,
                created_at, unique_key, metadata, history, ord)
      LEFT JOIN awa.queue_meta m ON m.queue = i.queue
     ORDER BY i.ord
    RETURNING r.job_id, r.slot, r.lane_seq;

    -- One notification per queue per transaction: PostgreSQL folds
    -- identical notifications of a transaction into one, so a batch or a
    -- transaction of many enqueues wakes workers once.
    PERFORM pg_notify('awa_ready', q) FROM (SELECT DISTINCT unnest(p_queues) AS q) s;
END
$fn$;
$awa_template$)
ON CONFLICT (name) DO UPDATE SET ord = EXCLUDED.ord, body = EXCLUDED.body;
INSERT INTO awa.substrate_functions (name, ord, body) VALUES ('ready_relocate', 10, $awa_template$-- {schema}.ready_relocate(slot, limit): move up to `limit` jobs still
-- waiting in queue-ring slot `slot` to the current slot, keeping each one's
-- lane and lane position. Called by ring_prune for the slot the ring must
-- rotate onto next, so one unclaimed job (an unserved or paused queue)
-- never stops reclamation of the ring for every queue.
--
-- The move, per job, in this one transaction: insert a copy of the entry
-- (same lane, same lane_seq, same ready_at) into the current slot, and a
-- tombstone for the old copy. Every snapshot therefore sees exactly one
-- live copy: the old one before this commits, the new one after.
--
-- Rules that must not be broken:
-- * The lanes are locked FOR UPDATE (SKIP LOCKED: a lane being claimed or
--   cancelled right now is left for the next pass) in one statement, and
--   the entries are read in a LATER statement. Claim (ready_take) and
--   cancel (ready_tombstone) hold the same lane lock while they move the
--   head or add a tombstone, so the later statement's snapshot sees all of
--   their effects: a job claimed or cancelled meanwhile is not copied (a
--   copy of a cancelled job would bring it back).
-- * That needs a new snapshot per statement, i.e. READ COMMITTED; under
--   snapshot isolation nothing is moved (returns 0 and the slot stays
--   live, so the ring waits rather than risk it).
-- * FIFO: lane_seq is kept, and ready_take orders a lane by lane_seq over
--   all slots, so the job keeps its place before every later job of its
--   lane. It draws no new position, so the frontier rule (ready_append)
--   does not apply: the position was settled when the job was first
--   committed. A claimer racing the move skips the locked lane.
--
-- Returns how many jobs were moved. A slot that is not the queue ring's,
-- or a limit outside 1..10000 (awa_core::bounds::MAINT_LIMIT), is refused
-- (SQLSTATE 22023).
CREATE OR REPLACE FUNCTION {schema}.ready_relocate(p_slot integer, p_limit integer)
RETURNS integer LANGUAGE plpgsql AS $fn$
#variable_conflict use_column
DECLARE
    v_cur     integer;
    v_queues  text[];
    v_prios   smallint[];
    v_shards  smallint[];
    v_moved   integer;
BEGIN
    -- A slot of this ring (ring_slot_count refuses an unknown ring).
    IF p_slot IS NULL OR p_slot NOT BETWEEN 0 AND {schema}.ring_slot_count('queue') - 1 THEN
        RAISE EXCEPTION 'slot % is not a slot of the % ring', coalesce(p_slot::text, 'NULL'), 'queue'
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'Slots are numbered from 0 to the ring''s slot count - 1 (substrate_info).';
    END IF;
    IF p_limit IS NULL OR p_limit NOT BETWEEN 1 AND 10000 THEN
        RAISE EXCEPTION 'ready_relocate: limit must be 1 to 10000 (got %)', coalesce(p_limit::text, 'NULL')
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'Rows one maintenance call moves (awa_core::bounds::MAINT_LIMIT); prune moves 1000 at a time.';
    END IF;
    IF current_setting('transaction_isolation') <> 'read committed' THEN
        RETURN 0;
    END IF;
    SELECT l.slot INTO v_cur FROM {schema}.ring_ledger l
     WHERE l.ring = 'queue' ORDER BY l.generation DESC LIMIT 1;
    IF v_cur = p_slot THEN
        RETURN 0;
    END IF;

    -- Statement 1: lock the lanes that still wait on this slot.
    SELECT array_agg(h.queue), array_agg(h.priority), array_agg(h.shard)
      INTO v_queues, v_prios, v_shards
      FROM (SELECT h.queue, h.priority, h.shard
              FROM {schema}.lane_heads h
             WHERE EXISTS (SELECT 1 FROM {schema}.ready_entries e
                            WHERE e.slot = p_slot AND e.queue = h.queue AND e.priority = h.priority
                              AND e.shard = h.shard AND e.lane_seq > h.head_seq)
               FOR UPDATE SKIP LOCKED) h;
    IF v_queues IS NULL THEN
        RETURN 0;
    END IF;

    -- Statement 2: a new snapshot, taken after the locks were granted.
    WITH lanes AS (
        SELECT l.queue, l.priority, l.shard, h.head_seq
          FROM unnest(v_queues, v_prios, v_shards) AS l(queue, priority, shard)
          JOIN {schema}.lane_heads h ON h.queue = l.queue AND h.priority = l.priority AND h.shard = l.shard
    ),
    moving AS (
        SELECT e.*
          FROM lanes l
          JOIN {schema}.ready_entries e
            ON e.slot = p_slot AND e.queue = l.queue AND e.priority = l.priority AND e.shard = l.shard
         WHERE e.lane_seq > l.head_seq
           AND NOT EXISTS (SELECT 1 FROM {schema}.ready_tombstones t
                            WHERE t.slot = e.slot AND t.job_id = e.job_id AND t.lane_seq = e.lane_seq)
         ORDER BY e.lane_seq
         LIMIT p_limit
    ),
    copied AS (
        INSERT INTO {schema}.ready_entries
            (slot, queue, priority, shard, lane_seq, job_id, kind, args, attempt,
             max_attempts, run_lease, created_at, ready_at, unique_key, metadata, attempts)
        SELECT v_cur, m.queue, m.priority, m.shard, m.lane_seq, m.job_id, m.kind, m.args, m.attempt,
               m.max_attempts, m.run_lease, m.created_at, m.ready_at, m.unique_key, m.metadata,
               m.attempts
          FROM moving m
        RETURNING 1
    ),
    buried AS (
        INSERT INTO {schema}.ready_tombstones (slot, job_id, lane_seq)
        SELECT p_slot, m.job_id, m.lane_seq FROM moving m
        RETURNING 1
    )
    SELECT count(*) INTO v_moved FROM copied;
    RETURN v_moved;
END
$fn$;
$awa_template$)
ON CONFLICT (name) DO UPDATE SET ord = EXCLUDED.ord, body = EXCLUDED.body;
INSERT INTO awa.substrate_functions (name, ord, body) VALUES ('ready_slot_live', 9, $awa_template$-- {schema}.ready_slot_live(slot): why queue-ring slot `slot` still holds
-- runnable work, or NULL when it holds none: every entry is past its lane
-- head or tombstoned. Used by ring_prune before and after locking the slot.
-- A slot that is not one of the queue ring's is refused (22023).
CREATE OR REPLACE FUNCTION {schema}.ready_slot_live(p_slot integer)
RETURNS text LANGUAGE plpgsql STABLE AS $fn$
BEGIN
    -- A slot of this ring (ring_slot_count refuses an unknown ring).
    IF p_slot IS NULL OR p_slot NOT BETWEEN 0 AND {schema}.ring_slot_count('queue') - 1 THEN
        RAISE EXCEPTION 'slot % is not a slot of the % ring', coalesce(p_slot::text, 'NULL'), 'queue'
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'Slots are numbered from 0 to the ring''s slot count - 1 (substrate_info).';
    END IF;
    RETURN (
        SELECT 'job ' || e.job_id || ' is still waiting to be claimed'
          FROM {schema}.ready_entries e
          JOIN {schema}.lane_heads h ON h.queue = e.queue AND h.priority = e.priority AND h.shard = e.shard
         WHERE e.slot = p_slot
           AND e.lane_seq > h.head_seq
           AND NOT EXISTS (SELECT 1 FROM {schema}.ready_tombstones t
                            WHERE t.slot = e.slot AND t.job_id = e.job_id AND t.lane_seq = e.lane_seq)
         LIMIT 1);
END
$fn$;
$awa_template$)
ON CONFLICT (name) DO UPDATE SET ord = EXCLUDED.ord, body = EXCLUDED.body;
INSERT INTO awa.substrate_functions (name, ord, body) VALUES ('ready_take', 1, $awa_template$-- {schema}.ready_take(queue, limit, cand_seq, cand_xid, aging): take up to
-- `limit` runnable jobs of a queue, and at most 8 MiB of args + metadata
-- (stored size; at least one job), in order, advancing the lane heads past
-- them. Called only from the execution plane's claim, in the same
-- statement that writes the claim batch.
--
-- Order: priority 1 first, 4 last (docs/adr/0008), after aging, then lane
-- position. Aging moves a waiting job one step towards 1 per aging
-- interval (the effective priority may go below 1). Within one lane the
-- effective priority is made non-decreasing (a running maximum: a newer
-- job never ranks ahead of an older one of its lane), so what is taken
-- from a lane is always a prefix of it and the head can move past exactly
-- what was taken.
--
-- Concurrent claimers skip each other: lanes are locked FOR UPDATE SKIP
-- LOCKED, so a lane being claimed by someone else is simply not offered.
--
-- The frontier. A lane position is safe to pass only once no transaction
-- can still commit a row at or below it, otherwise a later producer's job
-- would overtake (and the head would strand) an earlier, still
-- uncommitted one. We read M = ready_seq.last_value, then take our own
-- transaction id X. Every position <= M was drawn by a producer whose xid
-- was assigned before (ready_append's rule), hence is older than X. So once
-- no transaction older than X is running (the xmin of a later snapshot is
-- at least X), everything <= M is final and visible to a later statement.
-- (A snapshot's xip alone is not enough: it omits running xids newer than
-- the newest completed one.) The caller passes the candidate (M, X) of its
-- previous call, which has usually settled by now, and gets this call's
-- candidate back (next_seq, next_xid) in every row; when no job is taken,
-- one row with job_id NULL still carries it.
--
-- When neither candidate has settled (a long transaction is open
-- somewhere), a slow path reads pg_locks once: settled if no transaction
-- older than X holds this queue's producer lock (ready_append takes it
-- before drawing a position). Transactions that ended before that read are
-- visible to the statement that reads the rows, which starts after it. So
-- an unrelated long transaction, or a long producer of another queue, does
-- not hold this queue back. (Producers in prepared two-phase transactions
-- hold their locks without a backend and are not recognised: do not
-- enqueue inside PREPARE TRANSACTION.)
--
-- Bounds (SQLSTATE 22023): limit within awa_core::bounds::CLAIM_BATCH (1
-- to 1024); aging NULL (off) or within PRIORITY_AGING_STORED (1 ms to 30
-- days): a zero interval would divide by zero.
CREATE OR REPLACE FUNCTION {schema}.ready_take(
    p_queue     text,
    p_limit     integer,
    p_cand_seq  bigint,
    p_cand_xid  xid8,
    p_aging     interval
) RETURNS TABLE (
    job_id bigint, slot integer, lane_seq bigint, kind text, args jsonb,
    priority smallint, attempt integer, max_attempts integer, run_lease bigint,
    created_at timestamptz, ready_at timestamptz, unique_key text, metadata jsonb,
    frontier bigint, next_seq bigint, next_xid xid8, shard smallint
) LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan AS $fn$
#variable_conflict use_column
DECLARE
    v_seq      bigint;
    v_xid      xid8;
    v_frontier bigint;
    v_prios    smallint[];
    v_shards   smallint[];
BEGIN
    IF p_limit IS NULL OR p_limit NOT BETWEEN 1 AND 1024 THEN
        RAISE EXCEPTION 'claim limit must be 1 to 1024 (got %)', coalesce(p_limit::text, 'NULL')
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'Claim at most a claim batch (awa_core::bounds::CLAIM_BATCH) per call.';
    END IF;
    IF p_aging NOT BETWEEN interval '1 millisecond' AND interval '30 days' THEN
        RAISE EXCEPTION 'priority aging must be 1ms to 30days, or NULL for none (got %)', p_aging
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'A waiting job gains one priority step per this interval (awa queue configure --priority-aging).';
    END IF;
    SELECT s.last_value INTO v_seq FROM {schema}.ready_seq s;
    -- Nothing visible past any lane head: return at once, keeping the old
    -- candidate. No xid is assigned, so an idle poll commits nothing (no
    -- WAL flush).
    IF NOT EXISTS (
            SELECT 1
              FROM {schema}.lane_heads h
             CROSS JOIN LATERAL (
                    SELECT 1 FROM {schema}.ready_entries e
                     WHERE e.queue = h.queue AND e.priority = h.priority AND e.shard = h.shard
                       AND e.lane_seq > h.head_seq
                     LIMIT 1) w
             WHERE h.queue = p_queue) THEN
        RETURN QUERY SELECT NULL::bigint, NULL::integer, NULL::bigint, NULL::text, NULL::jsonb,
                            NULL::smallint, NULL::integer, NULL::integer, NULL::bigint,
                            NULL::timestamptz, NULL::timestamptz, NULL::text, NULL::jsonb,
                            NULL::bigint, p_cand_seq, p_cand_xid, NULL::smallint;
        RETURN;
    END IF;
    v_xid := pg_current_xact_id();

    IF pg_snapshot_xmin(pg_current_snapshot()) >= v_xid THEN
        v_frontier := v_seq;
    ELSIF p_cand_xid IS NOT NULL AND pg_snapshot_xmin(pg_current_snapshot()) >= p_cand_xid THEN
        v_frontier := least(p_cand_seq, v_seq);
    ELSIF NOT EXISTS (
            SELECT 1
              FROM pg_locks a
              JOIN pg_locks t ON t.pid = a.pid
             WHERE a.locktype = 'advisory' AND a.classid = 6387554
               AND a.objid = hashtext(p_queue)::oid AND a.objsubid = 2 AND a.granted
               AND a.database = (SELECT d.oid FROM pg_database d WHERE d.datname = current_database())
               AND a.pid <> pg_backend_pid()
               AND t.locktype = 'transactionid' AND t.mode = 'ExclusiveLock' AND t.granted
               AND age(t.transactionid) > age(v_xid::xid)) THEN
        v_frontier := v_seq;
    ELSE
        v_frontier := 0;
    END IF;

    -- Lock the lanes in a statement of their own, BEFORE the statement that
    -- reads entries and tombstones. A canceller (ready_tombstone) holds the
    -- lane lock while it writes a tombstone, so every tombstone of a locked
    -- lane committed before we got the lock, and the next statement's
    -- snapshot sees it. Reading the tombstones in the locking statement
    -- itself used a snapshot older than the lock and handed out jobs that
    -- had just been cancelled (claimed and cancelled at once, their unique
    -- key released while they ran).
    SELECT coalesce(array_agg(l.priority), '{}'), coalesce(array_agg(l.shard), '{}')
      INTO v_prios, v_shards
      FROM (SELECT h.priority, h.shard
              FROM {schema}.lane_heads h
             WHERE h.queue = p_queue
             ORDER BY h.priority, h.shard
               FOR UPDATE SKIP LOCKED) l;

    RETURN QUERY
    WITH frontier AS (
        SELECT v_frontier AS seq
    ),
    lanes AS MATERIALIZED (
        -- Ours until commit: head_seq read here is current.
        SELECT h.priority, h.shard, h.head_seq
          FROM {schema}.lane_heads h
          JOIN unnest(v_prios, v_shards) AS k(priority, shard)
            ON k.priority = h.priority AND k.shard = h.shard
         WHERE h.queue = p_queue
    ),
    cand AS MATERIALIZED (
        -- A job moved by ready_relocate has two entries with one lane_seq:
        -- the tombstoned old copy and the live new one. The live copy sorts
        -- first, so the LIMIT never keeps the dead twin while cutting off
        -- the live one (the head would then pass a job nobody took).
        SELECT r.*
          FROM lanes l
         CROSS JOIN frontier f
         CROSS JOIN LATERAL (
                SELECT e.slot, e.lane_seq, e.job_id, e.kind, e.args, e.priority, e.shard,
                       e.attempt, e.max_attempts, e.run_lease, e.created_at, e.ready_at,
                       e.unique_key, e.metadata, t.job_id IS NOT NULL AS dead
                  FROM {schema}.ready_entries e
                  LEFT JOIN {schema}.ready_tombstones t
                    ON t.slot = e.slot AND t.job_id = e.job_id AND t.lane_seq = e.lane_seq
                 WHERE e.queue = p_queue AND e.priority = l.priority AND e.shard = l.shard
                   AND e.lane_seq > l.head_seq AND e.lane_seq <= f.seq
                 ORDER BY e.lane_seq, t.job_id IS NOT NULL
                 LIMIT p_limit) r
    ),
    aged AS (
        SELECT c.*,
               max(c.priority - CASE WHEN p_aging IS NULL OR p_aging <= interval '0' THEN 0
                                     ELSE floor(extract(epoch FROM now() - c.ready_at)
                                                / extract(epoch FROM p_aging)) END)
                   OVER (PARTITION BY c.priority, c.shard ORDER BY c.lane_seq) AS effective
          FROM cand c
         WHERE NOT c.dead
    ),
    ranked AS (
        SELECT a.*, row_number() OVER w AS rn,
               -- Bytes handed out so far, this job included (as stored).
               sum(pg_column_size(a.args) + coalesce(pg_column_size(a.metadata), 0)) OVER w AS bytes
          FROM aged a
        WINDOW w AS (ORDER BY a.effective, a.lane_seq ROWS UNBOUNDED PRECEDING)
    ),
    -- A batch is bounded by count and by bytes (8 MiB; the first job is
    -- always taken, whatever its size). Both bounds cut ranked order, so
    -- what is taken is still a prefix of it and, per lane, a prefix of the
    -- lane: the heads below move past exactly what is taken.
    chosen AS (
        SELECT r.*, r.rn <= p_limit AND (r.rn = 1 OR r.bytes <= 8388608) AS take
          FROM ranked r
    ),
    first_left AS (
        SELECT r.priority, r.shard, min(r.lane_seq) AS seq
          FROM chosen r WHERE NOT r.take
         GROUP BY r.priority, r.shard
    ),
    new_heads AS (
        SELECT c.priority, c.shard, max(c.lane_seq) AS head
          FROM cand c
          LEFT JOIN first_left fl ON fl.priority = c.priority AND fl.shard = c.shard
         WHERE fl.seq IS NULL OR c.lane_seq < fl.seq
         GROUP BY c.priority, c.shard
    ),
    moved AS (
        UPDATE {schema}.lane_heads h
           SET head_seq = n.head
          FROM new_heads n
         WHERE h.queue = p_queue AND h.priority = n.priority AND h.shard = n.shard
           AND n.head > h.head_seq
        RETURNING 1
    ),
    taken AS (
        SELECT r.job_id, r.slot, r.lane_seq, r.kind, r.args, r.priority, r.attempt,
               r.max_attempts, r.run_lease, r.created_at, r.ready_at, r.unique_key,
               r.metadata, r.rn, r.shard
          FROM chosen r WHERE r.take
    )
    SELECT t.job_id, t.slot, t.lane_seq, t.kind, t.args, t.priority, t.attempt,
           t.max_attempts, t.run_lease, t.created_at, t.ready_at, t.unique_key, t.metadata,
           v_frontier, v_seq, v_xid, t.shard
      FROM taken t
     ORDER BY t.rn;
    -- (moved, a data-modifying CTE, runs to completion although unread.)

    IF NOT FOUND THEN
        RETURN QUERY SELECT NULL::bigint, NULL::integer, NULL::bigint, NULL::text, NULL::jsonb,
                            NULL::smallint, NULL::integer, NULL::integer, NULL::bigint,
                            NULL::timestamptz, NULL::timestamptz, NULL::text, NULL::jsonb,
                            v_frontier, v_seq, v_xid, NULL::smallint;
    END IF;
END
$fn$;
$awa_template$)
ON CONFLICT (name) DO UPDATE SET ord = EXCLUDED.ord, body = EXCLUDED.body;
INSERT INTO awa.substrate_functions (name, ord, body) VALUES ('ready_tombstone', 2, $awa_template$-- {schema}.ready_tombstone(job_id): cancel a job that is still waiting in
-- the ready ring, without rewriting its entry. Returns the cancelled
-- entry's slot, lane position and body with its attempt records (for its
-- terminal fact), or no row when the job is not waiting (already claimed,
-- or not in the ready ring).
--
-- The lane row is locked first so a concurrent claim cannot take the job
-- between our check and our tombstone: ready_take locks the same row.
CREATE OR REPLACE FUNCTION {schema}.ready_tombstone(p_job_id bigint)
RETURNS TABLE (slot integer, lane_seq bigint, queue text, attempt integer, run_lease bigint,
               priority smallint, kind text, args jsonb, max_attempts integer,
               created_at timestamptz, unique_key text, metadata jsonb, attempts jsonb)
LANGUAGE plpgsql AS $fn$
#variable_conflict use_column
DECLARE
    v_entry record;
    v_head  bigint;
BEGIN
    -- Which lane: any copy of the job's newest entry names it.
    FOR v_entry IN
        SELECT e.queue, e.priority, e.shard
          FROM {schema}.ready_entries e
         WHERE e.job_id = p_job_id
         ORDER BY e.lane_seq DESC
         LIMIT 1
    LOOP
        SELECT h.head_seq INTO v_head
          FROM {schema}.lane_heads h
         WHERE h.queue = v_entry.queue AND h.priority = v_entry.priority AND h.shard = v_entry.shard
           FOR UPDATE;
        -- Under the lane lock, in a new statement: the live copy. A job
        -- moved by ready_relocate has a tombstoned old copy and a live new
        -- one with the same lane position.
        RETURN QUERY
        WITH live AS (
            SELECT e.slot, e.job_id, e.lane_seq, e.attempt, e.run_lease, e.priority, e.kind,
                   e.args, e.max_attempts, e.created_at, e.unique_key, e.metadata, e.attempts
              FROM {schema}.ready_entries e
             WHERE e.job_id = p_job_id AND e.queue = v_entry.queue
               AND e.priority = v_entry.priority AND e.shard = v_entry.shard
               AND e.lane_seq > v_head
               AND NOT EXISTS (SELECT 1 FROM {schema}.ready_tombstones x
                                WHERE x.slot = e.slot AND x.job_id = e.job_id AND x.lane_seq = e.lane_seq)
             ORDER BY e.lane_seq DESC
             LIMIT 1
        ),
        buried AS (
            INSERT INTO {schema}.ready_tombstones AS t (slot, job_id, lane_seq)
            SELECT l.slot, l.job_id, l.lane_seq FROM live l
            ON CONFLICT DO NOTHING
            RETURNING t.slot, t.lane_seq
        )
        SELECT b.slot, b.lane_seq, v_entry.queue, l.attempt, l.run_lease, l.priority, l.kind,
               l.args, l.max_attempts, l.created_at, l.unique_key, l.metadata, l.attempts
          FROM buried b JOIN live l ON l.slot = b.slot AND l.lane_seq = b.lane_seq;
    END LOOP;
END
$fn$;
$awa_template$)
ON CONFLICT (name) DO UPDATE SET ord = EXCLUDED.ord, body = EXCLUDED.body;
INSERT INTO awa.substrate_functions (name, ord, body) VALUES ('rescue_stale', 19, $awa_template$-- {schema}.rescue_stale(stale, limit): finish abandoned attempts as
-- retries, through the guarded finish path (so a worker that was only slow
-- and finishes later is rejected, and at most one of them wins).
-- Abandoned means: open, and either claimed more than `stale` ago with no
-- lease heartbeat within `stale`, or past its hard deadline, or waiting for
-- a callback that timed out; parked attempts (exec_park) likewise. Returns
-- how many were rescued. Each rescued attempt is named on NOTIFY
-- awa_cancel ('job_id:run_lease:rescued', delivered at commit), so a
-- worker that still runs it (a slow one, or one past a deadline) tells
-- its handler to stop at once.
--
-- Bounds (SQLSTATE 22023, before anything is read): stale within
-- awa_core::bounds::RESCUE_AFTER, 1 second to 1 day. Workers heartbeat a
-- running job at a third of the published bound, so a shorter one (or
-- zero, or a negative interval) would rescue healthy running jobs: they
-- would run again and their results be rejected. limit 1 to 10000
-- (MAINT_LIMIT).
CREATE OR REPLACE FUNCTION {schema}.rescue_stale(p_stale interval, p_limit integer)
RETURNS integer LANGUAGE plpgsql AS $fn$
#variable_conflict use_column
DECLARE
    v_count integer;
BEGIN
    IF p_stale IS NULL OR p_stale NOT BETWEEN interval '1 second' AND interval '1 day' THEN
        RAISE EXCEPTION 'rescue_stale: the staleness bound must be 1s to 1day (got %)',
                        coalesce(p_stale::text, 'NULL')
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'Workers heartbeat at a third of the rescue bound; a shorter bound rescues healthy running jobs. Use the leader''s --rescue-after (1s to 1day, 60s by default).';
    END IF;
    IF p_limit IS NULL OR p_limit NOT BETWEEN 1 AND 10000 THEN
        RAISE EXCEPTION 'rescue_stale: limit must be 1 to 10000 (got %)', coalesce(p_limit::text, 'NULL')
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'Attempts one maintenance call rescues (awa_core::bounds::MAINT_LIMIT); the leader rescues 1000 at a time.';
    END IF;
    WITH old_open AS (
        -- Open items of batches claimed more than `stale` ago (the index
        -- on claimed_at; a batch its last link closed is skipped by one
        -- probe), with their lease if they materialized one.
        SELECT b.slot, b.batch_id, u.item::integer AS item, u.job_id, u.run_lease,
               l.heartbeat_at, l.deadline_at, l.callback_timeout
          FROM {schema}.claim_batches b
         CROSS JOIN LATERAL unnest(b.job_ids, b.run_leases) WITH ORDINALITY AS u(job_id, run_lease, item)
          LEFT JOIN {schema}.leases l ON l.job_id = u.job_id AND l.run_lease = u.run_lease
         WHERE b.claimed_at < now() - p_stale
           AND NOT EXISTS (SELECT 1 FROM {schema}.claim_closures c
                            WHERE c.slot = b.slot AND c.batch_id = b.batch_id AND c.open_after = 0)
           AND NOT EXISTS (SELECT 1 FROM {schema}.claim_closures c
                            WHERE c.slot = b.slot AND c.batch_id = b.batch_id AND u.item = ANY (c.items))
    ),
    abandoned AS (
      (SELECT o.slot, o.batch_id, o.item, o.job_id, o.run_lease,
              CASE WHEN o.deadline_at < now() THEN 'attempt passed its deadline'
                   WHEN o.callback_timeout < now() THEN 'callback wait timed out'
                   ELSE 'worker stopped heartbeating (stale for ' || p_stale || ')' END AS reason
         FROM old_open o
        WHERE o.deadline_at < now() OR o.callback_timeout < now()
           OR o.heartbeat_at IS NULL OR o.heartbeat_at < now() - p_stale
        LIMIT p_limit)
      UNION
        -- A deadline or a callback timeout can pass before `stale` has:
        -- those attempts have a lease (it carries both).
      (SELECT l.claim_slot, l.batch_id, l.item, l.job_id, l.run_lease,
              CASE WHEN l.deadline_at < now() THEN 'attempt passed its deadline'
                   ELSE 'callback wait timed out' END
         FROM {schema}.leases l
        WHERE (l.deadline_at < now() OR l.callback_timeout < now())
          AND NOT EXISTS (SELECT 1 FROM {schema}.claim_closures c
                           WHERE c.slot = l.claim_slot AND c.batch_id = l.batch_id AND l.item = ANY (c.items))
        LIMIT p_limit)
      UNION ALL
        -- Parked attempts (exec_park) carry their own heartbeat.
      (SELECT p.claim_slot, p.batch_id, p.item, p.job_id, p.run_lease,
               CASE WHEN p.deadline_at < now() THEN 'attempt passed its deadline'
                    WHEN p.callback_timeout < now() THEN 'callback wait timed out'
                    ELSE 'worker stopped heartbeating (stale for ' || p_stale || ')' END
          FROM {schema}.parked_attempts p
         WHERE p.deadline_at < now()
            OR p.callback_timeout < now()
            OR (p.claimed_at < now() - p_stale
                AND (p.heartbeat_at IS NULL OR p.heartbeat_at < now() - p_stale))
         LIMIT p_limit)
    )
    SELECT count(pg_notify('awa_cancel', f.job_id || ':' || f.run_lease || ':rescued')) INTO v_count
      FROM {schema}.finish(
          ARRAY(SELECT job_id FROM abandoned ORDER BY job_id),
          ARRAY(SELECT run_lease FROM abandoned ORDER BY job_id),
          ARRAY(SELECT slot FROM abandoned ORDER BY job_id),
          ARRAY(SELECT batch_id FROM abandoned ORDER BY job_id),
          ARRAY(SELECT item FROM abandoned ORDER BY job_id),
          ARRAY(SELECT 'rescue'::text FROM abandoned ORDER BY job_id),
          ARRAY(SELECT NULL::interval FROM abandoned ORDER BY job_id),
          ARRAY(SELECT reason FROM abandoned ORDER BY job_id)) f
     WHERE f.accepted;
    RETURN v_count;
END
$fn$;
$awa_template$)
ON CONFLICT (name) DO UPDATE SET ord = EXCLUDED.ord, body = EXCLUDED.body;
INSERT INTO awa.substrate_functions (name, ord, body) VALUES ('ring_helpers', 28, $awa_template$-- Small helpers of ring_rotate and ring_prune.
--
-- Bounds: every function here that takes a ring or a slot refuses an
-- unknown ring (ring_slot_count) and a slot outside 0 .. slots - 1 with
-- SQLSTATE 22023, as every runtime function refuses what awa_core::bounds
-- refuses: the runtime role may call them directly. (The slot check is
-- written out in each function rather than a helper of its own: a new
-- runtime function would need EXECUTE granted to existing runtime roles
-- on upgrade.)

-- {schema}.ring_slot_empty(ring, slot): whether every table of a ring slot
-- is empty. The families per ring are listed in ring_families.
CREATE OR REPLACE FUNCTION {schema}.ring_slot_empty(p_ring text, p_slot integer)
RETURNS boolean LANGUAGE plpgsql STABLE AS $fn$
DECLARE
    v_family text;
    v_found  boolean;
BEGIN
    -- A slot of this ring (ring_slot_count refuses an unknown ring).
    IF p_slot IS NULL OR p_slot NOT BETWEEN 0 AND {schema}.ring_slot_count(p_ring) - 1 THEN
        RAISE EXCEPTION 'slot % is not a slot of the % ring', coalesce(p_slot::text, 'NULL'), p_ring
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'Slots are numbered from 0 to the ring''s slot count - 1 (substrate_info).';
    END IF;
    FOREACH v_family IN ARRAY {schema}.ring_families(p_ring) LOOP
        EXECUTE format('SELECT EXISTS (SELECT 1 FROM %s.%I)', '{schema}', v_family || '_' || p_slot)
           INTO v_found;
        IF v_found THEN
            RETURN false;
        END IF;
    END LOOP;
    RETURN true;
END
$fn$;

-- {schema}.ring_families(ring): the partitioned tables a ring's slots span.
-- Every family of a ring is truncated together, as one unit. An unknown
-- ring is an error (22023), not a NULL a caller would loop over.
CREATE OR REPLACE FUNCTION {schema}.ring_families(p_ring text)
RETURNS text[] LANGUAGE plpgsql IMMUTABLE AS $fn$
BEGIN
    CASE p_ring
        WHEN 'queue' THEN
            RETURN ARRAY['ready_entries', 'ready_tombstones', 'done_entries', 'done_batches', 'count_deltas'];
        WHEN 'claim' THEN
            RETURN ARRAY['claim_batches', 'claim_closures'];
        WHEN 'lease' THEN
            RETURN ARRAY['leases'];
        ELSE
            RAISE EXCEPTION 'unknown ring %', coalesce(p_ring, 'NULL') USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'Rings are queue, lease and claim.';
    END CASE;
END
$fn$;

-- {schema}.ring_slot_count(ring): how many slots a ring has; an unknown
-- ring name is an error, not a NULL that would read as "no slots".
CREATE OR REPLACE FUNCTION {schema}.ring_slot_count(p_ring text)
RETURNS integer LANGUAGE plpgsql STABLE AS $fn$
DECLARE
    v_slots integer;
BEGIN
    SELECT CASE p_ring WHEN 'queue' THEN i.queue_slot_count
                       WHEN 'lease' THEN i.lease_slot_count
                       WHEN 'claim' THEN i.claim_slot_count END
      INTO v_slots FROM {schema}.substrate_info i;
    IF v_slots IS NULL THEN
        RAISE EXCEPTION 'unknown ring %', coalesce(p_ring, 'NULL') USING ERRCODE = 'invalid_parameter_value',
              HINT = 'Rings are queue, lease and claim.';
    END IF;
    RETURN v_slots;
END
$fn$;

-- {schema}.ring_slot_live(ring, slot): why a slot still holds live data, or
-- NULL: the ready plane's predicate for the queue ring, then the execution
-- plane's for every ring.
CREATE OR REPLACE FUNCTION {schema}.ring_slot_live(p_ring text, p_slot integer)
RETURNS text LANGUAGE plpgsql STABLE AS $fn$
BEGIN
    -- A slot of this ring (ring_slot_count refuses an unknown ring).
    IF p_slot IS NULL OR p_slot NOT BETWEEN 0 AND {schema}.ring_slot_count(p_ring) - 1 THEN
        RAISE EXCEPTION 'slot % is not a slot of the % ring', coalesce(p_slot::text, 'NULL'), p_ring
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'Slots are numbered from 0 to the ring''s slot count - 1 (substrate_info).';
    END IF;
    RETURN coalesce(CASE WHEN p_ring = 'queue' THEN {schema}.ready_slot_live(p_slot) END,
                    {schema}.exec_slot_live(p_ring, p_slot));
END
$fn$;

-- {schema}.ring_slot_sealed_at(ring, slot): when the ring last moved off a
-- slot that is not its current one. Rotation always moves to the next slot,
-- so generation g writes slot g % slots, and the slot was sealed by the
-- generation after the last one that wrote it: one primary-key probe.
CREATE OR REPLACE FUNCTION {schema}.ring_slot_sealed_at(p_ring text, p_slot integer)
RETURNS timestamptz LANGUAGE plpgsql STABLE AS $fn$
#variable_conflict use_column
DECLARE
    v_slots integer := {schema}.ring_slot_count(p_ring);
BEGIN
    -- A slot of this ring (ring_slot_count refuses an unknown ring).
    IF p_slot IS NULL OR p_slot NOT BETWEEN 0 AND {schema}.ring_slot_count(p_ring) - 1 THEN
        RAISE EXCEPTION 'slot % is not a slot of the % ring', coalesce(p_slot::text, 'NULL'), p_ring
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'Slots are numbered from 0 to the ring''s slot count - 1 (substrate_info).';
    END IF;
    RETURN (
        WITH cur AS (
            SELECT l.generation, l.slot FROM {schema}.ring_ledger l
             WHERE l.ring = p_ring ORDER BY l.generation DESC LIMIT 1
        )
        SELECT l.rotated_at
          FROM cur c
          JOIN {schema}.ring_ledger l
            ON l.ring = p_ring
           AND l.generation = c.generation - ((c.slot - p_slot + v_slots) % v_slots) + 1);
END
$fn$;

-- {schema}.ring_slot_fresh(ring, slot): whether the current slot holds a row
-- worth sealing. Rows ready_relocate copied in keep the original's older
-- ready_at; a slot whose only rows are such copies still waiting has
-- nothing new, and rotating it would only carry the same stragglers round
-- the ring for ever. Every other row counts, a claimed copy included (it is
-- dead and the slot may then go).
CREATE OR REPLACE FUNCTION {schema}.ring_slot_fresh(p_ring text, p_slot integer)
RETURNS boolean LANGUAGE plpgsql STABLE AS $fn$
DECLARE
    v_since timestamptz;
BEGIN
    -- A slot of this ring (ring_slot_count refuses an unknown ring).
    IF p_slot IS NULL OR p_slot NOT BETWEEN 0 AND {schema}.ring_slot_count(p_ring) - 1 THEN
        RAISE EXCEPTION 'slot % is not a slot of the % ring', coalesce(p_slot::text, 'NULL'), p_ring
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'Slots are numbered from 0 to the ring''s slot count - 1 (substrate_info).';
    END IF;
    IF p_ring <> 'queue' THEN
        RETURN NOT {schema}.ring_slot_empty(p_ring, p_slot);
    END IF;
    SELECT l.rotated_at INTO v_since FROM {schema}.ring_ledger l
     WHERE l.ring = 'queue' ORDER BY l.generation DESC LIMIT 1;
    RETURN EXISTS (SELECT 1 FROM {schema}.ready_entries e
                     JOIN {schema}.lane_heads h
                       ON h.queue = e.queue AND h.priority = e.priority AND h.shard = e.shard
                    WHERE e.slot = p_slot AND (e.ready_at >= v_since OR e.lane_seq <= h.head_seq))
        OR EXISTS (SELECT 1 FROM {schema}.ready_tombstones t WHERE t.slot = p_slot)
        OR EXISTS (SELECT 1 FROM {schema}.done_entries d WHERE d.slot = p_slot)
        OR EXISTS (SELECT 1 FROM {schema}.done_batches d WHERE d.slot = p_slot)
        OR EXISTS (SELECT 1 FROM {schema}.count_deltas c WHERE c.slot = p_slot);
END
$fn$;
$awa_template$)
ON CONFLICT (name) DO UPDATE SET ord = EXCLUDED.ord, body = EXCLUDED.body;
INSERT INTO awa.substrate_functions (name, ord, body) VALUES ('ring_prune', 30, $awa_template$-- {schema}.ring_prune(ring, lock_timeout_ms, rotate_interval): reclaim a
-- sealed slot of a ring, in two phases, one per call:
--
-- 1. retire: walk the sealed slots that hold rows, oldest first, and retire
--    the first one proven to hold nothing live (ready_slot_live /
--    exec_slot_live): fold its count deltas into the rollups and commit a
--    retirement marker. From then on the read views leave the slot's
--    terminal facts out for every snapshot that sees the marker.
--    * A live slot is evacuated first when it is the one the ring rotates
--      onto next (the oldest), and, in the queue ring, whenever it is past
--      its retention: waiting jobs move to the current slot keeping their
--      lane position (ready_relocate), open attempts move out of the rings
--      (exec_park). So one straggler, an unserved queue or a job that runs
--      for hours, never stops the ring, and an idle queue ring does not
--      keep a slot of dead rows behind one.
--    * A younger slot that is still live is looked past: a dead slot behind
--      it is still reclaimed.
--    * Queue-ring slots hold terminal history, so one is retired only once
--      it has been sealed for the retention: substrate_info.history_retention
--      when set, else (queue slots - 2) x rotate_interval (history is kept
--      for about the whole ring and one slot is always ready for the next
--      rotation). A younger slot is younger still, so the walk stops there
--      ('retained').
-- 2. truncate (a later call): once no snapshot in this database predates the
--    marker (TRUNCATE is not MVCC-safe, so an older snapshot would see rows
--    vanish), take ACCESS EXCLUSIVE locks on the slot's tables under a short
--    lock_timeout (a writer that picked the slot before it was sealed and
--    has not committed holds a conflicting lock: we time out and retry
--    later), prove again that nothing is live (the late writer may have
--    committed meanwhile), and TRUNCATE every table of the slot together.
--    A slot found live again is un-retired.
--
-- Bounds (awa_core::bounds, refused with SQLSTATE 22023 before anything is
-- read): lock_timeout_ms within PRUNE_LOCK_TIMEOUT, 1 ms to 10 s (0 would
-- be no timeout: the ACCESS EXCLUSIVE request would queue every writer of
-- the ring behind it until the slot's last reader ends); rotate_interval
-- within ROTATE_INTERVAL, 10 ms to 1 day (it sets the default history
-- retention; set substrate_info.history_retention to keep none).
--
-- Returns one row: outcome ('retired', 'pruned', 'nothing_to_prune',
-- 'retained', 'live_rows', 'snapshot_pinned', 'busy', 'horizon_unknown',
-- 'lost_race': another pruner retired the slot first), the slot, and a
-- detail for operators. Anything unproven is a skip, never a truncate.
CREATE OR REPLACE FUNCTION {schema}.ring_prune(
    p_ring text, p_lock_timeout_ms integer, p_rotate_interval interval
)
RETURNS TABLE (outcome text, slot integer, detail text)
LANGUAGE plpgsql AS $fn$
#variable_conflict use_column
DECLARE
    v_slots   integer;
    v_cur     integer;
    v_slot    integer;
    v_xid     xid8;
    v_live    text;
    v_blocker record;
    v_family  text;
    v_tables  text[] := '{}';
    v_old_timeout text;
    v_min_age interval := interval '0';
    v_s       integer;
    v_moved   integer := 0;
    v_parked  integer := 0;
    v_first   text;
    k integer;
BEGIN
    v_slots := {schema}.ring_slot_count(p_ring);
    IF p_lock_timeout_ms IS NULL OR p_lock_timeout_ms NOT BETWEEN 1 AND 10000 THEN
        RAISE EXCEPTION 'ring_prune: lock timeout must be 1 to 10000 ms (got %)',
                        coalesce(p_lock_timeout_ms::text, 'NULL')
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'Writers of the ring queue behind the truncation''s lock request while it waits; the leader uses 200 ms.';
    END IF;
    IF p_rotate_interval IS NULL
       OR p_rotate_interval NOT BETWEEN interval '10 milliseconds' AND interval '1 day' THEN
        RAISE EXCEPTION 'ring_prune: rotate interval must be 10ms to 1day (got %)',
                        coalesce(p_rotate_interval::text, 'NULL')
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'Pass the leader''s rotate interval (awa maint run --rotate-interval); it sets the default history retention. To keep no history, set substrate_info.history_retention to 0 (awa storage configure --history-retention 0s).';
    END IF;
    SELECT l.slot INTO v_cur FROM {schema}.ring_ledger l WHERE l.ring = p_ring
     ORDER BY l.generation DESC LIMIT 1;

    SELECT x.slot, x.retired_xid INTO v_slot, v_xid
      FROM {schema}.ring_retirements x WHERE x.ring = p_ring
     ORDER BY x.retired_at LIMIT 1;

    IF v_slot IS NULL THEN
        -- Phase 1.
        IF p_ring = 'queue' THEN
            SELECT coalesce(i.history_retention, greatest(v_slots - 2, 0) * p_rotate_interval)
              INTO v_min_age FROM {schema}.substrate_info i;
        END IF;
        FOR k IN 1 .. v_slots - 1 LOOP
            v_s := (v_cur + k) % v_slots;
            CONTINUE WHEN {schema}.ring_slot_empty(p_ring, v_s);
            IF v_min_age > interval '0'
               AND {schema}.ring_slot_sealed_at(p_ring, v_s) > now() - v_min_age THEN
                IF v_first IS NULL THEN
                    outcome := 'retained';
                    v_slot := v_s;
                    detail := format('history is retained until %s',
                                     {schema}.ring_slot_sealed_at(p_ring, v_s) + v_min_age);
                END IF;
                EXIT;
            END IF;
            v_live := {schema}.ring_slot_live(p_ring, v_s);
            IF v_live IS NOT NULL AND (k = 1 OR p_ring = 'queue') THEN
                -- Move what keeps it live: always for the slot the ring
                -- rotates onto next; for the queue ring, for every slot
                -- past its retention, so an idle ring does not keep a
                -- slot of dead rows behind one straggler. (Relocated
                -- copies are not fresh, so this never makes the ring
                -- rotate by itself.)
                IF p_ring = 'queue' THEN
                    v_moved := {schema}.ready_relocate(v_s, 1000);
                END IF;
                v_parked := {schema}.exec_park(p_ring, v_s, 1000);
                v_live := {schema}.ring_slot_live(p_ring, v_s);
            END IF;
            IF v_live IS NULL THEN
                IF p_ring = 'queue' THEN
                    PERFORM {schema}.history_retire_slot(v_s);
                END IF;
                INSERT INTO {schema}.ring_retirements (ring, slot, retired_xid)
                VALUES (p_ring, v_s, pg_current_xact_id())
                ON CONFLICT DO NOTHING;
                v_slot := v_s;
                IF FOUND THEN
                    outcome := 'retired';
                    detail := nullif(concat_ws(', ',
                        CASE WHEN v_moved > 0 THEN format('moved %s waiting jobs to slot %s', v_moved, v_cur) END,
                        CASE WHEN v_parked > 0 THEN format('parked %s running attempts', v_parked) END,
                        CASE WHEN v_first IS NOT NULL THEN 'looked past ' || v_first END), '');
                ELSE
                    outcome := 'lost_race';
                    detail := 'another pruner retired it first';
                END IF;
                EXIT;
            END IF;
            v_first := coalesce(v_first, format('slot %s (%s)', v_s, v_live));
            IF outcome IS NULL THEN
                outcome := 'live_rows';
                v_slot := v_s;
                detail := v_live || CASE WHEN v_moved + v_parked > 0
                    THEN format(' (moved %s waiting jobs, parked %s attempts; more next time)', v_moved, v_parked)
                    ELSE '' END;
            END IF;
        END LOOP;
        IF outcome IS NULL THEN
            outcome := 'nothing_to_prune';
        END IF;
    ELSE
        -- Phase 2. Other roles' snapshots are only visible with
        -- pg_read_all_stats; without it we cannot prove snapshot safety.
        IF NOT (pg_has_role('pg_read_all_stats', 'MEMBER')
                OR (SELECT rolsuper FROM pg_roles WHERE rolname = current_user)) THEN
            outcome := 'horizon_unknown';
            detail := 'the maintenance role needs pg_read_all_stats to see other sessions'' snapshots';
        ELSE
            SELECT a.pid, extract(epoch FROM now() - coalesce(a.xact_start, a.backend_start))::bigint AS age
              INTO v_blocker
              FROM pg_stat_activity a
             WHERE a.datname = current_database()
               AND a.pid <> pg_backend_pid()
               AND a.backend_xmin IS NOT NULL
               AND age(a.backend_xmin) >= age(v_xid::xid)
             ORDER BY age(a.backend_xmin) DESC
             LIMIT 1;
            IF v_blocker.pid IS NOT NULL THEN
                outcome := 'snapshot_pinned';
                detail := format('backend pid %s holds a snapshot %s s old', v_blocker.pid, v_blocker.age);
            ELSE
                FOREACH v_family IN ARRAY {schema}.ring_families(p_ring) LOOP
                    v_tables := v_tables || format('%s.%I', '{schema}', v_family || '_' || v_slot);
                END LOOP;
                v_old_timeout := current_setting('lock_timeout');
                PERFORM set_config('lock_timeout', p_lock_timeout_ms || 'ms', true);
                BEGIN
                    EXECUTE 'LOCK TABLE ' || array_to_string(v_tables, ', ') || ' IN ACCESS EXCLUSIVE MODE';
                    outcome := NULL;
                EXCEPTION WHEN lock_not_available THEN
                    outcome := 'busy';
                    detail := 'a writer still holds the slot; retrying later';
                END;
                PERFORM set_config('lock_timeout', v_old_timeout, true);
                -- Another pruner may have truncated the slot while we
                -- waited for the lock (and the ring may already write to
                -- it again): only a slot still marked retired is ours.
                IF outcome IS NULL AND NOT EXISTS (
                        SELECT 1 FROM {schema}.ring_retirements x
                         WHERE x.ring = p_ring AND x.slot = v_slot) THEN
                    outcome := 'lost_race';
                    detail := 'another pruner truncated it first';
                END IF;
                IF outcome IS NULL THEN
                    v_live := {schema}.ring_slot_live(p_ring, v_slot);
                    IF v_live IS NOT NULL THEN
                        DELETE FROM {schema}.ring_retirements x WHERE x.ring = p_ring AND x.slot = v_slot;
                        outcome := 'live_rows';
                        detail := v_live || ' (a late writer); slot un-retired';
                    ELSE
                        -- A late writer may have added count deltas since
                        -- the retirement folded them; fold those too.
                        IF p_ring = 'queue' THEN
                            PERFORM {schema}.history_retire_slot(v_slot);
                        END IF;
                        EXECUTE 'TRUNCATE ' || array_to_string(v_tables, ', ');
                        DELETE FROM {schema}.ring_retirements x WHERE x.ring = p_ring AND x.slot = v_slot;
                        outcome := 'pruned';
                    END IF;
                END IF;
            END IF;
        END IF;
    END IF;

    INSERT INTO {schema}.ring_outcomes AS o (ring, task, outcome, detail)
    VALUES (p_ring, 'prune', outcome, coalesce('slot ' || v_slot || ': ', '') || coalesce(detail, ''))
    ON CONFLICT (ring, task) DO UPDATE SET outcome = EXCLUDED.outcome, detail = EXCLUDED.detail, at = now();
    slot := v_slot;
    RETURN NEXT;
END
$fn$;
$awa_template$)
ON CONFLICT (name) DO UPDATE SET ord = EXCLUDED.ord, body = EXCLUDED.body;
INSERT INTO awa.substrate_functions (name, ord, body) VALUES ('ring_rotate', 29, $awa_template$-- {schema}.ring_rotate(ring, by): move a ring's current slot to the next one.
-- Returns 'rotated', 'idle' (the current slot holds nothing written since
-- the ring moved onto it, see ring_slot_fresh: nothing to seal),
-- 'incoming_not_empty' (the next slot still holds rows or awaits its
-- truncation: rotating onto it would mix live data into the write slot),
-- or 'lost_race' (another rotator appended this generation first; the
-- ledger's primary key is the compare-and-swap, so the loser writes nothing).
CREATE OR REPLACE FUNCTION {schema}.ring_rotate(p_ring text, p_by text)
RETURNS TABLE (outcome text, from_slot integer, to_slot integer, generation bigint)
LANGUAGE plpgsql AS $fn$
#variable_conflict use_column
DECLARE
    v_slots integer;
    v_gen   bigint;
    v_cur   integer;
    v_next  integer;
BEGIN
    v_slots := {schema}.ring_slot_count(p_ring);
    SELECT l.generation, l.slot INTO v_gen, v_cur
      FROM {schema}.ring_ledger l WHERE l.ring = p_ring
     ORDER BY l.generation DESC LIMIT 1;
    v_next := (v_cur + 1) % v_slots;

    IF NOT {schema}.ring_slot_fresh(p_ring, v_cur) THEN
        outcome := 'idle';
    ELSIF NOT {schema}.ring_slot_empty(p_ring, v_next)
          OR EXISTS (SELECT 1 FROM {schema}.ring_retirements x WHERE x.ring = p_ring AND x.slot = v_next) THEN
        outcome := 'incoming_not_empty';
    ELSE
        INSERT INTO {schema}.ring_ledger (ring, generation, slot, rotated_by)
        VALUES (p_ring, v_gen + 1, v_next, p_by)
        ON CONFLICT DO NOTHING;
        outcome := CASE WHEN FOUND THEN 'rotated' ELSE 'lost_race' END;
    END IF;

    INSERT INTO {schema}.ring_outcomes AS o (ring, task, outcome, detail)
    VALUES (p_ring, 'rotate', outcome, format('slot %s -> %s', v_cur, v_next))
    ON CONFLICT (ring, task) DO UPDATE SET outcome = EXCLUDED.outcome, detail = EXCLUDED.detail, at = now();

    from_slot := v_cur;
    to_slot := v_next;
    generation := v_gen + CASE WHEN outcome = 'rotated' THEN 1 ELSE 0 END;
    RETURN NEXT;
END
$fn$;
$awa_template$)
ON CONFLICT (name) DO UPDATE SET ord = EXCLUDED.ord, body = EXCLUDED.body;
INSERT INTO awa.substrate_functions (name, ord, body) VALUES ('routed_jobs', 23, $awa_template$-- {schema}.routed_jobs(): every job of every substrate the storage routing
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
$awa_template$)
ON CONFLICT (name) DO UPDATE SET ord = EXCLUDED.ord, body = EXCLUDED.body;
INSERT INTO awa.substrate_functions (name, ord, body) VALUES ('storage_transfer_in', 31, $awa_template$-- {schema}.storage_transfer_in(from, limit): move up to `limit` deferred
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
CREATE OR REPLACE FUNCTION {schema}.storage_transfer_in(p_from text, p_limit integer)
RETURNS integer LANGUAGE plpgsql AS $fn$
DECLARE
    v_deferred integer;
    v_dead     integer;
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
    EXECUTE format($q$
        WITH moved AS (
            DELETE FROM %1$I.deferred_jobs d
             WHERE d.job_id IN (SELECT x.job_id FROM %1$I.deferred_jobs x
                                 ORDER BY x.run_at LIMIT $1 FOR UPDATE SKIP LOCKED)
            RETURNING d.job_id, d.queue, d.priority, d.kind, d.args, d.attempt, d.max_attempts,
                      d.run_lease, d.run_at, d.reason, d.created_at, d.unique_key, d.metadata,
                      d.last_error, d.attempts
        )
        INSERT INTO {schema}.deferred_jobs
            (job_id, queue, priority, kind, args, attempt, max_attempts, run_lease, run_at,
             reason, created_at, unique_key, metadata, last_error, attempts)
        SELECT * FROM moved$q$, p_from) USING p_limit;
    GET DIAGNOSTICS v_deferred = ROW_COUNT;
    EXECUTE format($q$
        WITH moved AS (
            DELETE FROM %1$I.dlq_entries d
             WHERE d.job_id IN (SELECT x.job_id FROM %1$I.dlq_entries x
                                 ORDER BY x.dead_at LIMIT $1 FOR UPDATE SKIP LOCKED)
            RETURNING d.job_id, d.queue, d.priority, d.kind, d.args, d.attempt, d.max_attempts,
                      d.run_lease, d.created_at, d.dead_at, d.last_error, d.metadata, d.unique_key,
                      d.attempts
        )
        INSERT INTO {schema}.dlq_entries
            (job_id, queue, priority, kind, args, attempt, max_attempts, run_lease, created_at,
             dead_at, last_error, metadata, unique_key, attempts)
        SELECT * FROM moved$q$, p_from) USING p_limit;
    GET DIAGNOSTICS v_dead = ROW_COUNT;
    RETURN v_deferred + v_dead;
END
$fn$;
$awa_template$)
ON CONFLICT (name) DO UPDATE SET ord = EXCLUDED.ord, body = EXCLUDED.body;
INSERT INTO awa.substrate_functions (name, ord, body) VALUES ('terminal_job', 24, $awa_template$-- {schema}.terminal_job(job_id): the terminal_jobs rows of one job, found
-- through the indexes (done_entries by job id, done_batches by the id
-- range each batch covers, failure_entries by its key) instead of
-- unnesting every batch as a filter on the view would. The branches are
-- terminal_jobs' own, with the job filter inside: keep them in step with
-- install_history_plane.sql.
CREATE OR REPLACE FUNCTION {schema}.terminal_job(p_job_id bigint)
RETURNS SETOF {schema}.terminal_jobs LANGUAGE sql STABLE AS $fn$
    SELECT d.job_id, d.queue, d.body ->> 'kind', d.body -> 'args',
           (d.body ->> 'priority')::smallint, d.state, d.attempt,
           (d.body ->> 'max_attempts')::integer, d.run_lease,
           (d.body ->> 'created_at')::timestamptz, d.finalized_at,
           d.last_error, d.body -> 'metadata', d.slot, d.attempts
      FROM {schema}.done_entries d
     WHERE d.job_id = p_job_id
       AND NOT EXISTS (SELECT 1 FROM {schema}.ring_retirements x
                        WHERE x.ring = 'queue' AND x.slot = d.slot)
    UNION ALL
    SELECT u.job_id, b.queue, r.kind, r.args, r.priority, 'completed'::text, u.attempt,
           r.max_attempts, u.run_lease, r.created_at, b.finalized_at, NULL::text, r.metadata,
           b.slot,
           coalesce(r.attempts, '[]'::jsonb) || jsonb_build_array(jsonb_build_object(
               'attempt', u.attempt, 'ended_at', b.finalized_at, 'outcome', 'completed'))
      FROM {schema}.done_batches b
     CROSS JOIN LATERAL unnest(b.job_ids, b.run_leases, b.attempts, b.ready_seqs,
                               b.priorities, b.shards)
           AS u(job_id, run_lease, attempt, ready_seq, priority, shard)
      LEFT JOIN LATERAL (
            SELECT r.* FROM {schema}.ready_entries r
             WHERE r.slot = b.slot AND r.queue = b.queue AND r.priority = u.priority
               AND r.shard = u.shard AND r.lane_seq = u.ready_seq AND r.job_id = u.job_id
             LIMIT 1) r ON true
     WHERE int8range(b.lo_job_id, b.hi_job_id, '[]') @> p_job_id
       AND u.job_id = p_job_id
       AND NOT EXISTS (SELECT 1 FROM {schema}.ring_retirements x
                        WHERE x.ring = 'queue' AND x.slot = b.slot)
    UNION ALL
    SELECT f.job_id, f.queue, f.kind, f.args, f.priority, f.state, f.attempt,
           f.max_attempts, f.run_lease, f.created_at, f.finalized_at, f.last_error,
           f.metadata, NULL::integer, f.attempts
      FROM {schema}.failure_entries f
     WHERE f.job_id = p_job_id
$fn$;
$awa_template$)
ON CONFLICT (name) DO UPDATE SET ord = EXCLUDED.ord, body = EXCLUDED.body;
INSERT INTO awa.substrate_functions (name, ord, body) VALUES ('unique_derive', 4, $awa_template$-- {schema}.unique_derive(key, spec, queue, kind, args): the unique key of
-- one job enqueued with a key spec, and how long the key holds after the
-- job finished. The one place a spec becomes a key: every producer (Rust,
-- Python, raw SQL) enqueues through enqueue_local, which calls this, so
-- they agree by construction (ADR 10; docs/sql-producer.md, "Unique specs").
--
-- spec, a JSON object whose members are all optional:
--   by      array of "kind" (always part of the key; accepted for
--           clarity), "queue", "args" (the whole args) and "args.<field>"
--           (one top-level field of args: a missing field and JSON null
--           are the same value)
--   period  whole seconds, 1 to 31622400 (366 days). The key then holds
--           the window floor(epoch(now()) / period): windows are aligned
--           to the Unix epoch, and now() is the enqueueing transaction's
--           start, as the job's created_at is
--   states  the final states that keep holding the key after the job
--           finished, until its window ends: "completed", "failed" (a
--           dead-lettered job counts as failed) and "cancelled".
--           Unfinished jobs always hold their key. Default: ["completed"]
--           with a period, [] without; not empty needs a period
-- key: the caller's unique key (NULL for none), also part of the key.
--
-- Returns {"key": <derived key>}, plus "until" (the window's end, epoch
-- seconds) and "states" (sorted) when states is not empty: unique_take
-- records those with the key.
--
-- The key is 'u1:' || kind || ':' || the sha256 (hex) of a jsonb of the
-- chosen parts. jsonb's text form is canonical (object members sorted,
-- duplicates dropped, whitespace normalized), so equal args give one key
-- whatever order their members were written in; numbers keep the scale
-- they were written with (1 and 1.0 are different args). Named fields are
-- kept apart from whole args, so specs by args and by fields never share
-- a key; the period is part of the key, so two periods never share a
-- window number.
--
-- Refusals (a malformed spec, from raw SQL: the clients check first):
-- SQLSTATE 22023 invalid_parameter_value, naming what is wrong.
CREATE OR REPLACE FUNCTION {schema}.unique_derive(
    p_key   text,
    p_spec  jsonb,
    p_queue text,
    p_kind  text,
    p_args  jsonb
) RETURNS jsonb LANGUAGE plpgsql STABLE AS $fn$
DECLARE
    v_by     text[] := '{}';
    v_fields text[];
    v_period bigint;
    v_states text[];
    v_window bigint;
    v_parts  jsonb;
    v_bad    text;
BEGIN
    IF jsonb_typeof(p_spec) IS DISTINCT FROM 'object' THEN
        RAISE EXCEPTION 'a unique spec must be a JSON object, not %', coalesce(p_spec::text, 'NULL')
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'For example {"by": ["args"], "period": 600}.';
    END IF;
    SELECT k INTO v_bad FROM jsonb_object_keys(p_spec) k WHERE k NOT IN ('by', 'period', 'states') LIMIT 1;
    IF FOUND THEN
        RAISE EXCEPTION 'unique spec % has an unknown member "%"', p_spec, v_bad
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'A unique spec has the members by, period and states.';
    END IF;

    IF jsonb_typeof(p_spec -> 'by') = 'array' THEN
        SELECT e::text INTO v_bad FROM jsonb_array_elements(p_spec -> 'by') e
         WHERE jsonb_typeof(e) <> 'string'
            OR NOT (e #>> '{}' IN ('kind', 'queue', 'args') OR e #>> '{}' ~ '^args\..')
         LIMIT 1;
        IF FOUND THEN
            RAISE EXCEPTION 'unique spec % names % in "by"', p_spec, v_bad
                USING ERRCODE = 'invalid_parameter_value',
                      HINT = '"by" lists "kind", "queue", "args" or "args.<field>" (a top-level field of args).';
        END IF;
        v_by := ARRAY(SELECT jsonb_array_elements_text(p_spec -> 'by'));
    ELSIF jsonb_typeof(p_spec -> 'by') IS DISTINCT FROM 'null' AND p_spec ? 'by' THEN
        RAISE EXCEPTION 'unique spec %: "by" must be an array', p_spec
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'For example "by": ["queue", "args.tenant"].';
    END IF;

    IF jsonb_typeof(p_spec -> 'period') = 'number' THEN
        IF (p_spec ->> 'period')::numeric NOT BETWEEN 1 AND 31622400
           OR (p_spec ->> 'period')::numeric <> trunc((p_spec ->> 'period')::numeric) THEN
            RAISE EXCEPTION 'unique spec %: the period must be whole seconds from 1 to 31622400 (366 days)', p_spec
                USING ERRCODE = 'invalid_parameter_value';
        END IF;
        v_period := (p_spec ->> 'period')::numeric;
    ELSIF jsonb_typeof(p_spec -> 'period') IS DISTINCT FROM 'null' AND p_spec ? 'period' THEN
        RAISE EXCEPTION 'unique spec %: the period must be a number of seconds', p_spec
            USING ERRCODE = 'invalid_parameter_value';
    END IF;

    IF jsonb_typeof(p_spec -> 'states') = 'array' THEN
        SELECT e::text INTO v_bad FROM jsonb_array_elements(p_spec -> 'states') e
         WHERE jsonb_typeof(e) <> 'string' OR e #>> '{}' NOT IN ('completed', 'failed', 'cancelled')
         LIMIT 1;
        IF FOUND THEN
            RAISE EXCEPTION 'unique spec % names % in "states"', p_spec, v_bad
                USING ERRCODE = 'invalid_parameter_value',
                      HINT = '"states" lists final states that keep the key until the period ends: "completed", "failed" (also dead-lettered), "cancelled". Unfinished jobs always hold their key.';
        END IF;
        v_states := ARRAY(SELECT DISTINCT s FROM jsonb_array_elements_text(p_spec -> 'states') s ORDER BY s);
    ELSIF jsonb_typeof(p_spec -> 'states') IS DISTINCT FROM 'null' AND p_spec ? 'states' THEN
        RAISE EXCEPTION 'unique spec %: "states" must be an array', p_spec
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'For example "states": ["completed", "failed"].';
    ELSE
        v_states := CASE WHEN v_period IS NULL THEN '{}'::text[] ELSE '{completed}'::text[] END;
    END IF;
    IF cardinality(v_states) > 0 AND v_period IS NULL THEN
        RAISE EXCEPTION 'unique spec % keeps the key after the job finished but has no period', p_spec
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'Give a period (how long a finished job keeps the key), or leave "states" out.';
    END IF;

    v_fields := ARRAY(SELECT DISTINCT substr(b, 6) FROM unnest(v_by) b WHERE b LIKE 'args.%' ORDER BY 1);
    v_window := floor(extract(epoch FROM now()) / v_period);
    v_parts := jsonb_build_object(
        'kind',   p_kind,
        'queue',  CASE WHEN 'queue' = ANY (v_by) THEN to_jsonb(p_queue) END,
        'args',   CASE WHEN 'args' = ANY (v_by) THEN p_args END,
        'fields', CASE WHEN cardinality(v_fields) > 0 THEN
                      (SELECT jsonb_object_agg(f, coalesce(p_args -> f, 'null'::jsonb)) FROM unnest(v_fields) f)
                  END,
        'key',    p_key,
        'period', v_period,
        'window', v_window);
    RETURN jsonb_build_object(
               'key', 'u1:' || p_kind || ':' || encode(sha256(convert_to(v_parts::text, 'UTF8')), 'hex'))
           || CASE WHEN cardinality(v_states) > 0
                   THEN jsonb_build_object('until', (v_window + 1) * v_period, 'states', to_jsonb(v_states))
                   ELSE '{}'::jsonb END;
END
$fn$;
$awa_template$)
ON CONFLICT (name) DO UPDATE SET ord = EXCLUDED.ord, body = EXCLUDED.body;
INSERT INTO awa.substrate_functions (name, ord, body) VALUES ('unique_held', 5, $awa_template$-- {schema}.unique_held(hold_until, hold_states, state): whether a key row
-- (awa.job_uniques) keeps holding its key now that its job finished in
-- `state` (completed, failed, dead_lettered, cancelled): its key spec's
-- period has not ended and keeps that state (a dead-lettered job counts
-- as failed). False for a key without a spec (hold_until NULL).
--
-- The one statement of the rule. finish and cancel_job delete the rows it
-- is false for and mark the others finished (finished_at), in the commit
-- that makes the job terminal; unique_prune deletes a finished row once
-- hold_until has passed. A SQL function, so the planner inlines it.
CREATE OR REPLACE FUNCTION {schema}.unique_held(
    p_hold_until  timestamptz,
    p_hold_states text[],
    p_state       text
) RETURNS boolean LANGUAGE sql STABLE AS $fn$
    SELECT coalesce(p_hold_until > now()
                    AND (CASE p_state WHEN 'dead_lettered' THEN 'failed' ELSE p_state END) = ANY (p_hold_states),
                    false)
$fn$;
$awa_template$)
ON CONFLICT (name) DO UPDATE SET ord = EXCLUDED.ord, body = EXCLUDED.body;
INSERT INTO awa.substrate_functions (name, ord, body) VALUES ('unique_take', 3, $awa_template$-- {schema}.unique_take(keys, job_ids, holds): claim unique keys for jobs
-- the caller is about to create in the same transaction. Parallel arrays,
-- one element per job; a NULL key means "no uniqueness". holds (optional):
-- per element NULL, or what unique_derive returned for a key spec whose
-- key keeps holding after the job finished ({"until": epoch seconds,
-- "states": [...]}), recorded in the key row.
--
-- Returns, per element in input order, the key's owner:
--   job_ids[i]  this call took keys[i] for job_ids[i] (or keys[i] is NULL):
--               the caller MUST create job job_ids[i], carrying keys[i], in
--               this transaction;
--   another id  the key is held by that job (unfinished, or finished and
--               still holding: see job_uniques): create nothing for element i.
-- Used by enqueue, dlq_retry and failure_retry; nothing else inserts into
-- job_uniques.
--
-- The rule that must not be broken: a key row commits only together with
-- its job, and a job carrying a key is created only by the element that
-- inserted the key row or took it over. Ownership is therefore decided by
-- what THIS call's statements inserted (INSERT ... ON CONFLICT DO NOTHING
-- RETURNING) or took over (UPDATE ... RETURNING), never by reading
-- job_uniques afterwards: a later read can see an owner that finished in
-- between (READ COMMITTED: no row at all; REPEATABLE READ / SERIALIZABLE:
-- a row its snapshot still shows beside the new one).
--
-- Taking over. A row whose job finished (finished_at set) and whose
-- hold_until has passed holds nothing: it is taken over in place (job,
-- hold, finished_at = NULL). So is a finished row of the caller's own job
-- (a DLQ retry of a job whose key was kept), which keeps its hold unless
-- the call gives one. The takeover locks those rows in key order first.
--
-- Keys neither inserted nor taken over are looked up in a new statement.
-- A key found neither inserted, taken nor owned (its owner finished
-- between the two statements, or its row holds nothing) goes round again,
-- until every key is settled.
--
-- Duplicate keys in one call: the first element wins, the others report it.
-- Keys are inserted in key order, so two batches sharing keys wait for each
-- other in one order and do not deadlock on them.
--
-- Isolation. READ COMMITTED: each statement sees the latest commits, so a
-- round settles every key except those whose owner vanished in between.
-- REPEATABLE READ / SERIALIZABLE: when the conflicting key row was committed
-- (inserted, or marked finished) after the caller's snapshot, PostgreSQL
-- refuses the insert or takeover with SQLSTATE 40001 (serialization_failure,
-- "could not serialize access due to concurrent update"): roll back and
-- retry the whole transaction. A key row deleted after the snapshot does
-- not conflict; this call takes the key.
CREATE OR REPLACE FUNCTION {schema}.unique_take(
    p_keys    text[],
    p_job_ids bigint[],
    p_holds   jsonb[] DEFAULT NULL
) RETURNS bigint[] LANGUAGE plpgsql AS $fn$
#variable_conflict use_column
DECLARE
    v_owners bigint[];
    v_taken  bigint[];
    v_round  integer := 0;
BEGIN
    IF cardinality(p_keys) IS DISTINCT FROM cardinality(p_job_ids)
       OR (p_holds IS NOT NULL AND cardinality(p_holds) IS DISTINCT FROM cardinality(p_keys)) THEN
        RAISE EXCEPTION 'unique_take arrays differ in length' USING ERRCODE = 'invalid_parameter_value',
              HINT = 'Send one key (or NULL) per job id, and one hold per key.';
    END IF;
    -- NULL = not settled yet; keyless elements own themselves.
    v_owners := ARRAY(SELECT CASE WHEN k.key IS NULL THEN k.id END
                        FROM unnest(p_keys, p_job_ids) WITH ORDINALITY AS k(key, id, ord)
                       ORDER BY k.ord);
    LOOP
        EXIT WHEN array_position(v_owners, NULL) IS NULL;
        v_round := v_round + 1;
        IF v_round > 1000 THEN
            -- Each extra round needs another transaction to release one of
            -- these keys between our two statements; this is a safety net.
            RAISE EXCEPTION 'unique keys kept changing owner during enqueue (% rounds)', v_round - 1
                USING ERRCODE = 'serialization_failure',
                      HINT = 'Roll back and retry the transaction.';
        END IF;

        -- 1. Take each unsettled key for its first unsettled element.
        WITH taken AS (
            INSERT INTO awa.job_uniques AS u (unique_key, job_id, hold_until, hold_states)
            SELECT DISTINCT ON (k.key) k.key, k.id,
                   to_timestamp((k.hold ->> 'until')::bigint),
                   CASE WHEN k.hold ? 'states'
                        THEN ARRAY(SELECT jsonb_array_elements_text(k.hold -> 'states')) END
              FROM unnest(p_keys, p_job_ids, v_owners, p_holds)
                   WITH ORDINALITY AS k(key, id, owner, hold, ord)
             WHERE k.key IS NOT NULL AND k.owner IS NULL
             ORDER BY k.key, k.ord
            ON CONFLICT DO NOTHING
            RETURNING u.job_id
        )
        SELECT coalesce(array_agg(t.job_id), '{}') INTO v_taken FROM taken t;

        -- 2. A new statement: what we inserted or take over now is ours;
        -- for the rest, the current owner, or NULL (go round again) when it
        -- has vanished or its row holds nothing. Two rows for one key can
        -- be visible only to a snapshot-isolation transaction that took the
        -- key itself after the old owner released it (the old row is still
        -- in its snapshot); the younger row (ours: our xid is newer than
        -- any xid the snapshot sees committed) wins. The lookup reads this
        -- statement's snapshot, from before the takeover: a row it took
        -- over reads as holding nothing, and the key is settled by `took`.
        WITH unsettled AS (
            SELECT DISTINCT ON (k.key) k.key, k.id, k.hold
              FROM unnest(p_keys, p_job_ids, v_owners, p_holds)
                   WITH ORDINALITY AS k(key, id, owner, hold, ord)
             WHERE k.key IS NOT NULL AND k.owner IS NULL AND NOT (k.id = ANY (v_taken))
             ORDER BY k.key, k.ord
        ),
        -- Only rows that can be taken over are locked: a row still
        -- holding for another job is left alone, so duplicates of a
        -- held key never wait for each other.
        locked AS (
            SELECT u.unique_key FROM awa.job_uniques u
             WHERE u.unique_key = ANY (ARRAY(SELECT s.key FROM unsettled s))
               AND u.finished_at IS NOT NULL
               AND (u.hold_until <= now() OR u.job_id = ANY (ARRAY(SELECT s.id FROM unsettled s)))
             ORDER BY u.unique_key
               FOR UPDATE
        ),
        took AS (
            UPDATE awa.job_uniques u
               SET job_id = s.id,
                   created_at = now(),
                   hold_until = CASE WHEN s.hold IS NULL AND u.job_id = s.id THEN u.hold_until
                                     ELSE to_timestamp((s.hold ->> 'until')::bigint) END,
                   hold_states = CASE WHEN s.hold IS NULL AND u.job_id = s.id THEN u.hold_states
                                      WHEN s.hold ? 'states'
                                      THEN ARRAY(SELECT jsonb_array_elements_text(s.hold -> 'states')) END,
                   finished_at = NULL
              FROM unsettled s
             WHERE u.unique_key = ANY (ARRAY(SELECT l.unique_key FROM locked l))
               AND u.unique_key = s.key
               AND u.finished_at IS NOT NULL
               AND (u.hold_until <= now() OR u.job_id = s.id)
            RETURNING u.job_id
        )
        SELECT array_agg(CASE
                   WHEN k.owner IS NOT NULL THEN k.owner
                   WHEN k.id = ANY (v_taken) OR k.id IN (SELECT t.job_id FROM took t) THEN k.id
                   ELSE (SELECT CASE WHEN u.finished_at IS NOT NULL
                                      AND (u.hold_until <= now() OR u.job_id = k.id)
                                     THEN NULL ELSE u.job_id END
                           FROM awa.job_uniques u
                          WHERE u.unique_key = k.key
                          ORDER BY age(u.xmin)
                          LIMIT 1)
               END ORDER BY k.ord)
          INTO v_owners
          FROM unnest(p_keys, p_job_ids, v_owners) WITH ORDINALITY AS k(key, id, owner, ord);
    END LOOP;
    RETURN v_owners;
END
$fn$;
$awa_template$)
ON CONFLICT (name) DO UPDATE SET ord = EXCLUDED.ord, body = EXCLUDED.body;

-- Refresh every substrate after the step's changes (appended to each step by
-- `cargo xtask migration draft`): re-run the installer on each substrate
-- with its own shape, which creates the tables a changed installer added,
-- re-instantiates every runtime function template and revokes PUBLIC's
-- EXECUTE again; then give every role that was granted the runtime matrix
-- on a substrate (it holds USAGE there) the matrix as it is now, so new
-- tables and functions are covered without an operator step.
-- The installers' "already exists, skipping" notices are noise here.
SET LOCAL client_min_messages = warning;
DO $refresh$
DECLARE
    s record;
    r record;
BEGIN
    FOR s IN SELECT n.nspname AS schema_name
               FROM pg_catalog.pg_class c
               JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
              WHERE c.relname = 'substrate_info' AND c.relkind = 'r'
              ORDER BY n.nspname <> 'awa', n.nspname LOOP
        EXECUTE format('SELECT awa.install_queue_storage_substrate(%L, queue_slot_count, lease_slot_count, claim_slot_count) FROM %I.substrate_info',
                       s.schema_name, s.schema_name);
    END LOOP;
    FOR r IN SELECT DISTINCT ro.rolname AS role_name, n.nspname AS schema_name
               FROM pg_catalog.pg_namespace n
               CROSS JOIN LATERAL pg_catalog.aclexplode(n.nspacl) a
               JOIN pg_catalog.pg_roles ro ON ro.oid = a.grantee
              WHERE a.privilege_type = 'USAGE'
                AND a.grantee <> n.nspowner
                AND EXISTS (SELECT 1 FROM pg_catalog.pg_class c
                             WHERE c.relnamespace = n.oid AND c.relname = 'substrate_info' AND c.relkind = 'r')
              ORDER BY 1, 2 LOOP
        PERFORM awa.grant_runtime_role(r.role_name, r.schema_name);
    END LOOP;
END
$refresh$;
