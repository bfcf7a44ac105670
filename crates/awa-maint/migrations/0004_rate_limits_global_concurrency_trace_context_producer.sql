-- Awa migration 4: rate limits global concurrency trace context producer
--
-- Drafted by `cargo xtask migration draft` (hand-written parts first, then
-- what the sources define), then reviewed. Frozen once on main: never edit
-- it, add a new step. Runs once, in one transaction, as the migrator.

-- Hand-written: limits.sql
-- Pending upgrade for branch `limits` (issue 23: rate limits and global
-- concurrency, docs/adr/0015). Runs once, in one transaction, as the
-- migrator; the lead folds it into the next numbered migration.
--
-- What it does not need to say, because the migration's refresh derives
-- it: the substrate tables limit_holds and limit_rates (created by
-- awa.install_exec_plane, which the refresh re-runs on every substrate),
-- the runtime functions claim, limit_take and limit_record (templates),
-- and the runtime role's grants on the new tables (the refresh re-grants
-- the matrix, which classifies them).

-- 1. The limits themselves, database-wide beside queue_meta (the same
--    text as control_schema.sql).
CREATE TABLE IF NOT EXISTS awa.queue_limits (
    queue           text        NOT NULL,
    kind            text        NOT NULL DEFAULT '',
    rate_max        integer     CONSTRAINT queue_limits_rate_max_in_range
                                CHECK (rate_max BETWEEN 1 AND 100000),
    rate_period     interval    CONSTRAINT queue_limits_rate_period_in_range
                                CHECK (rate_period BETWEEN interval '1 second' AND interval '1 day'),
    rate_by         text[]      CONSTRAINT queue_limits_rate_by_path
                                CHECK (cardinality(rate_by) BETWEEN 1 AND 8),
    concurrency_max integer     CONSTRAINT queue_limits_concurrency_in_range
                                CHECK (concurrency_max BETWEEN 1 AND 100000),
    concurrency_by  text[]      CONSTRAINT queue_limits_concurrency_by_path
                                CHECK (cardinality(concurrency_by) BETWEEN 1 AND 8),
    updated_at      timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (queue, kind),
    CONSTRAINT queue_limits_rate_whole CHECK ((rate_max IS NULL) = (rate_period IS NULL)),
    CONSTRAINT queue_limits_rate_by_needs_rate CHECK (rate_by IS NULL OR rate_max IS NOT NULL),
    CONSTRAINT queue_limits_by_needs_concurrency
        CHECK (concurrency_by IS NULL OR concurrency_max IS NOT NULL)
);

-- 2. The substrate state tables, in every substrate, in case the lead's
--    step runs before the refresh (the refresh would create them too;
--    IF NOT EXISTS makes the second a no-op). Same text as
--    install_exec_plane.sql.
DO $limits$
DECLARE
    s record;
BEGIN
    FOR s IN SELECT n.nspname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
              WHERE c.relname = 'substrate_info' AND c.relkind = 'r' LOOP
        EXECUTE format($ddl$
            CREATE TABLE IF NOT EXISTS %1$I.limit_holds (
                queue      text    NOT NULL,
                kind       text    NOT NULL,
                part       text    NOT NULL,
                job_id     bigint  NOT NULL,
                run_lease  bigint  NOT NULL,
                claim_slot integer NOT NULL,
                batch_id   bigint  NOT NULL,
                item       integer NOT NULL,
                PRIMARY KEY (queue, kind, part, job_id, run_lease)
            )$ddl$, s.nspname);
        EXECUTE format($ddl$
            CREATE TABLE IF NOT EXISTS %1$I.limit_rates (
                queue text          NOT NULL,
                kind  text          NOT NULL,
                part  text          NOT NULL,
                at    timestamptz[] NOT NULL,
                n     integer[]     NOT NULL,
                PRIMARY KEY (queue, kind, part)
            ) WITH (fillfactor = 50)$ddl$, s.nspname);
    END LOOP;
END
$limits$;

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

DO $drop$
DECLARE s record;
BEGIN
    FOR s IN SELECT n.nspname FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
              WHERE c.relname = 'substrate_info' AND c.relkind = 'r' LOOP
        EXECUTE format('DROP FUNCTION IF EXISTS %I.enqueue(p_queues text[], p_kinds text[], p_args jsonb[], p_priorities smallint[], p_run_at timestamp with time zone[], p_max_attempts integer[], p_unique_keys text[], p_metadata jsonb[], p_unique jsonb[])', s.nspname);
    END LOOP;
END
$drop$;

-- Runtime function templates, as the sources define them.
INSERT INTO awa.substrate_functions (name, ord, body) VALUES ('attempt_push', 17, $awa_template$-- {schema}.attempt_push(prior, attempt, outcome, next_state, started_at,
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
INSERT INTO awa.substrate_functions (name, ord, body) VALUES ('cancel_job', 20, $awa_template$-- {schema}.cancel_job(job_id): cancel a job wherever it is.
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
INSERT INTO awa.substrate_functions (name, ord, body) VALUES ('claim', 14, $awa_template$-- {schema}.claim(queue, limit, cand_seq, cand_xid, instance): claim up to
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
-- Limits (docs/adr/0015): a queue with a row in awa.queue_limits takes
-- through limit_take (ready_take's rows cut to what its rate limits and
-- global concurrency admit, under the queue's limit lock) and records what
-- it admitted through limit_record; its batch's claimed_at is the
-- admission instant. Any other queue pays one probe of that table's
-- primary key, in the statement that reads its settings.
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
    v_batch      bigint;
    v_slots      integer[] := '{}';  -- the distinct queue slots of the bodies
    v_ids        bigint[] := '{}';
    v_leases     bigint[] := '{}';
    v_attempts   integer[] := '{}';
    v_rslots     integer[] := '{}';
    v_seqs       bigint[] := '{}';
    v_prios      smallint[] := '{}';
    v_shards     smallint[] := '{}';
    v_keyed      integer[];
    v_limited    boolean;
    v_at         timestamptz;  -- a limited claim's admission instant
    v_taken      jsonb;        -- a limited claim's rows (limit_take)
    t            record;
BEGIN
    IF p_limit IS NULL OR p_limit NOT BETWEEN 1 AND 1024 THEN
        RAISE EXCEPTION 'claim limit must be 1 to 1024 (got %)', coalesce(p_limit::text, 'NULL')
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'Claim at most a claim batch (awa_core::bounds::CLAIM_BATCH) per call.';
    END IF;
    SELECT m.priority_aging_interval, m.paused,
           (SELECT l.slot FROM {schema}.ring_ledger l
             WHERE l.ring = 'claim' ORDER BY l.generation DESC LIMIT 1),
           EXISTS (SELECT 1 FROM awa.queue_limits q WHERE q.queue = p_queue)
      INTO v_aging, v_paused, v_claim_slot, v_limited
      FROM (SELECT 1) one
      LEFT JOIN awa.queue_meta m ON m.queue = p_queue;
    IF v_limited AND NOT coalesce(v_paused, false) THEN
        SELECT x.admitted_at, x.taken INTO v_at, v_taken
          FROM {schema}.limit_take(p_queue, p_limit, p_cand_seq, p_cand_xid, v_aging) x;
    END IF;
    IF coalesce(v_paused, false) OR (v_limited AND v_taken IS NULL) THEN
        RETURN QUERY SELECT NULL::bigint, NULL::bigint, NULL::integer, NULL::bigint, NULL::integer,
                            NULL::integer, NULL::bigint,
                            NULL::text, NULL::jsonb, NULL::smallint, NULL::integer, NULL::integer,
                            NULL::timestamptz, NULL::timestamptz, NULL::text, NULL::jsonb,
                            p_cand_seq, p_cand_xid, false;
        RETURN;
    END IF;

    -- ready_take's rows, in its order: item i of the batch is the i-th job.
    -- Each is returned as it comes (a set-returning function's rows reach
    -- the caller only when it returns, so after the batch row below is
    -- written); the batch's arrays are built on the way.
    -- (A limited claim's rows come from limit_take instead; the branch not
    -- taken is not run.)
    FOR t IN
        SELECT * FROM {schema}.ready_take(p_queue, p_limit, p_cand_seq, p_cand_xid, v_aging)
         WHERE NOT v_limited
        UNION ALL
        SELECT * FROM jsonb_to_recordset(v_taken) AS x(
                   job_id bigint, slot integer, lane_seq bigint, kind text, args jsonb,
                   priority smallint, attempt integer, max_attempts integer, run_lease bigint,
                   created_at timestamptz, ready_at timestamptz, unique_key text, metadata jsonb,
                   frontier bigint, next_seq bigint, next_xid xid8, shard smallint)
         WHERE v_limited
    LOOP
        next_seq := t.next_seq;
        next_xid := t.next_xid;
        waiting := coalesce(t.frontier < t.next_seq, false);
        IF t.job_id IS NULL THEN
            -- No job: only the frontier candidate.
            job_id := NULL; run_lease := NULL; claim_slot := NULL; batch_id := NULL; item := NULL;
            ready_slot := NULL; ready_seq := NULL; kind := NULL; args := NULL; priority := NULL;
            attempt := NULL; max_attempts := NULL; created_at := NULL; ready_at := NULL;
            unique_key := NULL; metadata := NULL;
            RETURN NEXT;
            CONTINUE;
        END IF;
        IF v_batch IS NULL THEN
            v_batch := nextval('{schema}.claim_batch_seq');
        END IF;
        v_ids := v_ids || t.job_id;
        v_leases := v_leases || (t.run_lease + 1);
        v_attempts := v_attempts || (t.attempt + 1);
        v_rslots := v_rslots || t.slot;
        v_seqs := v_seqs || t.lane_seq;
        v_prios := v_prios || t.priority;
        v_shards := v_shards || t.shard;
        IF NOT (t.slot = ANY (v_slots)) THEN
            v_slots := v_slots || t.slot;
        END IF;
        IF t.unique_key IS NOT NULL THEN
            v_keyed := coalesce(v_keyed, '{}') || cardinality(v_ids);
        END IF;
        job_id := t.job_id; run_lease := t.run_lease + 1; claim_slot := v_claim_slot;
        batch_id := v_batch; item := cardinality(v_ids); ready_slot := t.slot; ready_seq := t.lane_seq;
        kind := t.kind; args := t.args; priority := t.priority; attempt := t.attempt + 1;
        max_attempts := t.max_attempts; created_at := t.created_at; ready_at := t.ready_at;
        unique_key := t.unique_key; metadata := t.metadata;
        RETURN NEXT;
    END LOOP;

    -- One batch row for all of them; nothing when nothing was taken.
    IF v_batch IS NOT NULL THEN
        INSERT INTO {schema}.claim_batches
            (slot, batch_id, queue, claimed_at, instance_id, body_slots,
             job_ids, run_leases, attempts, ready_slots, ready_seqs, priorities, shards, keyed)
        VALUES (v_claim_slot, v_batch, p_queue, coalesce(v_at, now()), p_instance, v_slots,
                v_ids, v_leases, v_attempts, v_rslots, v_seqs, v_prios, v_shards, v_keyed);
        IF v_limited THEN
            PERFORM {schema}.limit_record(p_queue, v_at, v_claim_slot, v_batch, v_taken);
        END IF;
    END IF;
END
$fn$;
$awa_template$)
ON CONFLICT (name) DO UPDATE SET ord = EXCLUDED.ord, body = EXCLUDED.body;
INSERT INTO awa.substrate_functions (name, ord, body) VALUES ('dlq_retry', 24, $awa_template$-- {schema}.dlq_retry(job_id, queue, all): put dead-lettered jobs back as
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
INSERT INTO awa.substrate_functions (name, ord, body) VALUES ('enqueue', 9, $awa_template$-- {schema}.enqueue(queues, kinds, args, priorities, run_at, max_attempts,
--                  unique_keys, metadata [, unique [, traceparent
--                  [, tracestate]]]): the public SQL producer function
-- (contract version 1; docs/sql-producer.md; the trailing arguments are
-- optional, so version-1 calls are unchanged). Arguments, result and
-- errors are those of {schema}.enqueue_local (fn_enqueue.sql), plus:
--
-- * traceparent, tracestate (optional, one per call): the producer's W3C
--   trace context. Stored in the metadata of every job of the call as
--   {"awa_trace": {"traceparent": ..., "tracestate": ...}} (tracestate
--   left out when NULL or empty), except where an element's metadata is
--   not a JSON object or already has "awa_trace". A traceparent that is
--   not version 00 (00-<32 hex>-<16 hex>-<2 hex>, ids not all zero), a
--   tracestate over 512 bytes or without a traceparent refuse the call
--   with SQLSTATE 22023 before anything is written. The stored context is
--   what the worker's span takes as its parent (awa::otel). Both NULL
--   (the default): the metadata is passed on untouched.
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
    p_unique       jsonb[] DEFAULT NULL,
    p_traceparent  text DEFAULT NULL,
    p_tracestate   text DEFAULT NULL
) RETURNS TABLE (job_id bigint, inserted boolean, scheduled boolean)
LANGUAGE plpgsql AS $fn$
DECLARE
    v_write    text;
    v_metadata jsonb[] := p_metadata;
    v_trace    jsonb;
BEGIN
    IF p_traceparent IS NOT NULL OR p_tracestate IS NOT NULL THEN
        IF p_traceparent IS NULL
           OR p_traceparent !~ '^00-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}$'
           OR substr(p_traceparent, 4, 32) = repeat('0', 32)
           OR substr(p_traceparent, 37, 16) = repeat('0', 16) THEN
            RAISE EXCEPTION 'traceparent % is not a W3C trace context of version 00',
                            coalesce(quote_literal(left(p_traceparent, 80)), 'NULL')
                USING ERRCODE = 'invalid_parameter_value',
                      HINT = 'Send 00-<32 hex trace id>-<16 hex span id>-<2 hex flags> (lower case, ids not all zero), or leave both trace arguments out.';
        END IF;
        IF octet_length(p_tracestate) > 512 THEN
            RAISE EXCEPTION 'tracestate is % bytes; at most 512 are accepted', octet_length(p_tracestate)
                USING ERRCODE = 'invalid_parameter_value',
                      HINT = 'Send the tracestate your tracer propagates (W3C: up to 32 members), or leave it out.';
        END IF;
        v_trace := jsonb_build_object('traceparent', p_traceparent);
        IF p_tracestate <> '' THEN
            v_trace := v_trace || jsonb_build_object('tracestate', p_tracestate);
        END IF;
        -- Only metadata that is an object without a context of its own.
        v_metadata := ARRAY(
            SELECT CASE WHEN i.md IS NULL OR jsonb_typeof(i.md) = 'null'
                             THEN jsonb_build_object('awa_trace', v_trace)
                        WHEN jsonb_typeof(i.md) = 'object' AND NOT i.md ? 'awa_trace'
                             THEN i.md || jsonb_build_object('awa_trace', v_trace)
                        ELSE i.md END
              FROM unnest(p_metadata) WITH ORDINALITY AS i(md, ord)
             ORDER BY i.ord);
    END IF;
    SELECT CASE WHEN t.state = 'mixed' THEN t.target_schema ELSE t.active_schema END
      INTO v_write FROM awa.storage_transition_state t;
    IF to_regnamespace(v_write) IS NOT DISTINCT FROM to_regnamespace('{schema}') THEN
        RETURN QUERY SELECT * FROM {schema}.enqueue_local(
            p_queues, p_kinds, p_args, p_priorities, p_run_at, p_max_attempts,
            p_unique_keys, v_metadata, p_unique);
    ELSE
        RETURN QUERY EXECUTE format(
            'SELECT * FROM %I.enqueue_local($1, $2, $3, $4, $5, $6, $7, $8, $9)', v_write)
            USING p_queues, p_kinds, p_args, p_priorities, p_run_at, p_max_attempts,
                  p_unique_keys, v_metadata, p_unique;
    END IF;
END
$fn$;
$awa_template$)
ON CONFLICT (name) DO UPDATE SET ord = EXCLUDED.ord, body = EXCLUDED.body;
INSERT INTO awa.substrate_functions (name, ord, body) VALUES ('enqueue_oversized', 7, $awa_template$-- {schema}.enqueue_oversized(ord, queue, kind, bytes, limit): refuse an
-- enqueue because job `ord` has `bytes` of args plus metadata (as JSON
-- text), over the substrate's max_job_bytes `limit`. Always raises SQLSTATE
-- 54000 (program_limit_exceeded); never returns.
--
-- The one wording of the refusal, shared by every enqueue path
-- ({schema}.enqueue, call_enqueue_append.sql), which
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
INSERT INTO awa.substrate_functions (name, ord, body) VALUES ('exec_park', 23, $awa_template$-- {schema}.exec_park(ring, slot, limit): move up to `limit` open attempts
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
INSERT INTO awa.substrate_functions (name, ord, body) VALUES ('exec_slot_live', 21, $awa_template$-- {schema}.exec_slot_live(ring, slot): why a ring slot still holds a live
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
INSERT INTO awa.substrate_functions (name, ord, body) VALUES ('failure_retry', 29, $awa_template$-- {schema}.failure_retry(job_ids): put failed or cancelled jobs back as
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
INSERT INTO awa.substrate_functions (name, ord, body) VALUES ('finish', 18, $awa_template$-- {schema}.finish(job_ids, run_leases, claim_slots, batch_ids, items,
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

-- finish: the guarded finish of any attempts. Two paths to the same
-- evidence, guarded by the same closure links:
--
-- * The lean path, for what a worker sends at low rates: every attempt
--   completes ('complete') and every token names the same claim slot.
--   Per batch touched, one read of the batch row and one of its links, and
--   one insert of the next link listing the items this call closes (ON
--   CONFLICT DO NOTHING: the same guard as finish_pass); then, for what it
--   closed, one done_batches row per (queue slot, queue), one count delta
--   each, and the deletes of attempt state and unique keys. Every statement
--   names the claim slot as a plain parameter, so a generic plan prunes the
--   claim ring's partitions when the executor starts instead of starting
--   a scan of each; and none of them touches a table the outcome does not
--   need (ready entries, deferred jobs, dead letters, parked attempts):
--   those are finish_pass's. It reads every batch before writing: if any
--   token does not name an open item (closed or parked, a stale lease, a
--   batch gone with its slot, a pair named twice), the whole call goes to
--   finish_pass instead, so one call still writes one count delta per
--   slot, queue and state.
-- * finish_pass for everything else, as many attempts and outcomes as the
--   call has.
--
-- Then finish_pass again for what lost a link race, each time in a new
-- statement (a new snapshot). Every round that finds contention means
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
LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan AS $fn$
#variable_conflict use_column
DECLARE
    v_n         integer := coalesce(cardinality(p_job_ids), 0);
    v_accepted  boolean[];
    v_next      text[];
    v_contended boolean[];
    v_acc       boolean[];
    v_nx        text[];
    v_todo      integer[];   -- indexes into the inputs still to decide
    v_again     integer[];
    v_round     integer := 1;
    k integer;
    m integer;
    -- the lean path
    v_slot      integer;
    v_batch     bigint;
    v_done      bigint[] := '{}';   -- batches touched, in input order
    b           record;
    v_last      integer;
    v_closed    integer[];
    v_items     integer[];
    v_sorted    boolean;
    v_mine      integer[];          -- inputs of this batch
    v_item      integer;
    v_lean      boolean;
    v_lasts     integer[] := '{}';  -- per batch in v_done: its last link
    v_open      integer[] := '{}';  -- and its items open after this call
    -- per input, from its batch row
    w_attempts  integer[];
    w_slots     integer[];
    w_seqs      bigint[];
    w_prios     smallint[];
    w_shards    smallint[];
    w_queues    text[];
    w_keyed_at  boolean[];
    -- what the lean path closed, in order
    w_ids       bigint[] := '{}';
    w_leases    bigint[] := '{}';
    w_a         integer[] := '{}';
    w_s         integer[] := '{}';
    w_q         bigint[] := '{}';
    w_p         smallint[] := '{}';
    w_h         smallint[] := '{}';
    w_u         text[] := '{}';
    w_keyed     bigint[] := '{}';
BEGIN
    IF v_n = 0 THEN
        RETURN;
    END IF;
    v_slot := p_claim_slots[1];
    v_accepted := array_fill(false, ARRAY[v_n]);
    v_next := array_fill(NULL::text, ARRAY[v_n]);
    v_todo := '{}';
    v_lean := coalesce('complete' = ALL (p_outcomes) AND v_slot = ALL (p_claim_slots), false);
    IF v_lean THEN
        -- Read every batch touched and its links; the lean path goes on only
        -- if every token names an open item, each once. Anything else (an
        -- item closed or parked, a stale lease, a batch gone with its slot,
        -- a pair named twice) is finish_pass's, for the whole call, so one
        -- call still writes one count delta per slot, queue and state.
        w_attempts := array_fill(NULL::integer, ARRAY[v_n]);
        w_slots := array_fill(NULL::integer, ARRAY[v_n]);
        w_seqs := array_fill(NULL::bigint, ARRAY[v_n]);
        w_prios := array_fill(NULL::smallint, ARRAY[v_n]);
        w_shards := array_fill(NULL::smallint, ARRAY[v_n]);
        w_queues := array_fill(NULL::text, ARRAY[v_n]);
        w_keyed_at := array_fill(false, ARRAY[v_n]);
        <<batches>>
        FOR k IN 1 .. v_n LOOP
            v_batch := p_batch_ids[k];
            CONTINUE WHEN v_batch = ANY (v_done);
            SELECT bb.queue, bb.job_ids, bb.run_leases, bb.attempts, bb.ready_slots, bb.ready_seqs,
                   bb.priorities, bb.shards, bb.keyed
              INTO b
              FROM {schema}.claim_batches bb
             WHERE bb.slot = v_slot AND bb.batch_id = v_batch;
            IF NOT FOUND THEN
                v_lean := false;
                EXIT batches;
            END IF;
            -- What the batch's links have closed, and the last link's number.
            SELECT coalesce(max(c.link), 0), coalesce(array_agg(x), '{}')
              INTO v_last, v_closed
              FROM {schema}.claim_closures c
              LEFT JOIN LATERAL unnest(c.items) AS x ON true
             WHERE c.slot = v_slot AND c.batch_id = v_batch;
            v_items := '{}';
            FOR j IN k .. v_n LOOP
                CONTINUE WHEN p_batch_ids[j] <> v_batch;
                v_item := p_items[j];
                -- Open: the item still names this attempt, no link lists it,
                -- and this call names it once.
                IF NOT coalesce(b.job_ids[v_item] = p_job_ids[j] AND b.run_leases[v_item] = p_run_leases[j]
                                AND NOT (v_item = ANY (v_closed)) AND NOT (v_item = ANY (v_items)), false) THEN
                    v_lean := false;
                    EXIT batches;
                END IF;
                v_items := v_items || v_item;
                w_attempts[j] := b.attempts[v_item];
                w_slots[j] := b.ready_slots[v_item];
                w_seqs[j] := b.ready_seqs[v_item];
                w_prios[j] := b.priorities[v_item];
                w_shards[j] := b.shards[v_item];
                w_queues[j] := b.queue;
                w_keyed_at[j] := coalesce(v_item = ANY (b.keyed), false);
            END LOOP;
            v_done := v_done || v_batch;
            v_lasts := v_lasts || v_last;
            v_open := v_open || (cardinality(b.job_ids) - cardinality(v_closed) - cardinality(v_items));
        END LOOP;
    END IF;

    IF NOT v_lean THEN
        -- finish_pass decides everything.
        v_todo := ARRAY(SELECT x.i FROM generate_series(1, v_n) AS x(i));
    ELSE
        FOR k IN 1 .. cardinality(v_done) LOOP
            v_batch := v_done[k];
            v_items := '{}';
            v_mine := '{}';
            v_sorted := true;
            FOR j IN 1 .. v_n LOOP
                CONTINUE WHEN p_batch_ids[j] <> v_batch;
                v_sorted := v_sorted AND (cardinality(v_items) = 0 OR v_items[cardinality(v_items)] < p_items[j]);
                v_items := v_items || p_items[j];
                v_mine := v_mine || j;
            END LOOP;
            IF NOT v_sorted THEN
                v_items := ARRAY(SELECT x FROM unnest(v_items) AS x ORDER BY x);
            END IF;
            -- The guard: link last + 1 of this batch, listing its items.
            INSERT INTO {schema}.claim_closures AS c (slot, batch_id, link, items, outcome, open_after)
            VALUES (v_slot, v_batch, v_lasts[k] + 1, v_items, 'completed', v_open[k])
            ON CONFLICT DO NOTHING;
            IF NOT FOUND THEN
                -- Another finisher took this link number: finish_pass decides
                -- these again, in a new statement.
                v_todo := v_todo || v_mine;
                CONTINUE;
            END IF;
            FOREACH m IN ARRAY v_mine LOOP
                v_accepted[m] := true;
                v_next[m] := 'completed';
                w_ids := w_ids || p_job_ids[m];
                w_leases := w_leases || p_run_leases[m];
                w_a := w_a || w_attempts[m];
                w_s := w_s || w_slots[m];
                w_q := w_q || w_seqs[m];
                w_p := w_p || w_prios[m];
                w_h := w_h || w_shards[m];
                w_u := w_u || w_queues[m];
                IF w_keyed_at[m] THEN
                    w_keyed := w_keyed || p_job_ids[m];
                END IF;
            END LOOP;
        END LOOP;

        IF cardinality(w_ids) > 0 THEN
            IF cardinality(w_ids) = 1 THEN
                INSERT INTO {schema}.done_batches
                    (slot, queue, lo_job_id, hi_job_id, job_ids, run_leases, attempts, ready_seqs,
                     priorities, shards)
                VALUES (w_s[1], w_u[1], w_ids[1], w_ids[1], w_ids, w_leases, w_a, w_q, w_p, w_h);
                INSERT INTO {schema}.count_deltas (slot, queue, state, delta)
                VALUES (w_s[1], w_u[1], 'completed', 1);
            ELSE
                -- One row per (queue slot, queue), as finish_pass writes it.
                INSERT INTO {schema}.done_batches
                    (slot, queue, lo_job_id, hi_job_id, job_ids, run_leases, attempts, ready_seqs,
                     priorities, shards)
                SELECT w.slot, w.queue, min(w.job_id), max(w.job_id),
                       array_agg(w.job_id ORDER BY w.job_id), array_agg(w.run_lease ORDER BY w.job_id),
                       array_agg(w.attempt ORDER BY w.job_id), array_agg(w.seq ORDER BY w.job_id),
                       array_agg(w.priority ORDER BY w.job_id), array_agg(w.shard ORDER BY w.job_id)
                  FROM unnest(w_ids, w_leases, w_a, w_s, w_q, w_p, w_h, w_u)
                       AS w(job_id, run_lease, attempt, slot, seq, priority, shard, queue)
                 GROUP BY w.slot, w.queue;
                INSERT INTO {schema}.count_deltas (slot, queue, state, delta)
                SELECT w.slot, w.queue, 'completed', count(*)
                  FROM unnest(w_s, w_u) AS w(slot, queue)
                 GROUP BY w.slot, w.queue;
            END IF;
            -- Progress and checkpoints end with the job.
            DELETE FROM {schema}.attempt_state s WHERE s.job_id = ANY (w_ids);
            IF cardinality(w_keyed) > 0 THEN
                -- A job holds at most one key, recorded under its id
                -- (job_uniques_job_idx). As in finish_pass: the key is
                -- released, unless its key spec holds it in the completed
                -- state until its period ends; then it is marked finished.
                DELETE FROM awa.job_uniques u
                 WHERE u.job_id = ANY (w_keyed)
                   AND (u.hold_until IS NULL
                        OR NOT {schema}.unique_held(u.hold_until, u.hold_states, 'completed'));
                UPDATE awa.job_uniques u SET finished_at = now()
                 WHERE u.job_id = ANY (w_keyed)
                   AND u.hold_until IS NOT NULL
                   AND {schema}.unique_held(u.hold_until, u.hold_states, 'completed');
            END IF;
        END IF;

    END IF;

    -- finish_pass for what is left: everything (general path), or what lost
    -- a link race; again while contention remains.
    WHILE cardinality(v_todo) > 0 LOOP
        IF v_round > 8 THEN
            RAISE EXCEPTION 'finish lost the race for a claim batch link % times in a row', v_round - 1
                USING ERRCODE = 'serialization_failure',
                      HINT = 'Other finishers keep closing items of the same batches; retry the call.';
        END IF;
        v_round := v_round + 1;
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
      FROM generate_series(1, v_n) AS x(i);
END
$fn$;
$awa_template$)
ON CONFLICT (name) DO UPDATE SET ord = EXCLUDED.ord, body = EXCLUDED.body;
INSERT INTO awa.substrate_functions (name, ord, body) VALUES ('heartbeat', 19, $awa_template$-- {schema}.heartbeat(job_id, run_lease, claim_slot, batch_id, item,
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
INSERT INTO awa.substrate_functions (name, ord, body) VALUES ('history_retire_slot', 30, $awa_template$-- {schema}.history_retire_slot(slot): move queue-ring slot `slot`'s count
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
INSERT INTO awa.substrate_functions (name, ord, body) VALUES ('job_body', 28, $awa_template$-- {schema}.job_body(kind, args, priority, max_attempts, created_at, metadata):
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
INSERT INTO awa.substrate_functions (name, ord, body) VALUES ('jobs', 25, $awa_template$-- {schema}.live_jobs / {schema}.jobs: every non-terminal job (live_jobs)
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
INSERT INTO awa.substrate_functions (name, ord, body) VALUES ('limit_record', 16, $awa_template$-- {schema}.limit_record(queue, admitted_at, claim_slot, batch_id, taken):
-- what a limited claim's jobs hold (docs/adr/0015). Called only by
-- {schema}.claim, after it wrote batch (claim_slot, batch_id) for the jobs
-- of `taken` (limit_take's rows, item i = the i-th job), in the same
-- transaction and under limit_take's lock.
--
-- Concurrency: one limit_holds row per job and concurrency limit it
-- counts against (its new run lease and batch item). Rate: per rate limit
-- and partition, one entry (admitted_at, jobs) appended to limit_rates,
-- the entries older than the limit's period dropped in the same write.
CREATE OR REPLACE FUNCTION {schema}.limit_record(
    p_queue       text,
    p_admitted_at timestamptz,
    p_claim_slot  integer,
    p_batch       bigint,
    p_taken       jsonb
) RETURNS void LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan AS $fn$
BEGIN
    INSERT INTO {schema}.limit_holds (queue, kind, part, job_id, run_lease, claim_slot, batch_id, item)
    SELECT p_queue, l.kind, coalesce(j.args #>> l.concurrency_by, ''), j.job_id, j.run_lease + 1,
           p_claim_slot, p_batch, j.item
      FROM (SELECT (x.r->>'job_id')::bigint AS job_id, (x.r->>'run_lease')::bigint AS run_lease,
                   x.r->>'kind' AS kind, x.r->'args' AS args,
                   row_number() OVER (ORDER BY x.n)::integer AS item
              FROM jsonb_array_elements(p_taken) WITH ORDINALITY AS x(r, n)
             WHERE x.r->>'job_id' IS NOT NULL) j
      JOIN awa.queue_limits l
        ON l.queue = p_queue AND l.kind IN ('', j.kind) AND l.concurrency_max IS NOT NULL;

    INSERT INTO {schema}.limit_rates AS r (queue, kind, part, at, n)
    SELECT p_queue, g.kind, g.part, ARRAY[p_admitted_at], ARRAY[g.jobs]
      FROM (SELECT l.kind, coalesce(x.r->'args' #>> l.rate_by, '') AS part, count(*)::integer AS jobs
              FROM jsonb_array_elements(p_taken) AS x(r)
              JOIN awa.queue_limits l
                ON l.queue = p_queue AND l.kind IN ('', x.r->>'kind') AND l.rate_max IS NOT NULL
             WHERE x.r->>'job_id' IS NOT NULL
             GROUP BY 1, 2) g
    ON CONFLICT (queue, kind, part) DO UPDATE
       SET at = ARRAY(SELECT e.at FROM unnest(r.at, r.n) WITH ORDINALITY AS e(at, c, o)
                       WHERE e.at > p_admitted_at - (SELECT l.rate_period FROM awa.queue_limits l
                                                      WHERE l.queue = r.queue AND l.kind = r.kind)
                       ORDER BY e.o) || excluded.at,
           n  = ARRAY(SELECT e.c FROM unnest(r.at, r.n) WITH ORDINALITY AS e(at, c, o)
                       WHERE e.at > p_admitted_at - (SELECT l.rate_period FROM awa.queue_limits l
                                                      WHERE l.queue = r.queue AND l.kind = r.kind)
                       ORDER BY e.o) || excluded.n;
END
$fn$;
$awa_template$)
ON CONFLICT (name) DO UPDATE SET ord = EXCLUDED.ord, body = EXCLUDED.body;
INSERT INTO awa.substrate_functions (name, ord, body) VALUES ('limit_take', 15, $awa_template$-- {schema}.limit_take(queue, limit, cand_seq, cand_xid, aging): the take of
-- a claim of a queue that has a row in awa.queue_limits (docs/adr/0015):
-- ready_take's rows, cut to the longest prefix every limit admits. Called
-- only by {schema}.claim, which then writes the batch and, through
-- limit_record, what the admitted jobs hold.
--
-- Returns admitted_at, the instant the claim admits its jobs at (it
-- becomes the batch's claimed_at, the attempts' start), and taken, the
-- ready_take rows as a JSON array in their order (NULL: nothing is
-- admitted now; the caller returns its old frontier candidate).
--
-- Serialization: one limited claim of a queue at a time, on every
-- substrate (transaction advisory lock (6387556, hashtext(queue)), taken
-- first and held to commit); admitted_at is read under the lock, so the
-- admission instants of a queue increase in commit order (on a clock that
-- does not step back) and each claim sees every earlier one's holds and
-- rate entries (each statement of this READ COMMITTED function takes a
-- new snapshot).
--
-- The bounds, per limit row L and partition P (the text at L's path into
-- the args; '' without a path or field):
--   rate: the entries of limit_rates(L, P) later than admitted_at -
--     rate_period, plus this claim's jobs of (L, P), are at most rate_max.
--     So every half-open window of rate_period holds at most rate_max
--     admissions: take the window's latest admission t; every admission
--     in the window is in (t - period, t] and was counted when t was.
--     (Sliding, not fixed, windows.)
--   concurrency: the open attempts of (L, P) in limit_holds, plus this
--     claim's, are at most concurrency_max. Holds whose attempt is closed
--     are deleted first (finished, rescued after its worker died,
--     cancelled); a parked attempt is open.
-- A job counts against the queue's row (kind '') and its kind's row.
--
-- Order: what is taken is a prefix of ready_take's order, so lane heads
-- move past exactly it: the take runs in a subtransaction; when a job in
-- it is refused, the take is rolled back and taken again with the limit
-- cut to the jobs before it (a prefix of a take is what a smaller take
-- returns), until nothing is refused. A refused job therefore holds back
-- the jobs behind it in its lane (a partition at its limit holds back the
-- other partitions' jobs behind its own: head-of-line). Limits on the
-- whole queue with no partition are applied to the count before the take.
--
-- Bounds (SQLSTATE 22023): limit 1 to 1024 (awa_core::bounds::CLAIM_BATCH).
CREATE OR REPLACE FUNCTION {schema}.limit_take(
    p_queue    text,
    p_limit    integer,
    p_cand_seq bigint,
    p_cand_xid xid8,
    p_aging    interval,
    OUT admitted_at timestamptz,
    OUT taken       jsonb
) LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan AS $fn$
DECLARE
    v_limit integer;
    v_bad   bigint;
BEGIN
    IF p_limit IS NULL OR p_limit NOT BETWEEN 1 AND 1024 THEN
        RAISE EXCEPTION 'claim limit must be 1 to 1024 (got %)', coalesce(p_limit::text, 'NULL')
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'Claim at most a claim batch (awa_core::bounds::CLAIM_BATCH) per call.';
    END IF;
    PERFORM pg_advisory_xact_lock(6387556, hashtext(p_queue));

    -- Release the shares of closed attempts, and of limits no longer set.
    DELETE FROM {schema}.limit_holds h
     WHERE h.queue = p_queue
       AND (NOT EXISTS (SELECT 1 FROM awa.queue_limits l
                         WHERE l.queue = h.queue AND l.kind = h.kind AND l.concurrency_max IS NOT NULL)
            OR (NOT EXISTS (SELECT 1 FROM {schema}.parked_attempts p
                             WHERE p.job_id = h.job_id AND p.run_lease = h.run_lease)
                AND NOT (EXISTS (SELECT 1 FROM {schema}.claim_batches b
                                  WHERE b.slot = h.claim_slot AND b.batch_id = h.batch_id)
                         AND NOT EXISTS (SELECT 1 FROM {schema}.claim_closures c
                                          WHERE c.slot = h.claim_slot AND c.batch_id = h.batch_id
                                            AND h.item = ANY (c.items)))));
    -- Read after the statement above, so every attempt it found closed
    -- was closed by a finish that began before this instant (the
    -- evidence: a closure's closed_at is its finish's now()).
    admitted_at := clock_timestamp();

    -- The whole queue's unpartitioned limits bound the count up front.
    SELECT greatest(least(p_limit, min(a.allow)), 0)::integer INTO v_limit
      FROM (SELECT l.rate_max - coalesce((
                     SELECT sum(x.c) FROM {schema}.limit_rates r
                      CROSS JOIN LATERAL unnest(r.at, r.n) AS x(at, c)
                      WHERE r.queue = p_queue AND r.kind = '' AND r.part = ''
                        AND x.at > admitted_at - l.rate_period), 0) AS allow
              FROM awa.queue_limits l
             WHERE l.queue = p_queue AND l.kind = '' AND l.rate_max IS NOT NULL AND l.rate_by IS NULL
            UNION ALL
            SELECT l.concurrency_max - (
                     SELECT count(*) FROM {schema}.limit_holds h
                      WHERE h.queue = p_queue AND h.kind = '' AND h.part = '')
              FROM awa.queue_limits l
             WHERE l.queue = p_queue AND l.kind = '' AND l.concurrency_max IS NOT NULL
               AND l.concurrency_by IS NULL) a;

    LOOP
        IF v_limit = 0 THEN
            taken := NULL;
            RETURN;
        END IF;
        BEGIN
            SELECT jsonb_agg(to_jsonb(r) - 'ordinality' ORDER BY r.ordinality) INTO taken
              FROM {schema}.ready_take(p_queue, v_limit, p_cand_seq, p_cand_xid, p_aging)
                   WITH ORDINALITY r;
            -- The first job some limit refuses (its 1-based place in taken).
            WITH j AS (
                SELECT x.n, x.r->>'kind' AS kind, x.r->'args' AS args
                  FROM jsonb_array_elements(taken) WITH ORDINALITY AS x(r, n)
                 WHERE x.r->>'job_id' IS NOT NULL
            ),
            s AS (
                SELECT j.n, l.kind AS lkind, true AS rate,
                       coalesce(j.args #>> l.rate_by, '') AS part, l.rate_max AS cap, l.rate_period AS period
                  FROM j JOIN awa.queue_limits l
                    ON l.queue = p_queue AND l.kind IN ('', j.kind) AND l.rate_max IS NOT NULL
                UNION ALL
                SELECT j.n, l.kind, false,
                       coalesce(j.args #>> l.concurrency_by, ''), l.concurrency_max, NULL
                  FROM j JOIN awa.queue_limits l
                    ON l.queue = p_queue AND l.kind IN ('', j.kind) AND l.concurrency_max IS NOT NULL
            ),
            u AS (
                SELECT s.n, s.cap,
                       row_number() OVER (PARTITION BY s.lkind, s.rate, s.part ORDER BY s.n) AS k,
                       CASE WHEN s.rate THEN
                              (SELECT coalesce(sum(x.c), 0) FROM {schema}.limit_rates r
                                CROSS JOIN LATERAL unnest(r.at, r.n) AS x(at, c)
                                WHERE r.queue = p_queue AND r.kind = s.lkind AND r.part = s.part
                                  AND x.at > admitted_at - s.period)
                            ELSE
                              (SELECT count(*) FROM {schema}.limit_holds h
                                WHERE h.queue = p_queue AND h.kind = s.lkind AND h.part = s.part)
                       END AS used
                  FROM s
            )
            SELECT min(u.n) INTO v_bad FROM u WHERE u.used + u.k > u.cap;
            IF v_bad IS NULL THEN
                RETURN;
            END IF;
            RAISE EXCEPTION 'a limit refused job % of the take', v_bad USING ERRCODE = 'AWL01';
        EXCEPTION WHEN SQLSTATE 'AWL01' THEN
            -- The take is undone (heads, locks); take the admitted prefix.
            v_limit := v_bad - 1;
        END;
    END LOOP;
END
$fn$;
$awa_template$)
ON CONFLICT (name) DO UPDATE SET ord = EXCLUDED.ord, body = EXCLUDED.body;
INSERT INTO awa.substrate_functions (name, ord, body) VALUES ('ready_seal', 2, $awa_template$-- {schema}.ready_seal(): move ready_sealed forward, in two steps a pass
-- or more apart. Returns the sealed generation. Called by ring_prune and
-- ring_rotate for the queue ring, so on every pass of the leader's prune
-- task (every second by default).
--
-- The promise of ready_sealed.generation = S: no entry will ever be added
-- to a queue-ring slot of generation <= S, and every entry there is
-- committed or gone (visible to any snapshot that sees the seal).
-- ready_take builds on it (lane_heads.low_gen), so both steps are proofs:
--
-- 1. Propose S = G - 1 for the newest generation G such that no snapshot
--    in use predates the rotation onto G. Every writer of ready_entries
--    (ready_append, call_enqueue_append, ready_relocate)
--    reads its slot from the ledger and inserts into it within one
--    top-level statement, whose snapshot stays registered, and so in
--    pg_stat_activity.backend_xmin, until the statement ends. A writer that
--    can still insert into a slot of generation G - 1 or older read the
--    ledger with a snapshot that does not see the rotation onto G: taken
--    before it committed, so with an xmin at or below its xid (the ledger
--    row's xmin). When no backend of this database shows such an xmin,
--    every such writer has finished inserting, and holds the transaction id
--    it wrote with. The proposal records this transaction's own id,
--    assigned after that check, as the fence: every such writer's id is
--    below it. (Not a snapshot's xmax: that is the latest completed id
--    + 1, and a writer's id, assigned but not completed, can be above it.)
-- 2. A later call makes the proposal the seal once no transaction below
--    that id is running: the writers have committed or aborted.
--
-- Proposals are made only under READ COMMITTED (the fence needs a fresh
-- snapshot). Other roles' snapshots are only visible with
-- pg_read_all_stats; without it nothing is proposed (claims then scan every slot, as they always
-- could). Sealers racing (a second pruner) need no lock: the seal only
-- moves up, and each proposal is proven on its own.
CREATE OR REPLACE FUNCTION {schema}.ready_seal()
RETURNS bigint LANGUAGE plpgsql AS $fn$
DECLARE
    v_sealed bigint;
    v_pgen   bigint;
    v_pxid   xid8;
    v_gen    bigint;
    v_xid    xid;
BEGIN
    SELECT z.generation, z.pending_generation, z.pending_xid
      INTO v_sealed, v_pgen, v_pxid
      FROM {schema}.ready_sealed z;
    IF v_pxid IS NOT NULL THEN
        IF pg_snapshot_xmin(pg_current_snapshot()) < v_pxid THEN
            -- A proposal waits for its writers to end.
            RETURN v_sealed;
        END IF;
        UPDATE {schema}.ready_sealed z
           SET generation = greatest(z.generation, v_pgen), sealed_at = now(),
               pending_generation = NULL, pending_xid = NULL
         WHERE z.pending_xid = v_pxid;
        v_sealed := greatest(v_sealed, v_pgen);
    END IF;

    -- Proposals only under READ COMMITTED, where every statement below
    -- reads the ledger and the fence afresh (a REPEATABLE READ snapshot
    -- may predate what the check saw). Sealing a proposal above is safe at
    -- any level: an older snapshot only makes it wait.
    IF current_setting('transaction_isolation') <> 'read committed' THEN
        RETURN v_sealed;
    END IF;
    -- The fence is this transaction's id, which must be assigned after the
    -- check below; a transaction that already has one (it wrote something,
    -- the seal above included) leaves proposing to a later call.
    IF pg_current_xact_id_if_assigned() IS NOT NULL THEN
        RETURN v_sealed;
    END IF;
    IF NOT (pg_has_role('pg_read_all_stats', 'MEMBER')
            OR (SELECT r.rolsuper FROM pg_roles r WHERE r.rolname = current_user)) THEN
        RETURN v_sealed;
    END IF;
    -- pg_stat_activity is read once per transaction and kept: a caller
    -- (ring_prune) may have read it before the ledger rows below were
    -- committed. Read it afresh, after them.
    PERFORM pg_stat_clear_snapshot();
    -- Newest generation first: proposing G - 1 covers everything older.
    -- Only committed rotations count: until the rotation onto G commits,
    -- new snapshots do not see it, so no check can rule out writers of
    -- G - 1 (a ledger row this transaction wrote is visible here first).
    FOR v_gen, v_xid IN
        SELECT l.generation, l.xmin
          FROM {schema}.ring_ledger l
         WHERE l.ring = 'queue' AND l.generation > v_sealed + 1
           AND l.xmin IS DISTINCT FROM xid(pg_current_xact_id_if_assigned())
         ORDER BY l.generation DESC
         LIMIT 2
    LOOP
        IF NOT EXISTS (
                SELECT 1 FROM pg_stat_activity a
                 WHERE a.datname = current_database()
                   AND a.pid <> pg_backend_pid()
                   AND a.backend_xmin IS NOT NULL
                   AND age(a.backend_xmin) >= age(v_xid)) THEN
            -- The fence: this transaction's id, assigned here (it had
            -- none, see above), so after the check.
            UPDATE {schema}.ready_sealed z
               SET pending_generation = v_gen - 1,
                   pending_xid = pg_current_xact_id()
             WHERE z.pending_xid IS NULL AND z.generation < v_gen - 1;
            RETURN v_sealed;
        END IF;
    END LOOP;
    RETURN v_sealed;
END
$fn$;
$awa_template$)
ON CONFLICT (name) DO UPDATE SET ord = EXCLUDED.ord, body = EXCLUDED.body;
INSERT INTO awa.substrate_functions (name, ord, body) VALUES ('rescue_stale', 22, $awa_template$-- {schema}.rescue_stale(stale, limit): finish abandoned attempts as
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
INSERT INTO awa.substrate_functions (name, ord, body) VALUES ('ring_helpers', 31, $awa_template$-- Small helpers of ring_rotate and ring_prune.
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
INSERT INTO awa.substrate_functions (name, ord, body) VALUES ('ring_prune', 33, $awa_template$-- {schema}.ring_prune(ring, lock_timeout_ms, rotate_interval): reclaim a
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
-- For the queue ring, every call also moves ready_sealed (ready_seal).
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

    -- The queue ring's seal moves with each pass (ready_seal).
    IF p_ring = 'queue' THEN
        PERFORM {schema}.ready_seal();
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
INSERT INTO awa.substrate_functions (name, ord, body) VALUES ('ring_rotate', 32, $awa_template$-- {schema}.ring_rotate(ring, by): move a ring's current slot to the next one.
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
INSERT INTO awa.substrate_functions (name, ord, body) VALUES ('routed_jobs', 26, $awa_template$-- {schema}.routed_jobs(): every job of every substrate the storage routing
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
INSERT INTO awa.substrate_functions (name, ord, body) VALUES ('storage_transfer_in', 34, $awa_template$-- {schema}.storage_transfer_in(from, limit): move up to `limit` deferred
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
INSERT INTO awa.substrate_functions (name, ord, body) VALUES ('terminal_job', 27, $awa_template$-- {schema}.terminal_job(job_id): the terminal_jobs rows of one job, found
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
