-- Awa migration 11: claims probe tombstones per entry and relocation resumes in a sealed slot
--
-- Drafted by `cargo xtask migration draft` (hand-written parts first, then
-- what the sources define), then reviewed. Frozen once on main: never edit
-- it, add a new step. Runs once, in one transaction, as the migrator.

-- Hand-written: relocation_resumes.sql
-- Relocation resumes where its last pass got to in a sealed slot
-- (issue 33). Brings an existing database to the shape a fresh install
-- has; the functions (ready_relocate, ready_slot_live, grant_runtime_role)
-- are regenerated from the sources.
DO $mig$
DECLARE
    v_schema text;
    v_role   text;
BEGIN
    FOR v_schema IN
        SELECT n.nspname
          FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
         WHERE c.relname = 'substrate_info' AND c.relkind = 'r'
    LOOP
        -- 1. How far relocation got, per lane and sealed slot
        --    (install_ready_plane.sql). Empty: the next pass starts at
        --    each lane's head, as every pass did so far.
        EXECUTE format($ddl$
            CREATE TABLE IF NOT EXISTS %1$I.ready_relocated (
                slot          integer  NOT NULL,
                queue         text     NOT NULL,
                priority      smallint NOT NULL,
                shard         smallint NOT NULL,
                generation    bigint   NOT NULL,
                moved_through bigint   NOT NULL,
                PRIMARY KEY (slot, queue, priority, shard)
            )$ddl$, v_schema);

        -- 2. Runtime roles granted on this substrate before the table
        --    existed get what grant_runtime_role now gives them on it: the
        --    leader's prune runs as the runtime role. A role counts as a
        --    runtime role of the substrate when it may update lane_heads
        --    and is not its owner.
        FOR v_role IN
            SELECT r.rolname
              FROM pg_roles r
             WHERE has_table_privilege(r.oid, format('%I.lane_heads', v_schema), 'UPDATE')
               AND r.oid <> (SELECT c.relowner FROM pg_class c
                               JOIN pg_namespace n ON n.oid = c.relnamespace
                              WHERE n.nspname = v_schema AND c.relname = 'lane_heads')
               AND NOT r.rolsuper AND r.rolname !~ '^pg_'
        LOOP
            EXECUTE format('GRANT SELECT, INSERT, UPDATE ON %I.ready_relocated TO %I', v_schema, v_role);
        END LOOP;
    END LOOP;
END
$mig$;

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

    -- The queue-ring generations no producer can write to any more: every
    -- entry in a slot of generation <= `generation` is committed (or gone)
    -- and visible to any snapshot that sees this row. ready_seal (with the
    -- leader's prune and rotate of the queue ring) moves it forward in two
    -- steps: a proposal (`pending_generation`, proven once no snapshot
    -- older than the rotation onto pending_generation + 1 is in use) becomes
    -- the seal once no transaction below `pending_xid` is running.
    -- ready_take uses it to stop scanning slots that hold nothing past a
    -- lane's head (lane_heads.low_gen). -1: nothing sealed yet.
    EXECUTE format($ddl$
        CREATE TABLE IF NOT EXISTS %1$I.ready_sealed (
            singleton          boolean     PRIMARY KEY DEFAULT true CHECK (singleton),
            generation         bigint      NOT NULL DEFAULT -1,
            sealed_at          timestamptz NOT NULL DEFAULT now(),
            pending_generation bigint,
            pending_xid        xid8
        )$ddl$, p_schema);
    EXECUTE format('INSERT INTO %1$I.ready_sealed DEFAULT VALUES ON CONFLICT DO NOTHING', p_schema);

    -- How far relocation has got, per lane, in a sealed queue-ring slot
    -- (ready_relocate, "Resuming"): every entry of the lane in `slot` at
    -- lane_seq <= moved_through is behind the lane head or tombstoned.
    -- Valid only for the slot's generation `generation` once that
    -- generation is sealed (ready_sealed), so a row left from an earlier
    -- turn of the ring is ignored and overwritten. Written by the leader's
    -- prune; at most one row per lane and slot, never deleted (a few
    -- hundred rows at most: lanes that ever had a backlog relocated).
    EXECUTE format($ddl$
        CREATE TABLE IF NOT EXISTS %1$I.ready_relocated (
            slot          integer  NOT NULL,
            queue         text     NOT NULL,
            priority      smallint NOT NULL,
            shard         smallint NOT NULL,
            generation    bigint   NOT NULL,
            moved_through bigint   NOT NULL,
            PRIMARY KEY (slot, queue, priority, shard)
        )$ddl$, p_schema);

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

-- Runtime function templates, as the sources define them.
INSERT INTO awa.substrate_functions (name, ord, body) VALUES ('ready_relocate', 11, $awa_template$-- {schema}.ready_relocate(slot, limit): move up to `limit` jobs still
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
-- Resuming (ready_relocated): in a sealed slot (no entry can be added to
-- it any more) the jobs a pass moves are the first live ones of each lane,
-- so after a pass every entry of the lane up to the last one moved is
-- behind the head or tombstoned. The pass records that position, and the
-- next one starts past it: without it each pass stepped over every copy
-- the earlier passes had tombstoned, and moving a backlog of n cost
-- n^2 / 2,000 tombstone probes (0.5 s a pass at 100,000). In a slot not
-- yet sealed a late writer may still add an entry below that position, so
-- nothing is recorded or used there and each pass starts at the head.
--
-- Every read of ready_entries is one lane's range in lane order with a
-- LIMIT (ready_take, "Plans that cannot degrade").
--
-- Returns how many jobs were moved. A slot that is not the queue ring's,
-- or a limit outside 1..10000 (awa_core::bounds::MAINT_LIMIT), is refused
-- (SQLSTATE 22023).
CREATE OR REPLACE FUNCTION {schema}.ready_relocate(p_slot integer, p_limit integer)
RETURNS integer LANGUAGE plpgsql AS $fn$
#variable_conflict use_column
DECLARE
    v_cur     integer;
    v_slots   integer := {schema}.ring_slot_count('queue');
    v_queues  text[];
    v_prios   smallint[];
    v_shards  smallint[];
    v_moved   integer;
    v_gen     bigint;
    v_sealed  boolean;
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

    -- The slot's generation, and whether it is sealed: only then is a
    -- recorded position valid (see "Resuming").
    SELECT c.generation - ((c.slot - p_slot + v_slots) % v_slots)
      INTO v_gen
      FROM (SELECT l.generation, l.slot FROM {schema}.ring_ledger l
             WHERE l.ring = 'queue' ORDER BY l.generation DESC LIMIT 1) c;
    v_sealed := v_gen <= (SELECT z.generation FROM {schema}.ready_sealed z);

    -- Statement 1: lock the lanes that still wait on this slot: a lane
    -- with an entry past its head (and past what was already moved).
    SELECT array_agg(h.queue), array_agg(h.priority), array_agg(h.shard)
      INTO v_queues, v_prios, v_shards
      FROM (SELECT h.queue, h.priority, h.shard
              FROM {schema}.lane_heads h
              LEFT JOIN {schema}.ready_relocated r
                ON v_sealed AND r.slot = p_slot AND r.generation = v_gen
               AND r.queue = h.queue AND r.priority = h.priority AND r.shard = h.shard
             WHERE (SELECT e.lane_seq FROM {schema}.ready_entries e
                     WHERE e.slot = p_slot AND e.queue = h.queue AND e.priority = h.priority
                       AND e.shard = h.shard
                       AND e.lane_seq > greatest(h.head_seq, r.moved_through)
                     ORDER BY e.lane_seq LIMIT 1) IS NOT NULL
               FOR UPDATE OF h SKIP LOCKED) h;
    IF v_queues IS NULL THEN
        RETURN 0;
    END IF;

    -- Statement 2: a new snapshot, taken after the locks were granted.
    -- Each lane's first live entries past its head (and past what was
    -- moved), then the first p_limit of those.
    WITH lanes AS (
        SELECT l.queue, l.priority, l.shard, greatest(h.head_seq, r.moved_through) AS from_seq
          FROM unnest(v_queues, v_prios, v_shards) AS l(queue, priority, shard)
          JOIN {schema}.lane_heads h ON h.queue = l.queue AND h.priority = l.priority AND h.shard = l.shard
          LEFT JOIN {schema}.ready_relocated r
            ON v_sealed AND r.slot = p_slot AND r.generation = v_gen
           AND r.queue = l.queue AND r.priority = l.priority AND r.shard = l.shard
    ),
    moving AS (
        SELECT m.*
          FROM lanes l
         CROSS JOIN LATERAL (
                SELECT e.*
                  FROM {schema}.ready_entries e
                 WHERE e.slot = p_slot AND e.queue = l.queue AND e.priority = l.priority
                   AND e.shard = l.shard AND e.lane_seq > l.from_seq
                   AND (SELECT true FROM {schema}.ready_tombstones t
                         WHERE t.slot = e.slot AND t.job_id = e.job_id
                           AND t.lane_seq = e.lane_seq) IS NULL
                 ORDER BY e.lane_seq
                 LIMIT p_limit) m
         ORDER BY m.lane_seq
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
    ),
    -- Where each lane got to (sealed slots only, see "Resuming"). A lane
    -- whose moved jobs this pass did not reach keeps its position.
    reached AS (
        INSERT INTO {schema}.ready_relocated AS r
            (slot, queue, priority, shard, generation, moved_through)
        SELECT p_slot, m.queue, m.priority, m.shard, v_gen, max(m.lane_seq)
          FROM moving m
         WHERE v_sealed
         GROUP BY m.queue, m.priority, m.shard
        ON CONFLICT (slot, queue, priority, shard) DO UPDATE
           SET generation = EXCLUDED.generation, moved_through = EXCLUDED.moved_through
        RETURNING 1
    )
    SELECT count(*) INTO v_moved FROM copied;
    RETURN v_moved;
END
$fn$;
$awa_template$)
ON CONFLICT (name) DO UPDATE SET ord = EXCLUDED.ord, body = EXCLUDED.body;
INSERT INTO awa.substrate_functions (name, ord, body) VALUES ('ready_slot_live', 10, $awa_template$-- {schema}.ready_slot_live(slot): why queue-ring slot `slot` still holds
-- runnable work, or NULL when it holds none: every entry is past its lane
-- head or tombstoned. Used by ring_prune before and after locking the slot.
-- A slot that is not one of the queue ring's is refused (22023).
CREATE OR REPLACE FUNCTION {schema}.ready_slot_live(p_slot integer)
RETURNS text LANGUAGE plpgsql STABLE AS $fn$
DECLARE
    v_slots  integer := {schema}.ring_slot_count('queue');
    v_gen    bigint;
    v_sealed boolean;
BEGIN
    -- A slot of this ring (ring_slot_count refuses an unknown ring).
    IF p_slot IS NULL OR p_slot NOT BETWEEN 0 AND {schema}.ring_slot_count('queue') - 1 THEN
        RAISE EXCEPTION 'slot % is not a slot of the % ring', coalesce(p_slot::text, 'NULL'), 'queue'
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'Slots are numbered from 0 to the ring''s slot count - 1 (substrate_info).';
    END IF;
    -- Lane by lane, the lane's first live entry past its head in this
    -- slot, in lane order (see ready_take, "Plans that cannot degrade"): a
    -- join of the slot's entries with the heads, which the planner made a
    -- scan of the whole slot once it had statistics, read every entry
    -- already claimed before finding a waiting one, on every prune pass
    -- of a slot that still held a backlog. This reads one index range per
    -- lane, from its head, or in a sealed slot from past the jobs
    -- relocation already moved (ready_relocated, see ready_relocate), plus
    -- the tombstoned entries from there.
    SELECT c.generation - ((c.slot - p_slot + v_slots) % v_slots)
      INTO v_gen
      FROM (SELECT l.generation, l.slot FROM {schema}.ring_ledger l
             WHERE l.ring = 'queue' ORDER BY l.generation DESC LIMIT 1) c;
    v_sealed := v_gen <= (SELECT z.generation FROM {schema}.ready_sealed z);
    RETURN (
        SELECT 'job ' || w.job_id || ' is still waiting to be claimed'
          FROM {schema}.lane_heads h
          LEFT JOIN {schema}.ready_relocated r
            ON v_sealed AND r.slot = p_slot AND r.generation = v_gen
           AND r.queue = h.queue AND r.priority = h.priority AND r.shard = h.shard
         CROSS JOIN LATERAL (
                SELECT e.job_id
                  FROM {schema}.ready_entries e
                 WHERE e.slot = p_slot
                   AND e.queue = h.queue AND e.priority = h.priority AND e.shard = h.shard
                   AND e.lane_seq > greatest(h.head_seq, r.moved_through)
                   AND (SELECT true FROM {schema}.ready_tombstones t
                         WHERE t.slot = e.slot AND t.job_id = e.job_id
                           AND t.lane_seq = e.lane_seq) IS NULL
                 ORDER BY e.lane_seq
                 LIMIT 1) w
         LIMIT 1);
END
$fn$;
$awa_template$)
ON CONFLICT (name) DO UPDATE SET ord = EXCLUDED.ord, body = EXCLUDED.body;
INSERT INTO awa.substrate_functions (name, ord, body) VALUES ('ready_take', 1, $awa_template$-- {schema}.ready_take(queue, limit, cand_seq, cand_xid, aging): take up to
-- `limit` runnable jobs of a queue, and at most 8 MiB of args + metadata
-- (stored size; at least one job), in order, advancing the lane heads past
-- them. Called only from the execution plane's claim, in the same call
-- (transaction) that writes the claim batch.
--
-- Order: priority 1 first, 4 last (docs/adr/0012), after aging, then lane
-- position. Aging moves a waiting job one step towards 1 per aging
-- interval (the effective priority may go below 1). Within one lane the
-- effective priority is made non-decreasing (a running maximum: a newer
-- job never ranks ahead of an older one of its lane), so what is taken
-- from a lane is always a prefix of it and the head can move past exactly
-- what was taken.
--
-- Concurrent claimers skip each other: lanes are locked FOR UPDATE SKIP
-- LOCKED, so a lane being claimed by someone else is simply not offered;
-- the returned frontier is then 0 ("Busy lanes" below), so the caller
-- looks again soon.
--
-- Tombstoned entries (cancelled jobs, and the old copies relocation leaves
-- behind, one per move) are skipped by the scan itself, so they never use
-- up the limit: a call that takes fewer jobs than it was asked for, and
-- returns a non-zero frontier, has taken every runnable job up to the
-- frontier, and a worker relies on that to go idle until the next
-- notification. (Counting them once let a
-- backlog whose jobs had each been relocated a few times drain a quarter
-- of a claim per poll interval.) A lane found exhausted up to the
-- frontier has its head moved to the frontier, past any tombstoned tail:
-- nothing at or below the frontier can still appear in it (the lane is
-- locked, so no relocation or cancel of it runs meanwhile, and every
-- producer at or below the frontier has committed).
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
-- Which slots. A lane's entries past its head can sit in any slot of the
-- queue ring (a producer that read the ledger before a rotation writes
-- the slot it read; relocation copies old entries into the current slot),
-- and a generic plan over ready_entries starts a scan of every partition,
-- which is most of the price of a claim of one job. So each lane carries
-- low_gen: every entry of the lane past its head is in a slot of
-- generation >= low_gen. When the call locks one lane whose low_gen is at
-- least the current generation - 1, it scans only the current slot and the
-- one before (`slot IN (..)` on two plain parameters: the executor prunes
-- the others when it starts), in a statement that also checks the ledger
-- has not moved since (a newer slot could hold positions below ones it
-- takes; if it moved, nothing is taken and the caller looks again at
-- once). Everything else takes the general statement over every slot.
-- low_gen only moves up, to ready_sealed.generation + 1, and only after a
-- statement that sees every entry those generations will ever hold (the
-- seal's promise) found none of the lane's past its head there; a new lane
-- starts at 0.
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
-- Plans that cannot degrade. Every read of ready_entries here asks for a
-- lane's entries past its head IN LANE ORDER with a LIMIT (`ORDER BY
-- e.lane_seq LIMIT n`), existence checks included: they ask for the
-- lane's first entry past its head, in a lateral subquery or as a scalar,
-- never as an `EXISTS`/`NOT EXISTS` directly over ready_entries, whose
-- LIMIT and ORDER BY the planner drops when it makes the check a semi- or
-- anti-join. Tombstones are probed per entry read, through their primary
-- key, by a scalar subquery (`(SELECT true FROM ready_tombstones t WHERE
-- <the entry's key>) IS NULL`), which the planner never turns into a
-- join: as a `NOT EXISTS` it became, once autovacuum had analyzed a slot
-- holding cancelled jobs, a hash anti-join over every tombstone of the
-- slot under a sort of the whole lane (2,121 pages to claim one job of a
-- backlog of 100,000 with one job in ten cancelled). With the ORDER BY and
-- nothing to join, the only plan that does not read the whole rest of the
-- lane before returning is the lane index walked from the head. Where the
-- lane spans slots (a merge of each slot's index), the probe sits in the
-- query above an `OFFSET 0` fence, which PostgreSQL never pushes a
-- condition through: pushed into each slot's scan, it made the merge find
-- each slot's first live entry before returning anything, stepping over
-- every tombstoned old copy relocation had left in a slot. Above the
-- fence the merged lane is read in order, and the probe and the LIMIT stop
-- it after what it takes. And the function runs with `enable_sort = off`:
-- a lane read from more than one slot is in lane order only as a merge of
-- the slots' index scans, and a generic plan, which cannot know how many
-- entries lie between the head and the frontier (it guesses a few
-- hundred), preferred appending the slots and sorting the result: every
-- waiting entry of the lane, sorted, to take one. Without the sort there
-- is no other way to produce lane order than the merge. (The sorts left,
-- of what a call already took, have no alternative and run regardless.)
-- So the
-- planner keeps to it whatever the statistics say: a generic plan
-- estimates `lane_seq > $head` at a third of the lane, and without the
-- ORDER BY it chose a bitmap scan (or a parallel sequential scan) of that
-- third for a one-row check, which made a claim's cost grow with the
-- backlog once the ring had been analyzed (issue 33: 49 ms per claim at a
-- backlog of 400,000). tests/maint/plan_bounds.rs holds every statement to
-- a buffer bound proportional to what it returns, after ANALYZE, over a
-- backlog of 100,000.
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
) LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan SET enable_sort = off AS $fn$
#variable_conflict use_column
DECLARE
    v_seq      bigint;
    v_xid      xid8;
    v_frontier bigint;
    v_seen     bigint;    -- the frontier as returned (see "Busy lanes")
    v_lanes    bigint;    -- the queue's lanes, as counted before locking
    v_pass     integer;
    v_timeout  text;      -- the caller's lock_timeout
    v_prios    smallint[];
    v_shards   smallint[];
    v_heads    bigint[];
    v_lows     bigint[];
    v_gen      bigint;    -- the current queue-ring generation
    v_s1       integer;   -- its slot
    v_s2       integer;   -- the previous generation's slot (v_s1 when none)
    v_fast     boolean;   -- every lane of the queue scans v_s1 and v_s2 only
    v_taken    integer;
    v_sealed   bigint;
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
    SELECT s.last_value,
           (SELECT l.generation FROM {schema}.ring_ledger l
             WHERE l.ring = 'queue' ORDER BY l.generation DESC LIMIT 1),
           (SELECT l.slot FROM {schema}.ring_ledger l
             WHERE l.ring = 'queue' ORDER BY l.generation DESC LIMIT 1),
           (SELECT l.slot FROM {schema}.ring_ledger l
             WHERE l.ring = 'queue' ORDER BY l.generation DESC OFFSET 1 LIMIT 1)
      INTO v_seq, v_gen, v_s1, v_s2
      FROM {schema}.ready_seq s;
    v_s2 := coalesce(v_s2, v_s1);
    -- (The lanes counted here, before any is locked, tell the lock below
    -- whether it skipped one: "Busy lanes".)
    SELECT coalesce(bool_and(h.low_gen >= v_gen - 1), false), count(*) INTO v_fast, v_lanes
      FROM {schema}.lane_heads h WHERE h.queue = p_queue;
    -- Nothing visible past any lane head: return at once, keeping the old
    -- candidate. No xid is assigned, so an idle poll commits nothing (no
    -- WAL flush). With every lane fast, only the newest two slots are
    -- looked at, and anything this statement cannot vouch for counts as
    -- work: a ledger that moved since, or a lane that is not fast (new
    -- since).
    IF v_fast THEN
        IF NOT EXISTS (
                SELECT 1
                  FROM {schema}.lane_heads h
                 CROSS JOIN LATERAL (
                        SELECT 1 FROM {schema}.ready_entries e
                         WHERE e.slot IN (v_s1, v_s2)
                           AND e.queue = h.queue AND e.priority = h.priority AND e.shard = h.shard
                           AND e.lane_seq > h.head_seq
                         ORDER BY e.lane_seq LIMIT 1) w
                 WHERE h.queue = p_queue)
           AND NOT EXISTS (SELECT 1 FROM {schema}.lane_heads h
                            WHERE h.queue = p_queue AND h.low_gen < v_gen - 1)
           AND v_gen = (SELECT l.generation FROM {schema}.ring_ledger l
                         WHERE l.ring = 'queue' ORDER BY l.generation DESC LIMIT 1) THEN
            RETURN QUERY SELECT NULL::bigint, NULL::integer, NULL::bigint, NULL::text, NULL::jsonb,
                                NULL::smallint, NULL::integer, NULL::integer, NULL::bigint,
                                NULL::timestamptz, NULL::timestamptz, NULL::text, NULL::jsonb,
                                NULL::bigint, p_cand_seq, p_cand_xid, NULL::smallint;
            RETURN;
        END IF;
    ELSIF NOT EXISTS (
            SELECT 1
              FROM {schema}.lane_heads h
             CROSS JOIN LATERAL (
                    SELECT 1 FROM {schema}.ready_entries e
                     WHERE e.queue = h.queue AND e.priority = h.priority AND e.shard = h.shard
                       AND e.lane_seq > h.head_seq
                     ORDER BY e.lane_seq LIMIT 1) w
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
    FOR v_pass IN 1..2 LOOP
        SELECT coalesce(array_agg(l.priority), '{}'), coalesce(array_agg(l.shard), '{}'),
               coalesce(array_agg(l.head_seq), '{}'), coalesce(array_agg(l.low_gen), '{}')
          INTO v_prios, v_shards, v_heads, v_lows
          FROM (SELECT h.priority, h.shard, h.head_seq, h.low_gen
                  FROM {schema}.lane_heads h
                 WHERE h.queue = p_queue
                 ORDER BY h.priority, h.shard
                   FOR UPDATE SKIP LOCKED) l;
        EXIT WHEN cardinality(v_prios) > 0 OR v_lanes = 0 OR v_pass = 2;
        -- Every lane busy: almost always another worker's claim of this
        -- queue, which holds them all for its few milliseconds. Queue up
        -- behind it for the first lane (briefly: a lane can also be held
        -- by a cancel inside someone's long transaction), then lock what
        -- is free again. Claims of one queue then follow each other
        -- through the lock queue instead of coming back empty and trying
        -- again; with eight workers on a backlog, most claims did.
        BEGIN
            v_timeout := current_setting('lock_timeout');
            PERFORM set_config('lock_timeout', '50ms', true);
            PERFORM 1 FROM {schema}.lane_heads h
              WHERE h.queue = p_queue
              ORDER BY h.priority, h.shard LIMIT 1
                FOR UPDATE;
            PERFORM set_config('lock_timeout', v_timeout, true);
        EXCEPTION WHEN lock_not_available THEN
            -- Still held: reported busy below. (The subtransaction's
            -- rollback restored lock_timeout.)
            EXIT;
        END;
    END LOOP;
    -- Busy lanes: a lane another transaction holds (a concurrent claim,
    -- usually another worker's; a cancel or relocation of it) was skipped,
    -- so what this call takes says nothing about that lane: work may wait
    -- there the moment the holder commits. The frontier is then returned
    -- as 0, as when the ledger moved, so the caller looks again shortly
    -- instead of idling until a notification that a standing backlog never
    -- sends (with several workers on one queue, the loser of every
    -- overlapping claim idled a poll interval). v_frontier itself still
    -- bounds what is read and where heads move. (Lanes are never deleted;
    -- one made between the count and the lock can hide a busy lane from
    -- this comparison once, and the producer that made it notifies.)
    v_seen := CASE WHEN cardinality(v_prios) < v_lanes THEN 0 ELSE v_frontier END;

    IF cardinality(v_prios) = 1 AND v_lows[1] >= v_gen - 1 THEN
        -- One lane, all of it in the newest two slots. Its head read
        -- above is current (the lane is ours until commit). One lane has
        -- one priority, so aging changes nothing: lane order is the order.
        RETURN QUERY
        WITH fresh AS MATERIALIZED (
            -- The ledger as this statement sees it: no newer slot than v_s1.
            SELECT l.generation = v_gen AS ok
              FROM {schema}.ring_ledger l
             WHERE l.ring = 'queue' ORDER BY l.generation DESC LIMIT 1
        ),
        cand AS MATERIALIZED (
            -- Live entries only (see "Tombstoned entries" above), probed
            -- one by one as the lane is read in order (see "Plans that
            -- cannot degrade": the probe sits above the OFFSET 0 fence).
            SELECT x.*
              FROM (SELECT e.slot, e.lane_seq, e.job_id, e.kind, e.args, e.priority, e.shard,
                           e.attempt, e.max_attempts, e.run_lease, e.created_at, e.ready_at,
                           e.unique_key, e.metadata
                      FROM {schema}.ready_entries e
                     WHERE e.slot IN (v_s1, v_s2)
                       AND e.queue = p_queue AND e.priority = v_prios[1] AND e.shard = v_shards[1]
                       AND e.lane_seq > v_heads[1] AND e.lane_seq <= v_frontier
                       AND (SELECT f.ok FROM fresh f)
                     ORDER BY e.lane_seq
                    OFFSET 0) x
             WHERE (SELECT true FROM {schema}.ready_tombstones t
                     WHERE t.slot IN (v_s1, v_s2)
                       AND t.slot = x.slot AND t.job_id = x.job_id AND t.lane_seq = x.lane_seq) IS NULL
             LIMIT p_limit
        ),
        ranked AS (
            SELECT c.*, row_number() OVER w AS rn,
                   sum(pg_column_size(c.args) + coalesce(pg_column_size(c.metadata), 0)) OVER w AS bytes
              FROM cand c
            WINDOW w AS (ORDER BY c.lane_seq ROWS UNBOUNDED PRECEDING)
        ),
        -- Bounded by count (the LIMIT) and bytes, as the general statement:
        -- what is taken is a prefix of the lane. The head moves past
        -- exactly it when something was left, to the frontier when the
        -- lane is exhausted (fewer live entries than the limit), and past
        -- the last entry read otherwise. Not when the ledger moved: then
        -- nothing was read.
        chosen AS (
            SELECT r.*, r.rn = 1 OR r.bytes <= 8388608 AS take FROM ranked r
        ),
        moved AS (
            UPDATE {schema}.lane_heads h
               SET head_seq = n.head
              FROM (SELECT CASE
                             WHEN EXISTS (SELECT 1 FROM chosen x WHERE NOT x.take)
                                 THEN (SELECT max(x.lane_seq) FROM chosen x WHERE x.take)
                             WHEN (SELECT count(*) FROM cand c) < p_limit THEN v_frontier
                             ELSE (SELECT max(c.lane_seq) FROM cand c)
                           END AS head) n
             WHERE h.queue = p_queue AND h.priority = v_prios[1] AND h.shard = v_shards[1]
               AND n.head > h.head_seq
               AND (SELECT f.ok FROM fresh f)
            RETURNING 1
        )
        SELECT r.job_id, r.slot, r.lane_seq, r.kind, r.args, r.priority, r.attempt,
               r.max_attempts, r.run_lease, r.created_at, r.ready_at, r.unique_key, r.metadata,
               v_seen, v_seq, v_xid, r.shard
          FROM chosen r
         WHERE r.take
         ORDER BY r.rn;
        GET DIAGNOSTICS v_taken = ROW_COUNT;
        IF v_taken = 0 AND v_gen <> (SELECT l.generation FROM {schema}.ring_ledger l
                                      WHERE l.ring = 'queue' ORDER BY l.generation DESC LIMIT 1) THEN
            -- The ledger moved: nothing was taken; look again at once.
            v_seen := 0;
        END IF;
    ELSE
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
        -- Live entries only, up to the limit per lane. A job moved by
        -- ready_relocate has two entries with one lane_seq, the tombstoned
        -- old copy and the live new one; only the live one is read.
        SELECT r.*
          FROM lanes l
         CROSS JOIN frontier f
         CROSS JOIN LATERAL (
                SELECT x.*
                  FROM (SELECT e.slot, e.lane_seq, e.job_id, e.kind, e.args, e.priority, e.shard,
                               e.attempt, e.max_attempts, e.run_lease, e.created_at, e.ready_at,
                               e.unique_key, e.metadata
                          FROM {schema}.ready_entries e
                         WHERE e.queue = p_queue AND e.priority = l.priority AND e.shard = l.shard
                           AND e.lane_seq > l.head_seq AND e.lane_seq <= f.seq
                         ORDER BY e.lane_seq
                        OFFSET 0) x
                 WHERE (SELECT true FROM {schema}.ready_tombstones t
                         WHERE t.slot = x.slot AND t.job_id = x.job_id AND t.lane_seq = x.lane_seq) IS NULL
                 LIMIT p_limit) r
    ),
    aged AS (
        SELECT c.*,
               max(c.priority - CASE WHEN p_aging IS NULL OR p_aging <= interval '0' THEN 0
                                     ELSE floor(extract(epoch FROM now() - c.ready_at)
                                                / extract(epoch FROM p_aging)) END)
                   OVER (PARTITION BY c.priority, c.shard ORDER BY c.lane_seq) AS effective
          FROM cand c
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
    -- Per locked lane: past what was taken when something was left; to
    -- the frontier when the lane is exhausted (fewer live entries than the
    -- limit, none at all included); else past the last entry read.
    per_lane AS (
        SELECT l.priority, l.shard, count(c.lane_seq) AS n, max(c.lane_seq) AS last_seq,
               max(c.lane_seq) FILTER (WHERE fl.seq IS NOT NULL AND c.lane_seq < fl.seq) AS before_left,
               bool_or(fl.seq IS NOT NULL) AS cut
          FROM lanes l
          LEFT JOIN cand c ON c.priority = l.priority AND c.shard = l.shard
          LEFT JOIN first_left fl ON fl.priority = l.priority AND fl.shard = l.shard
         GROUP BY l.priority, l.shard
    ),
    new_heads AS (
        SELECT p.priority, p.shard,
               CASE WHEN p.cut THEN p.before_left
                    WHEN p.n < p_limit THEN v_frontier
                    ELSE p.last_seq END AS head
          FROM per_lane p
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
           v_seen, v_seq, v_xid, t.shard
      FROM taken t
     ORDER BY t.rn;
    -- (moved, a data-modifying CTE, runs to completion although unread.)
    GET DIAGNOSTICS v_taken = ROW_COUNT;
    END IF;

    -- Move low_gen up where ready_sealed allows, so the next claims of
    -- these lanes scan the newest two slots only. Worth it once per lane
    -- and rotation; cheap when nothing changed (no statement runs).
    IF v_gen > ANY (v_lows) THEN
        SELECT z.generation INTO v_sealed FROM {schema}.ready_sealed z;
        IF cardinality(v_prios) = 1 AND v_lows[1] = v_gen - 1 AND v_sealed = v_gen - 1 THEN
            -- The usual case after a rotation: the lane's entries past its
            -- head were all in the newest two slots; the older of them is
            -- sealed now. One slot to look at.
            UPDATE {schema}.lane_heads h
               SET low_gen = v_gen
             WHERE h.queue = p_queue AND h.priority = v_prios[1] AND h.shard = v_shards[1]
               AND h.low_gen = v_gen - 1
               AND (SELECT e.lane_seq FROM {schema}.ready_entries e
                     WHERE e.slot = v_s2
                       AND e.queue = h.queue AND e.priority = h.priority AND e.shard = h.shard
                       AND e.lane_seq > h.head_seq
                     ORDER BY e.lane_seq LIMIT 1) IS NULL;
        ELSIF v_taken < p_limit AND v_sealed >= (SELECT min(x) FROM unnest(v_lows) AS x) THEN
            -- A lane further behind (new, or after a backlog): look at
            -- every slot of the generations from its low_gen to the seal.
            -- The seal promises nothing more will be written there, and
            -- this statement sees everything that was (it runs after the
            -- seal was read). Tombstoned entries count as present.
            UPDATE {schema}.lane_heads h
               SET low_gen = v_sealed + 1
              FROM unnest(v_prios, v_shards) AS k(priority, shard)
             WHERE h.queue = p_queue AND h.priority = k.priority AND h.shard = k.shard
               AND h.low_gen <= v_sealed
               AND (SELECT e.lane_seq FROM {schema}.ready_entries e
                     WHERE e.queue = h.queue AND e.priority = h.priority AND e.shard = h.shard
                       AND e.lane_seq > h.head_seq
                       AND e.slot = ANY (ARRAY(
                             SELECT l.slot FROM {schema}.ring_ledger l
                              WHERE l.ring = 'queue'
                                AND l.generation BETWEEN h.low_gen AND v_sealed))
                     ORDER BY e.lane_seq LIMIT 1) IS NULL;
        END IF;
    END IF;

    IF v_taken = 0 THEN
        RETURN QUERY SELECT NULL::bigint, NULL::integer, NULL::bigint, NULL::text, NULL::jsonb,
                            NULL::smallint, NULL::integer, NULL::integer, NULL::bigint,
                            NULL::timestamptz, NULL::timestamptz, NULL::text, NULL::jsonb,
                            v_seen, v_seq, v_xid, NULL::smallint;
    END IF;
END
$fn$;
$awa_template$)
ON CONFLICT (name) DO UPDATE SET ord = EXCLUDED.ord, body = EXCLUDED.body;
INSERT INTO awa.substrate_functions (name, ord, body) VALUES ('ready_tombstone', 3, $awa_template$-- {schema}.ready_tombstone(job_id): cancel a job that is still waiting in
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
               -- A probe per copy, never a join over the slot's tombstones
               -- (ready_take, "Plans that cannot degrade").
               AND (SELECT true FROM {schema}.ready_tombstones x
                     WHERE x.slot = e.slot AND x.job_id = e.job_id AND x.lane_seq = e.lane_seq) IS NULL
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
