-- Awa migration 14: status reads price the live work not the history kept
--
-- Drafted by `cargo xtask migration draft` (hand-written parts first, then
-- what the sources define), then reviewed. Frozen once on main: never edit
-- it, add a new step. Runs once, in one transaction, as the migrator.

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
$function$;

CREATE OR REPLACE FUNCTION awa.install_exec_plane(p_schema text, p_lease_slots integer, p_claim_slots integer)
 RETURNS void
 LANGUAGE plpgsql
AS $function$
DECLARE
    i integer;
BEGIN
    -- Batch ids. The default CACHE 1 is load-bearing: claim_floor_advance
    -- reads last_value as a bound of every id handed out so far, which
    -- per-session caches would break.
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
    -- The read views find the batches claimed since claim_floor's floor
    -- (below) by their id: one range per slot, however many closed batches
    -- the ring still holds (one entry per claim call). The primary key
    -- cannot serve it: its first column, the slot, is not known.
    EXECUTE format('CREATE INDEX IF NOT EXISTS claim_batches_batch_idx ON %1$I.claim_batches (batch_id)', p_schema);

    -- Where the open claim batches are, so the read views (live_jobs) read
    -- them without reading the closed ones the claim ring still holds (a
    -- batch stays in its slot until the slot is truncated). One row, moved
    -- by the leader's health task (claim_floor_advance, which has the
    -- proof). The promise: every batch whose batch_id is below `floor` is
    -- closed (a link of it says open_after = 0), gone with its slot, or
    -- listed in (open_slots, open_batches); a reader reads the listed ones
    -- and those from `floor` on. A stale row only costs a reader more
    -- batches, never a wrong answer. pending_*: the next floor, proposed
    -- and waiting for the transactions that were running then.
    -- claim_batch_seq keeps CACHE 1 (above): the proof needs ids handed out
    -- in the order they are drawn.
    EXECUTE format($ddl$
        CREATE TABLE IF NOT EXISTS %1$I.claim_floor (
            singleton     boolean     PRIMARY KEY DEFAULT true CHECK (singleton),
            floor         bigint      NOT NULL DEFAULT 0,
            open_slots    integer[]   NOT NULL DEFAULT '{}',
            open_batches  bigint[]    NOT NULL DEFAULT '{}',
            pending_floor bigint,
            pending_vxids text[],
            moved_at      timestamptz NOT NULL DEFAULT now(),
            CHECK (cardinality(open_slots) = cardinality(open_batches)),
            CHECK ((pending_floor IS NULL) = (pending_vxids IS NULL))
        ) WITH (fillfactor = 50)$ddl$, p_schema);
    EXECUTE format('INSERT INTO %1$I.claim_floor DEFAULT VALUES ON CONFLICT DO NOTHING', p_schema);

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

    -- The state of the limits in awa.queue_limits on this substrate
    -- (docs/adr/0015), written only by claims of a limited queue, under
    -- that queue's claim-limit lock; an unlimited queue never touches it.
    -- limit_holds: one row per open attempt and concurrency limit it
    -- counts against, naming its batch item. Not deleted by finish: the
    -- next claim of the queue deletes the rows whose attempt is closed
    -- (finished, rescued, cancelled; a parked attempt is still open), so
    -- the rows are at most the limit plus what ended since.
    EXECUTE format($ddl$
        CREATE TABLE IF NOT EXISTS %1$I.limit_holds (
            queue      text    NOT NULL,
            kind       text    NOT NULL,  -- the limit's kind ('' = the queue)
            part       text    NOT NULL,  -- the job's partition ('' = none)
            job_id     bigint  NOT NULL,
            run_lease  bigint  NOT NULL,
            claim_slot integer NOT NULL,
            batch_id   bigint  NOT NULL,
            item       integer NOT NULL,
            PRIMARY KEY (queue, kind, part, job_id, run_lease)
        )$ddl$, p_schema);
    -- limit_rates: per rate limit and partition, the claims of the last
    -- period: at[i] is a claim's admission time (its batch's claimed_at),
    -- n[i] how many jobs it admitted there. Pruned to the period on every
    -- write, so at most one entry per claim call in the period (at most
    -- rate_max). Rewritten in place: the low fillfactor keeps it HOT.
    EXECUTE format($ddl$
        CREATE TABLE IF NOT EXISTS %1$I.limit_rates (
            queue text          NOT NULL,
            kind  text          NOT NULL,
            part  text          NOT NULL,
            at    timestamptz[] NOT NULL,
            n     integer[]     NOT NULL,
            PRIMARY KEY (queue, kind, part)
        ) WITH (fillfactor = 50)$ddl$, p_schema);
END
$function$;

-- Runtime function templates, as the sources define them.
INSERT INTO awa.substrate_functions (name, ord, body) VALUES ('claim_floor_advance', 24, $awa_template$-- {schema}.claim_floor_advance(): move claim_floor (install_exec_plane.sql)
-- up to the batches claimed now, so the read views read the open claim
-- batches and the few claimed since, never the closed ones the claim ring
-- still holds. The leader's health task calls it before it measures.
-- Returns the floor in force afterwards.
--
-- The promise: every batch with batch_id below `floor` is closed, gone
-- with its slot, or listed in (open_slots, open_batches). Batch ids come
-- from claim_batch_seq (CACHE 1: handed out in the order drawn), drawn by
-- the claim inside its transaction. A batch below a position read from
-- the sequence may still be uncommitted then, so a position is adopted in
-- two steps, the storage drain's fence (drain_release.sql):
--   propose: read the sequence's next id, then (a later statement) the
--     virtual transaction ids of this database's other running
--     transactions: each holds its own from its start, so one that drew an
--     id below the position is among them, or had ended;
--   adopt, in a statement that starts once none of them is still running:
--     every batch below the position that will ever commit has committed
--     and is seen, so the batches from the old floor to the position that
--     are still open, with the listed ones still open, are the new list.
-- A closed batch stays closed (links are only ever added), so a reader
-- whose snapshot sees the row sees every batch it leaves out as closed.
-- A proposal made here is waited for a few milliseconds (the transactions
-- running then are usually claims and finishes that end at once); one
-- still fenced is adopted by a later call. A transaction that stays open
-- holds the floor where it is: readers then read more batches, never
-- fewer. Each step needs a snapshot of its own, so under REPEATABLE READ
-- or SERIALIZABLE nothing moves; a racing caller skips (the row lock).
-- jit = off: a maintenance statement, planned once per session.
-- No arguments (nothing to bound).
CREATE OR REPLACE FUNCTION {schema}.claim_floor_advance()
RETURNS bigint LANGUAGE plpgsql SET jit = off AS $fn$
DECLARE
    f record;
    v_at bigint;
    v_fresh boolean;
BEGIN
    IF current_setting('transaction_isolation') <> 'read committed' THEN
        RETURN (SELECT c.floor FROM {schema}.claim_floor c);
    END IF;
    SELECT c.* INTO f FROM {schema}.claim_floor c FOR UPDATE SKIP LOCKED;
    IF NOT FOUND THEN
        RETURN (SELECT c.floor FROM {schema}.claim_floor c);
    END IF;
    FOR k IN 1 .. 2 LOOP
        v_fresh := f.pending_floor IS NULL;
        IF v_fresh THEN
            -- Propose: the position first, then who may still hold an id
            -- below it (pg_locks is read live; pg_stat_activity, read for
            -- the database only, keeps a transaction's first read unless
            -- cleared).
            v_at := (SELECT CASE WHEN s.is_called THEN s.last_value + 1 ELSE s.last_value END
                       FROM {schema}.claim_batch_seq s);
            PERFORM pg_stat_clear_snapshot();
            UPDATE {schema}.claim_floor c
               SET pending_floor = v_at,
                   pending_vxids = ARRAY(
                       SELECT l.virtualxid::text
                         FROM pg_catalog.pg_locks l
                         JOIN pg_catalog.pg_stat_activity a ON a.pid = l.pid
                        WHERE l.locktype = 'virtualxid' AND l.mode = 'ExclusiveLock' AND l.granted
                          AND a.datname = current_database() AND l.pid <> pg_backend_pid())
             RETURNING c.* INTO f;
            -- Those are mostly claims and finishes, which end at once.
            FOR i IN 1 .. 25 LOOP
                EXIT WHEN NOT EXISTS (SELECT 1 FROM pg_catalog.pg_locks l
                                       WHERE l.locktype = 'virtualxid' AND l.granted
                                         AND l.virtualxid::text = ANY (f.pending_vxids));
                PERFORM pg_sleep(0.002);
            END LOOP;
        END IF;
        IF EXISTS (SELECT 1 FROM pg_catalog.pg_locks l
                    WHERE l.locktype = 'virtualxid' AND l.granted
                      AND l.virtualxid::text = ANY (f.pending_vxids)) THEN
            -- Still fenced: a later call adopts it.
            EXIT;
        END IF;
        -- Adopt, in a statement (a snapshot) that starts after the fence.
        UPDATE {schema}.claim_floor c
           SET (open_slots, open_batches) = (
                   SELECT coalesce(array_agg(o.slot ORDER BY o.batch_id), '{}'),
                          coalesce(array_agg(o.batch_id ORDER BY o.batch_id), '{}')
                     FROM (SELECT b.slot, b.batch_id
                             FROM unnest(c.open_slots, c.open_batches) AS l(slot, batch_id)
                             JOIN {schema}.claim_batches b
                               ON b.slot = l.slot AND b.batch_id = l.batch_id
                           UNION ALL
                           SELECT b.slot, b.batch_id
                             FROM {schema}.claim_batches b
                            WHERE b.batch_id >= c.floor AND b.batch_id < c.pending_floor) o
                    WHERE NOT EXISTS (SELECT 1 FROM {schema}.claim_closures x
                                       WHERE x.slot = o.slot AND x.batch_id = o.batch_id
                                         AND x.open_after = 0)),
               floor = c.pending_floor, pending_floor = NULL, pending_vxids = NULL,
               moved_at = now()
         RETURNING c.* INTO f;
        -- An earlier call's proposal adopted: go round once for a new one.
        EXIT WHEN v_fresh;
    END LOOP;
    RETURN f.floor;
END
$fn$;
$awa_template$)
ON CONFLICT (name) DO UPDATE SET ord = EXCLUDED.ord, body = EXCLUDED.body;
INSERT INTO awa.substrate_functions (name, ord, body) VALUES ('dlq_retry', 25, $awa_template$-- {schema}.dlq_retry(job_id, queue, all): put dead-lettered jobs back as
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
INSERT INTO awa.substrate_functions (name, ord, body) VALUES ('failure_retry', 31, $awa_template$-- {schema}.failure_retry(job_ids): put failed or cancelled jobs back as
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
INSERT INTO awa.substrate_functions (name, ord, body) VALUES ('history_retire_slot', 32, $awa_template$-- {schema}.history_retire_slot(slot): move queue-ring slot `slot`'s count
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
INSERT INTO awa.substrate_functions (name, ord, body) VALUES ('job_body', 30, $awa_template$-- {schema}.job_body(kind, args, priority, max_attempts, created_at, metadata):
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
INSERT INTO awa.substrate_functions (name, ord, body) VALUES ('jobs', 26, $awa_template$-- The read views of live work (issue 33: priced by the work there is).
-- Each reads what is live, never what the rings retain (claimed entries
-- stay in their queue slot until it is truncated, closed claim batches in
-- theirs), in plans whose estimates stay far below jit_above_cost:
--   lane_entries      per lane (lane_heads), its entries past its head
--                     through the lane index, one range per queue slot;
--                     each reader probes the tombstones' primary key per
--                     entry it keeps (a scalar subquery, which the planner
--                     never turns into a join over every tombstone; LIMIT 1
--                     prices it as the one partition it reads)
--   open_batch_items  the open items of the claim batches claim_floor
--                     lists and of those claimed from its floor on, never
--                     the closed batches below it
--   live_job_states   every live job's id, queue, state and `at`: what the
--                     counting reads (health, stats, pending, storage
--                     status) need, with no body read for a running job
--   live_jobs         every live job with its body: one probe of the lane
--                     index per running job
-- So a read costs O(lanes + live jobs + batches claimed since the leader's
-- last health pass), whatever history is kept. For operators and tests;
-- the hot path never reads them.

-- {schema}.lane_entries: the ready entries past their lane's head, every
-- entry column; those a tombstone names were cancelled (or relocated: the
-- old copy), the others are the available jobs. OFFSET 0 keeps each lane's
-- range inside its lateral subquery (pulled up, it became a hash join over
-- every entry of every slot). The second bound, the sequence's last
-- position, never cuts (every visible entry's position was drawn before it
-- is read) but makes the estimate that of a range between two values
-- instead of a third of each slot. The lane's columns are lane_heads' own,
-- so a filter on queue reaches lane_heads (the subquery's are out of reach
-- behind the fence); other filters apply to each lane's rows.
CREATE OR REPLACE VIEW {schema}.lane_entries AS
SELECT e.slot, h.queue, h.priority, h.shard, e.lane_seq, e.job_id, e.kind, e.args, e.attempt,
       e.max_attempts, e.run_lease, e.created_at, e.ready_at, e.unique_key, e.metadata,
       e.attempts
  FROM {schema}.lane_heads h
 CROSS JOIN LATERAL (
        SELECT e.* FROM {schema}.ready_entries e
         WHERE e.queue = h.queue AND e.priority = h.priority AND e.shard = h.shard
           AND e.lane_seq > h.head_seq
           AND e.lane_seq <= (SELECT s.last_value FROM {schema}.ready_seq s)
        OFFSET 0) e;

-- {schema}.open_batch_items: every open item of a claim batch (no closure
-- link lists it), with what its batch says of it: running, or buffered
-- when its worker lists it in worker_buffers (claimed, waiting in the
-- worker's local buffer, not started; the worker rewrites that row at most
-- once a second, so the split is true to about a second). Batches below
-- claim_floor's floor are read only when the floor lists them as open;
-- from the floor on, every batch (claim_batches_batch_idx; the second
-- bound never cuts, as above). A batch's links are read once.
CREATE OR REPLACE VIEW {schema}.open_batch_items AS
SELECT u.job_id, b.queue,
       CASE WHEN u.job_id = ANY (w.job_ids) THEN 'buffered' ELSE 'running' END AS state,
       b.claimed_at, b.instance_id, b.slot AS claim_slot, b.batch_id, u.item::integer AS item,
       u.run_lease, u.attempt, u.ready_slot, u.ready_seq, u.priority, u.shard
  FROM (-- Each listed batch by its primary key (LATERAL + LIMIT: a probe,
        -- never a join over every batch).
        SELECT b.* FROM {schema}.claim_floor f
         CROSS JOIN LATERAL unnest(f.open_slots, f.open_batches) AS o(slot, batch_id)
         CROSS JOIN LATERAL (
                SELECT b.* FROM {schema}.claim_batches b
                 WHERE b.slot = o.slot AND b.batch_id = o.batch_id
                 LIMIT 1) b
        UNION ALL
        -- (No floor row, were it ever deleted: every batch.)
        SELECT b.* FROM {schema}.claim_batches b
         WHERE b.batch_id >= coalesce((SELECT f.floor FROM {schema}.claim_floor f), 0)
           AND b.batch_id <= (SELECT s.last_value FROM {schema}.claim_batch_seq s)) b
 CROSS JOIN LATERAL (
        SELECT coalesce(array_agg(x.item), '{}') AS items
          FROM {schema}.claim_closures c
         CROSS JOIN LATERAL unnest(c.items) AS x(item)
         WHERE c.slot = b.slot AND c.batch_id = b.batch_id) c
 CROSS JOIN LATERAL unnest(b.job_ids, b.run_leases, b.attempts, b.ready_slots, b.ready_seqs,
                           b.priorities, b.shards)
       WITH ORDINALITY AS u(job_id, run_lease, attempt, ready_slot, ready_seq, priority, shard, item)
  LEFT JOIN {schema}.worker_buffers w ON w.instance_id = b.instance_id
 WHERE NOT (u.item = ANY (c.items));

-- {schema}.live_job_states: every non-terminal job's id, queue, state and
-- `at` (when it became runnable, was claimed or is due), without reading a
-- running job's body. States as live_jobs has them.
CREATE OR REPLACE VIEW {schema}.live_job_states AS
SELECT e.job_id AS id, e.queue, 'available'::text AS state, e.ready_at AS at
  FROM {schema}.lane_entries e
 WHERE (SELECT true FROM {schema}.ready_tombstones t
         WHERE t.slot = e.slot AND t.job_id = e.job_id AND t.lane_seq = e.lane_seq
         LIMIT 1) IS NULL
UNION ALL
SELECT i.job_id, i.queue, i.state, i.claimed_at
  FROM {schema}.open_batch_items i
UNION ALL
SELECT p.job_id, p.queue,
       CASE WHEN EXISTS (SELECT 1 FROM {schema}.worker_buffers w
                          WHERE w.instance_id = p.instance_id AND p.job_id = ANY (w.job_ids))
            THEN 'buffered' ELSE 'running' END,
       p.claimed_at
  FROM {schema}.parked_attempts p
UNION ALL
SELECT d.job_id, d.queue,
       CASE d.reason WHEN 'retry' THEN 'retryable' WHEN 'released' THEN 'available' ELSE d.reason END,
       d.run_at
  FROM {schema}.deferred_jobs d;

-- {schema}.live_jobs / {schema}.jobs: every non-terminal job (live_jobs)
-- or every job (jobs) the substrate knows, with the state the planes
-- together give it.
--   available      ready entry past its lane head, not tombstoned
--   running        an open item of a claim batch (no closure link lists
--                  it), or a parked attempt, whose worker does not list it
--                  in worker_buffers (its handler has started)
--   buffered       the same, listed in its worker's worker_buffers row
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
  FROM {schema}.lane_entries e
 WHERE (SELECT true FROM {schema}.ready_tombstones t
         WHERE t.slot = e.slot AND t.job_id = e.job_id AND t.lane_seq = e.lane_seq
         LIMIT 1) IS NULL
UNION ALL
SELECT i.job_id, i.queue, e.kind, e.args, e.priority, i.state, i.attempt, e.max_attempts,
       i.run_lease, e.created_at, i.claimed_at, NULL, e.metadata, e.attempts, i.instance_id
  FROM {schema}.open_batch_items i
  -- LATERAL + LIMIT: one index probe per item, whatever filters a caller adds.
 CROSS JOIN LATERAL (
        SELECT e.* FROM {schema}.ready_entries e
         WHERE e.slot = i.ready_slot AND e.queue = i.queue AND e.priority = i.priority
           AND e.shard = i.shard AND e.lane_seq = i.ready_seq AND e.job_id = i.job_id
         LIMIT 1) e
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
INSERT INTO awa.substrate_functions (name, ord, body) VALUES ('jobs_page', 27, $awa_template$-- {schema}.jobs_page(queue, state, kind, args, before, limit): the rows of
-- the `jobs` view a list shows, newest (highest id) first: at most `limit`
-- jobs with an id below `before` (NULL: from the newest), each filter NULL
-- for any (args: jsonb containment). What list_jobs.sql and
-- list_jobs_page.sql read, instead of ordering the whole view, whose
-- terminal history (every completion the rings retain, one probe of the
-- lane index each) cost seconds to sort (17 s for a page of 50 after a
-- million completions).
--
-- Live jobs (bounded by live work): every live job's id, queue, state and
-- `at` from live_jobs' parts (lane_entries, open_batch_items, the parked
-- and deferred rows), newest first, the tombstones of waiting entries
-- probed on that order until the page is full, and only the page's bodies
-- read; with a filter on kind or args, every live job's body (live_jobs).
-- Terminal history and dead letters are read through
-- their id indexes, in a window of ids [lo, before) that starts just below
-- the newest id (awa.job_id_seq, through pg_sequences, which USAGE is
-- enough for) and widens eightfold until it holds `limit` matching jobs or
-- reaches id 1: every job newer than lo is in the window, so the newest
-- `limit` of it are the newest of all. done_batches rows are found by the
-- id range they cover (done_batches_jobs_idx), done_entries,
-- failure_entries and dlq_entries by their job id; only the jobs returned
-- are hydrated from their body (a completion's is in its ready slot). So a
-- page costs its live jobs plus what its window holds: the newest page
-- reads the last few completions, whatever is retained. A filter that
-- matches little (a kind, args) widens the window until it has found a
-- page, as far as the history goes.
-- Retired slots are left out, as terminal_jobs does. STABLE: every
-- statement sees the caller's snapshot. Generic plans: each statement is
-- planned once per session (planning one over every partition of the
-- rings costs more than running it); jit = off: their estimates follow
-- the windows' guesses, not what a window holds.
--
-- Bounds (SQLSTATE 22023, before anything is read): limit within
-- awa_core::bounds::LIST_LIMIT, 1 to 10000.
CREATE OR REPLACE FUNCTION {schema}.jobs_page(
    p_queue text, p_state text, p_kind text, p_args jsonb, p_before bigint, p_limit integer
) RETURNS SETOF {schema}.jobs LANGUAGE plpgsql STABLE ROWS 50
SET plan_cache_mode = force_generic_plan SET jit = off AS $fn$
DECLARE
    v_newest bigint;
    v_lo     bigint;
    v_span   bigint;
    v_found  integer := 0;
    v_live   boolean := p_state IS NULL
                        OR p_state NOT IN ('completed', 'failed', 'cancelled', 'dead_lettered');
    v_done   boolean := p_state IS NULL
                        OR p_state IN ('completed', 'failed', 'cancelled', 'dead_lettered');
BEGIN
    IF p_limit IS NULL OR p_limit NOT BETWEEN 1 AND 10000 THEN
        RAISE EXCEPTION 'jobs_page: limit must be 1 to 10000 (got %)', coalesce(p_limit::text, 'NULL')
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'A page holds 1 to 10000 jobs (awa_core::bounds::LIST_LIMIT); page on with `before`.';
    END IF;
    IF v_done THEN
        v_newest := coalesce(p_before - 1,
                             (SELECT s.last_value FROM pg_catalog.pg_sequences s
                               WHERE s.schemaname = 'awa' AND s.sequencename = 'job_id_seq'));
        v_span := greatest(p_limit, 16)::bigint * 4;
        WHILE v_newest IS NOT NULL LOOP
            v_lo := greatest(v_newest - v_span + 1, 1);
            SELECT count(*) INTO v_found FROM (
                SELECT 1
                  FROM (SELECT d.job_id AS id
                          FROM {schema}.done_entries d
                         WHERE d.job_id >= v_lo AND (p_before IS NULL OR d.job_id < p_before)
                           AND (p_queue IS NULL OR d.queue = p_queue)
                           AND (p_state IS NULL OR d.state = p_state)
                           AND (p_kind IS NULL OR d.body ->> 'kind' = p_kind)
                           AND (p_args IS NULL OR d.body -> 'args' @> p_args)
                           AND NOT EXISTS (SELECT 1 FROM {schema}.ring_retirements x
                                            WHERE x.ring = 'queue' AND x.slot = d.slot)
                        UNION ALL
                        SELECT u.job_id
                          FROM {schema}.done_batches b
                         CROSS JOIN LATERAL unnest(b.job_ids, b.ready_seqs, b.priorities, b.shards)
                               AS u(job_id, ready_seq, priority, shard)
                         WHERE int8range(b.lo_job_id, b.hi_job_id, '[]') && int8range(v_lo, p_before)
                           AND u.job_id >= v_lo AND (p_before IS NULL OR u.job_id < p_before)
                           AND (p_queue IS NULL OR b.queue = p_queue)
                           AND (p_state IS NULL OR p_state = 'completed')
                           AND NOT EXISTS (SELECT 1 FROM {schema}.ring_retirements x
                                            WHERE x.ring = 'queue' AND x.slot = b.slot)
                           -- kind and args are in the body: looked up only
                           -- when asked for.
                           AND (p_kind IS NULL AND p_args IS NULL
                                OR (SELECT true FROM {schema}.ready_entries r
                                     WHERE r.slot = b.slot AND r.queue = b.queue
                                       AND r.priority = u.priority AND r.shard = u.shard
                                       AND r.lane_seq = u.ready_seq AND r.job_id = u.job_id
                                       AND (p_kind IS NULL OR r.kind = p_kind)
                                       AND (p_args IS NULL OR r.args @> p_args)
                                     LIMIT 1))
                        UNION ALL
                        SELECT f.job_id
                          FROM {schema}.failure_entries f
                         WHERE f.job_id >= v_lo AND (p_before IS NULL OR f.job_id < p_before)
                           AND (p_queue IS NULL OR f.queue = p_queue)
                           AND (p_state IS NULL OR f.state = p_state)
                           AND (p_kind IS NULL OR f.kind = p_kind)
                           AND (p_args IS NULL OR f.args @> p_args)
                        UNION ALL
                        SELECT q.job_id
                          FROM {schema}.dlq_entries q
                         WHERE q.job_id >= v_lo AND (p_before IS NULL OR q.job_id < p_before)
                           AND (p_queue IS NULL OR q.queue = p_queue)
                           AND (p_state IS NULL OR p_state = 'dead_lettered')
                           AND (p_kind IS NULL OR q.kind = p_kind)
                           AND (p_args IS NULL OR q.args @> p_args)) w
                 LIMIT p_limit) n;
            EXIT WHEN v_found >= p_limit OR v_lo = 1;
            v_span := least(v_span, v_newest) * 8;
        END LOOP;
    END IF;

    RETURN QUERY
    SELECT r.* FROM (
        -- Live jobs with a filter on kind or args: every row's body.
        (SELECT l.* FROM {schema}.live_jobs l
          WHERE v_live AND (p_kind IS NOT NULL OR p_args IS NOT NULL)
            AND (p_queue IS NULL OR l.queue = p_queue) AND (p_state IS NULL OR l.state = p_state)
            AND (p_kind IS NULL OR l.kind = p_kind) AND (p_args IS NULL OR l.args @> p_args)
            AND (p_before IS NULL OR l.id < p_before)
          ORDER BY l.id DESC
          LIMIT p_limit)
        UNION ALL
        -- Live jobs otherwise: live_jobs' branches, newest first by what
        -- each already has at hand, then the tombstone probe of waiting
        -- entries on that order until the page is full (above the OFFSET 0
        -- fence, so it is not run for every entry before the sort), then
        -- the bodies of the page's entries and claimed jobs.
        (SELECT k.id, k.queue,
                CASE WHEN k.src = 'row' THEN k.kind ELSE e.kind END,
                CASE WHEN k.src = 'row' THEN k.args ELSE e.args END,
                k.priority, k.state,
                CASE WHEN k.src = 'entry' THEN e.attempt ELSE k.attempt END,
                CASE WHEN k.src = 'row' THEN k.max_attempts ELSE e.max_attempts END,
                CASE WHEN k.src = 'entry' THEN e.run_lease ELSE k.run_lease END,
                CASE WHEN k.src = 'row' THEN k.created_at ELSE e.created_at END,
                k.at, k.last_error,
                CASE WHEN k.src = 'row' THEN k.metadata ELSE e.metadata END,
                CASE WHEN k.src = 'row' THEN k.attempts ELSE e.attempts END,
                k.holder
           FROM (SELECT c.* FROM (
                     SELECT x.* FROM (
                         SELECT e.job_id AS id, e.queue, 'available'::text AS state,
                                e.ready_at AS at, NULL::uuid AS holder, NULL::bigint AS run_lease,
                                NULL::integer AS attempt, NULL::text AS last_error,
                                NULL::text AS kind, NULL::jsonb AS args, e.priority,
                                NULL::integer AS max_attempts, NULL::timestamptz AS created_at,
                                NULL::jsonb AS metadata, NULL::jsonb AS attempts,
                                'entry'::text AS src, e.slot, e.shard, e.lane_seq
                           FROM {schema}.lane_entries e
                          WHERE (p_queue IS NULL OR e.queue = p_queue)
                            AND (p_state IS NULL OR p_state = 'available')
                            AND (p_before IS NULL OR e.job_id < p_before)
                         UNION ALL
                         SELECT i.job_id, i.queue, i.state, i.claimed_at, i.instance_id,
                                i.run_lease, i.attempt, NULL, NULL, NULL, i.priority, NULL, NULL,
                                NULL, NULL, 'item', i.ready_slot, i.shard, i.ready_seq
                           FROM {schema}.open_batch_items i
                          WHERE (p_queue IS NULL OR i.queue = p_queue)
                            AND (p_state IS NULL OR i.state = p_state)
                            AND (p_before IS NULL OR i.job_id < p_before)
                         UNION ALL
                         SELECT l.id, l.queue, l.state, l.at, l.holder, l.run_lease, l.attempt,
                                l.last_error, l.kind, l.args, l.priority, l.max_attempts,
                                l.created_at, l.metadata, l.attempts, 'row', NULL, NULL, NULL
                           FROM (SELECT p.job_id AS id, p.queue,
                                        CASE WHEN EXISTS (SELECT 1 FROM {schema}.worker_buffers w
                                                           WHERE w.instance_id = p.instance_id
                                                             AND p.job_id = ANY (w.job_ids))
                                             THEN 'buffered' ELSE 'running' END AS state,
                                        p.claimed_at AS at, p.instance_id AS holder, p.run_lease,
                                        p.attempt, NULL::text AS last_error, p.kind, p.args,
                                        p.priority, p.max_attempts, p.created_at, p.metadata,
                                        p.attempts
                                   FROM {schema}.parked_attempts p
                                 UNION ALL
                                 SELECT d.job_id, d.queue,
                                        CASE d.reason WHEN 'retry' THEN 'retryable'
                                                      WHEN 'released' THEN 'available'
                                                      ELSE d.reason END,
                                        d.run_at, NULL, d.run_lease, d.attempt, d.last_error,
                                        d.kind, d.args, d.priority, d.max_attempts, d.created_at,
                                        d.metadata, d.attempts
                                   FROM {schema}.deferred_jobs d) l
                          WHERE (p_queue IS NULL OR l.queue = p_queue)
                            AND (p_state IS NULL OR l.state = p_state)
                            AND (p_before IS NULL OR l.id < p_before)) x
                      WHERE v_live AND p_kind IS NULL AND p_args IS NULL
                      ORDER BY x.id DESC
                     OFFSET 0) c
                  WHERE c.src <> 'entry'
                     OR (SELECT true FROM {schema}.ready_tombstones t
                          WHERE t.slot = c.slot AND t.job_id = c.id AND t.lane_seq = c.lane_seq
                          LIMIT 1) IS NULL
                  LIMIT p_limit) k
           LEFT JOIN LATERAL (
                 SELECT e.* FROM {schema}.ready_entries e
                  WHERE k.src <> 'row' AND e.slot = k.slot AND e.queue = k.queue
                    AND e.priority = k.priority AND e.shard = k.shard
                    AND e.lane_seq = k.lane_seq AND e.job_id = k.id
                  LIMIT 1) e ON true)
        UNION ALL
        -- The window's newest, then their bodies.
        (SELECT k.id, k.queue, coalesce(k.kind, e.kind), coalesce(k.args, e.args),
                coalesce(k.priority, e.priority), k.state, k.attempt,
                coalesce(k.max_attempts, e.max_attempts), k.run_lease,
                coalesce(k.created_at, e.created_at), k.at, k.last_error,
                CASE WHEN k.batch THEN e.metadata ELSE k.metadata END,
                CASE WHEN k.batch
                     THEN coalesce(e.attempts, '[]'::jsonb) || jsonb_build_array(jsonb_build_object(
                              'attempt', k.attempt, 'ended_at', k.at, 'outcome', 'completed'))
                     ELSE k.attempts END,
                NULL::uuid
           FROM (SELECT w.* FROM (
                     SELECT d.job_id AS id, d.queue, d.body ->> 'kind' AS kind, d.body -> 'args' AS args,
                            (d.body ->> 'priority')::smallint AS priority, d.state, d.attempt,
                            (d.body ->> 'max_attempts')::integer AS max_attempts, d.run_lease,
                            (d.body ->> 'created_at')::timestamptz AS created_at, d.finalized_at AS at,
                            d.last_error, d.body -> 'metadata' AS metadata, d.attempts,
                            false AS batch, NULL::integer AS slot, NULL::smallint AS shard,
                            NULL::bigint AS ready_seq
                       FROM {schema}.done_entries d
                      WHERE v_done AND d.job_id >= v_lo AND (p_before IS NULL OR d.job_id < p_before)
                        AND (p_queue IS NULL OR d.queue = p_queue)
                        AND (p_state IS NULL OR d.state = p_state)
                        AND (p_kind IS NULL OR d.body ->> 'kind' = p_kind)
                        AND (p_args IS NULL OR d.body -> 'args' @> p_args)
                        AND NOT EXISTS (SELECT 1 FROM {schema}.ring_retirements x
                                         WHERE x.ring = 'queue' AND x.slot = d.slot)
                     UNION ALL
                     SELECT u.job_id, b.queue, NULL, NULL, u.priority, 'completed', u.attempt, NULL,
                            u.run_lease, NULL, b.finalized_at, NULL, NULL, NULL,
                            true, b.slot, u.shard, u.ready_seq
                       FROM {schema}.done_batches b
                      CROSS JOIN LATERAL unnest(b.job_ids, b.run_leases, b.attempts, b.ready_seqs,
                                                b.priorities, b.shards)
                            AS u(job_id, run_lease, attempt, ready_seq, priority, shard)
                      WHERE v_done
                        AND int8range(b.lo_job_id, b.hi_job_id, '[]') && int8range(v_lo, p_before)
                        AND u.job_id >= v_lo AND (p_before IS NULL OR u.job_id < p_before)
                        AND (p_queue IS NULL OR b.queue = p_queue)
                        AND (p_state IS NULL OR p_state = 'completed')
                        AND NOT EXISTS (SELECT 1 FROM {schema}.ring_retirements x
                                         WHERE x.ring = 'queue' AND x.slot = b.slot)
                        AND (p_kind IS NULL AND p_args IS NULL
                             OR (SELECT true FROM {schema}.ready_entries r
                                  WHERE r.slot = b.slot AND r.queue = b.queue
                                    AND r.priority = u.priority AND r.shard = u.shard
                                    AND r.lane_seq = u.ready_seq AND r.job_id = u.job_id
                                    AND (p_kind IS NULL OR r.kind = p_kind)
                                    AND (p_args IS NULL OR r.args @> p_args)
                                  LIMIT 1))
                     UNION ALL
                     SELECT f.job_id, f.queue, f.kind, f.args, f.priority, f.state, f.attempt,
                            f.max_attempts, f.run_lease, f.created_at, f.finalized_at, f.last_error,
                            f.metadata, f.attempts, false, NULL, NULL, NULL
                       FROM {schema}.failure_entries f
                      WHERE v_done AND f.job_id >= v_lo AND (p_before IS NULL OR f.job_id < p_before)
                        AND (p_queue IS NULL OR f.queue = p_queue)
                        AND (p_state IS NULL OR f.state = p_state)
                        AND (p_kind IS NULL OR f.kind = p_kind)
                        AND (p_args IS NULL OR f.args @> p_args)
                     UNION ALL
                     SELECT q.job_id, q.queue, q.kind, q.args, q.priority, 'dead_lettered', q.attempt,
                            q.max_attempts, q.run_lease, q.created_at, q.dead_at, q.last_error,
                            q.metadata, q.attempts, false, NULL, NULL, NULL
                       FROM {schema}.dlq_entries q
                      WHERE v_done AND q.job_id >= v_lo AND (p_before IS NULL OR q.job_id < p_before)
                        AND (p_queue IS NULL OR q.queue = p_queue)
                        AND (p_state IS NULL OR p_state = 'dead_lettered')
                        AND (p_kind IS NULL OR q.kind = p_kind)
                        AND (p_args IS NULL OR q.args @> p_args)) w
                  ORDER BY w.id DESC
                  LIMIT p_limit) k
           -- A completion's body, one probe of the lane index (LATERAL +
           -- LIMIT, as terminal_jobs).
           LEFT JOIN LATERAL (
                 SELECT e.* FROM {schema}.ready_entries e
                  WHERE k.batch AND e.slot = k.slot AND e.queue = k.queue
                    AND e.priority = k.priority AND e.shard = k.shard
                    AND e.lane_seq = k.ready_seq AND e.job_id = k.id
                  LIMIT 1) e ON true)
    ) r
    ORDER BY r.id DESC
    LIMIT p_limit;
END
$fn$;
$awa_template$)
ON CONFLICT (name) DO UPDATE SET ord = EXCLUDED.ord, body = EXCLUDED.body;
INSERT INTO awa.substrate_functions (name, ord, body) VALUES ('ring_helpers', 33, $awa_template$-- Small helpers of ring_rotate and ring_prune.
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
INSERT INTO awa.substrate_functions (name, ord, body) VALUES ('ring_prune', 35, $awa_template$-- {schema}.ring_prune(ring, lock_timeout_ms, rotate_interval): reclaim a
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
-- For the queue ring, every call also moves ready_sealed first (ready_seal).
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
    -- The queue ring's seal moves with each pass (ready_seal), before the
    -- pass writes anything: a proposal's fence is the id of a transaction
    -- that had none before the check, so a pass that relocated, parked or
    -- retired something first could never propose. With the seal called
    -- last, a backlog in a slot past its retention (relocated 1,000 jobs a
    -- pass) starved the seal for backlog / 1,000 passes, and with it
    -- low_gen, the claim's bound on the slots it reads.
    IF p_ring = 'queue' THEN
        PERFORM {schema}.ready_seal();
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
            -- pg_stat_activity is read once per transaction and kept; this
            -- transaction may have read it before the marker committed
            -- (ready_seal above, or a caller), and a snapshot taken since
            -- then, older than the marker, would be missing from that copy.
            PERFORM pg_stat_clear_snapshot();
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
INSERT INTO awa.substrate_functions (name, ord, body) VALUES ('ring_rotate', 34, $awa_template$-- {schema}.ring_rotate(ring, by): move a ring's current slot to the next one.
-- Returns 'rotated', 'idle' (the current slot holds nothing written since
-- the ring moved onto it, see ring_slot_fresh: nothing to seal),
-- 'incoming_not_empty' (the next slot still holds rows or awaits its
-- truncation: rotating onto it would mix live data into the write slot),
-- or 'lost_race' (another rotator appended this generation first; the
-- ledger's primary key is the compare-and-swap, so the loser writes nothing).
-- For the queue ring, every pass also moves the seal first (ready_seal: the
-- generations no producer can write to any more), whatever the outcome.
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

    -- Before this call's own ledger row: a generation is proven sealable
    -- only from rotations every new snapshot sees, i.e. committed ones.
    IF p_ring = 'queue' THEN
        PERFORM {schema}.ready_seal();
    END IF;

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
INSERT INTO awa.substrate_functions (name, ord, body) VALUES ('routed_jobs', 28, $awa_template$-- {schema}.routed_jobs(): every job of every substrate the storage routing
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
INSERT INTO awa.substrate_functions (name, ord, body) VALUES ('storage_transfer_in', 36, $awa_template$-- {schema}.storage_transfer_in(from, limit): move up to `limit` deferred
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
$awa_template$)
ON CONFLICT (name) DO UPDATE SET ord = EXCLUDED.ord, body = EXCLUDED.body;
INSERT INTO awa.substrate_functions (name, ord, body) VALUES ('terminal_job', 29, $awa_template$-- {schema}.terminal_job(job_id): the terminal_jobs rows of one job, found
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
