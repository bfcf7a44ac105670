-- Control objects that exist once per database, in schema awa.
--
-- These tables coordinate; they are never on the per-job hot path, so they
-- are ordinary heap tables updated in place. Substrate-local control state
-- (lane heads, ring ledgers, uniqueness) lives in each substrate instead:
-- see install_control_plane.sql.

CREATE SCHEMA IF NOT EXISTS awa;

-- One row per applied migration. Written only by the migrator, under the
-- migration advisory lock.
CREATE TABLE IF NOT EXISTS awa.schema_version (
    version     integer     PRIMARY KEY,
    description text        NOT NULL,
    checksum    text        NOT NULL,
    applied_at  timestamptz NOT NULL DEFAULT now()
);

-- Per-queue settings. A queue with no row uses the column defaults.
CREATE TABLE IF NOT EXISTS awa.queue_meta (
    queue                   text        PRIMARY KEY,
    dlq_enabled             boolean     NOT NULL DEFAULT false,
    max_attempts            integer     NOT NULL DEFAULT 25
                                        CHECK (max_attempts BETWEEN 1 AND 1000),
    -- Lanes per priority. One shard keeps strict FIFO for the whole queue;
    -- more shards let more claimers work a queue at once.
    shard_count             smallint    NOT NULL DEFAULT 1
                                        CHECK (shard_count BETWEEN 1 AND 64),
    -- A waiting job gains one priority step per interval, so low priority
    -- work cannot starve. NULL turns aging off. The ranges of this and
    -- dlq_retention are awa_core::bounds (PRIORITY_AGING_STORED,
    -- DLQ_RETENTION),
    -- refused here too so no caller can store a value that breaks every
    -- claim (a zero interval divides by zero) or every retention pass
    -- (now() - retention out of range).
    priority_aging_interval interval
        CONSTRAINT queue_meta_priority_aging_in_range
        CHECK (priority_aging_interval BETWEEN interval '1 millisecond' AND interval '30 days'),
    dlq_retention           interval    NOT NULL DEFAULT interval '14 days'
        CONSTRAINT queue_meta_dlq_retention_in_range
        CHECK (dlq_retention BETWEEN interval '1 second' AND interval '3650 days'),
    paused                  boolean     NOT NULL DEFAULT false,
    created_at              timestamptz NOT NULL DEFAULT now(),
    updated_at              timestamptz NOT NULL DEFAULT now()
);

-- Live worker and maintenance processes; heartbeated, garbage-collected by
-- maintenance when stale.
CREATE TABLE IF NOT EXISTS awa.runtimes (
    instance_id  uuid        PRIMARY KEY,
    host         text        NOT NULL,
    pid          integer     NOT NULL,
    role         text        NOT NULL CHECK (role IN ('worker', 'maintenance', 'cli')),
    queues       text[]      NOT NULL DEFAULT '{}',
    started_at   timestamptz NOT NULL DEFAULT now(),
    last_seen_at timestamptz NOT NULL DEFAULT now()
);

-- Who holds the maintenance advisory lock, for operators. The lock itself
-- is the authority; this row is only a description of it.
CREATE TABLE IF NOT EXISTS awa.maintenance_leader (
    singleton   boolean     PRIMARY KEY DEFAULT true CHECK (singleton),
    instance_id uuid        NOT NULL,
    host        text        NOT NULL,
    pid         integer     NOT NULL,
    backend_pid integer     NOT NULL,
    since       timestamptz NOT NULL DEFAULT now()
);

-- Periodic jobs (awa_control::cron; fired by the leader's cron task).
-- Expression and time zone are validated by the client before they are
-- written (croner, chrono-tz); the database checks the rest.
--
-- Exactly once per tick: a tick t is fired by the transaction that enqueues
-- its job AND moves last_tick forward to t (cron_fire.sql: UPDATE ... WHERE
-- last_tick < t), so last_tick only increases and no tick can be fired by
-- two transactions, whoever runs them. Ticks at or before fire_from are
-- never fired: it is the creation time, and is moved to the time of a
-- change of expression or zone, or of a resume (ticks of a paused or
-- different schedule are not "missed").
CREATE TABLE IF NOT EXISTS awa.cron_jobs (
    name             text        PRIMARY KEY
                                 CHECK (name ~ '^[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}$'),
    cron_expr        text        NOT NULL CHECK (length(cron_expr) BETWEEN 1 AND 256),
    timezone         text        NOT NULL DEFAULT 'UTC',
    queue            text        NOT NULL,
    kind             text        NOT NULL CHECK (length(kind) BETWEEN 1 AND 255),
    args             jsonb       NOT NULL DEFAULT '{}',
    priority         smallint    NOT NULL DEFAULT 2 CHECK (priority BETWEEN 1 AND 4),
    max_attempts     integer     CHECK (max_attempts BETWEEN 1 AND 1000),
    metadata         jsonb,
    -- After downtime: 'skip' fires only the latest missed tick,
    -- 'catch_up' the latest catch_up_limit of them, oldest first.
    missed_policy    text        NOT NULL DEFAULT 'skip'
                                 CHECK (missed_policy IN ('skip', 'catch_up')),
    catch_up_limit   integer     NOT NULL DEFAULT 1 CHECK (catch_up_limit BETWEEN 1 AND 1000),
    enabled          boolean     NOT NULL DEFAULT true,
    fire_from        timestamptz NOT NULL DEFAULT now(),
    last_tick        timestamptz,
    last_job_id      bigint,
    last_enqueued_at timestamptz,
    created_at       timestamptz NOT NULL DEFAULT now(),
    updated_at       timestamptz NOT NULL DEFAULT now()
);

-- Job identity is database-wide: every substrate draws job ids from this
-- one sequence and records unique keys in this one table. A job keeps its
-- id when a storage transition moves it to another substrate, a job id
-- names one job whichever substrate holds it, and a unique key held by a
-- live job in one substrate blocks a duplicate in any other, under every
-- isolation level (the primary key decides, as within one substrate).
CREATE SEQUENCE IF NOT EXISTS awa.job_id_seq AS bigint;

-- At most one non-terminal job per unique key. Rows are removed when the
-- job becomes terminal, so only jobs that opt into uniqueness pay.
CREATE TABLE IF NOT EXISTS awa.job_uniques (
    unique_key text        PRIMARY KEY,
    job_id     bigint      NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now()
);
-- cancel_job releases a key by its job id (finish goes by key).
CREATE INDEX IF NOT EXISTS job_uniques_job_idx ON awa.job_uniques (job_id);

-- Which substrate receives new work, and any staged move to another one:
-- the one place routing is decided (awa_control::routing reads it; the
-- state machine and each state's routing rule are in ARCHITECTURE.md).
-- Changed only by the transition functions (awa.storage_prepare,
-- awa.storage_enter_mixed, awa.storage_finalize, awa.storage_abort in
-- fn_storage_transition.sql), each one transaction under the migration
-- lock.
--   steady    writes and reads: active_schema (plus storage_draining)
--   prepared  as steady; runtimes also register target_schema
--   mixed     writes: target_schema; reads: active_schema and
--             target_schema; the active (old) substrate only drains
-- epoch grows by one at every change, so a runtime sees a change by
-- comparing one number. fence_vxids: the transactions open when mixed was
-- entered (see storage_draining).
CREATE TABLE IF NOT EXISTS awa.storage_transition_state (
    singleton     boolean     PRIMARY KEY DEFAULT true CHECK (singleton),
    state         text        NOT NULL DEFAULT 'steady'
                              CHECK (state IN ('steady', 'prepared', 'mixed')),
    active_schema text        NOT NULL DEFAULT 'awa',
    target_schema text,
    epoch         bigint      NOT NULL DEFAULT 1,
    mixed_since   timestamptz,
    fence_vxids   text[],
    updated_at    timestamptz NOT NULL DEFAULT now(),
    CHECK ((state = 'steady') = (target_schema IS NULL)),
    CHECK (target_schema IS DISTINCT FROM active_schema),
    CHECK ((state = 'mixed') = (mixed_since IS NOT NULL))
);
INSERT INTO awa.storage_transition_state DEFAULT VALUES ON CONFLICT DO NOTHING;

-- Substrates that no longer receive writes but may still hold live work:
-- the old substrate after finalize, the target after an abort from mixed.
-- Workers keep claiming from them and the leader keeps maintaining them
-- (and moves their deferred and dead-lettered jobs to the write
-- substrate) until the leader removes the row: when the substrate holds
-- no live job and none of fence_vxids, the transactions open when it
-- stopped receiving writes, is still running (a REPEATABLE READ
-- transaction that read the old routing could still write to it).
CREATE TABLE IF NOT EXISTS awa.storage_draining (
    schema_name text        PRIMARY KEY,
    reason      text        NOT NULL CHECK (reason IN ('finalized', 'aborted')),
    fence_vxids text[]      NOT NULL DEFAULT '{}',
    since       timestamptz NOT NULL DEFAULT now()
);

-- Which substrates each runtime reads and writes: registered by the
-- runtime itself each time it reads the routing, so finalize can refuse
-- while a live runtime has not picked up the target.
CREATE TABLE IF NOT EXISTS awa.runtime_storage_backends (
    instance_id uuid        NOT NULL REFERENCES awa.runtimes (instance_id) ON DELETE CASCADE,
    schema_name text        NOT NULL,
    mode        text        NOT NULL CHECK (mode IN ('read_write', 'drain')),
    updated_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (instance_id, schema_name)
);


-- Queue health as the maintenance leader last measured it, for operators
-- and dashboards: overwritten in place, one row per queue and substrate.
CREATE TABLE IF NOT EXISTS awa.queue_health (
    schema_name           text        NOT NULL,
    queue                 text        NOT NULL,
    available             bigint      NOT NULL,
    running               bigint      NOT NULL,
    deferred              bigint      NOT NULL,
    oldest_available_secs double precision,
    measured_at           timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (schema_name, queue)
);


-- The staged storage transition: awa.storage_prepare(target) ->
-- awa.storage_enter_mixed() -> awa.storage_finalize(), and
-- awa.storage_abort() from prepared or mixed. The CLI's `awa storage
-- prepare|enter-mixed-transition|finalize|abort` call these; external
-- migration tools may call them too.
--
-- Each step is one transaction: it takes the migration lock (the same
-- advisory lock `awa migrate` holds, transaction-scoped here), locks the
-- state row, checks the step is allowed now, and changes the state. Two
-- operators racing one step queue on the lock; the second then finds the
-- state changed and is refused (SQLSTATE 55000, with a hint saying what to
-- do). Every change bumps epoch and sends NOTIFY awa_storage, so runtimes
-- pick it up at once; they also re-read the routing every second
-- (awa_control::routing::REFRESH), which bounds the delay without NOTIFY.
--
-- SECURITY INVOKER: the caller needs UPDATE on awa.storage_transition_state
-- and the owner's rights on the substrates, which the runtime role does not
-- have (its EXECUTE on these is revoked too): run them as the migrator.
--
-- Each returns the state after the step: (state, active_schema,
-- target_schema, epoch).

-- Every other transaction open now in this database, by virtual
-- transaction id (each transaction holds an exclusive lock on its own,
-- read-only ones included, so pg_locks lists them all; pg_locks is
-- readable by every role). A substrate that stops receiving writes keeps
-- this list: until none of them is still open, one of them may write to it
-- from a snapshot taken before the change (REPEATABLE READ).
CREATE OR REPLACE FUNCTION awa.storage_open_vxids()
RETURNS text[] LANGUAGE sql STABLE SECURITY INVOKER AS $fn$
    SELECT coalesce(array_agg(DISTINCT l.virtualxid::text), '{}')
      FROM pg_catalog.pg_locks l
      JOIN pg_catalog.pg_stat_activity a ON a.pid = l.pid
     WHERE l.locktype = 'virtualxid' AND l.mode = 'ExclusiveLock' AND l.granted
       AND l.pid <> pg_backend_pid()
       AND a.datname = current_database()
$fn$;

-- Refuse a step that is not allowed now.
CREATE OR REPLACE FUNCTION awa.storage_refuse(p_message text, p_hint text)
RETURNS void LANGUAGE plpgsql SECURITY INVOKER AS $fn$
BEGIN
    RAISE EXCEPTION '%', p_message
        USING ERRCODE = 'object_not_in_prerequisite_state', HINT = p_hint;
END
$fn$;

-- The state row, locked, under the migration lock.
CREATE OR REPLACE FUNCTION awa.storage_lock_state()
RETURNS awa.storage_transition_state LANGUAGE plpgsql SECURITY INVOKER AS $fn$
DECLARE
    v awa.storage_transition_state;
BEGIN
    -- Key (6387553, 1): migration_lock.sql's, so a step never interleaves
    -- with a migration either.
    PERFORM pg_advisory_xact_lock(6387553, 1);
    SELECT * INTO v FROM awa.storage_transition_state FOR UPDATE;
    RETURN v;
END
$fn$;

CREATE OR REPLACE FUNCTION awa.storage_is_substrate(p_schema text)
RETURNS boolean LANGUAGE sql STABLE SECURITY INVOKER AS $fn$
    SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_class c
                     JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
                    WHERE n.nspname = p_schema AND c.relname = 'substrate_info' AND c.relkind = 'r')
$fn$;

CREATE OR REPLACE FUNCTION awa.storage_changed(p_reason text)
RETURNS TABLE (state text, active_schema text, target_schema text, epoch bigint)
LANGUAGE plpgsql SECURITY INVOKER AS $fn$
BEGIN
    PERFORM pg_notify('awa_storage', p_reason);
    RETURN QUERY SELECT t.state, t.active_schema, t.target_schema, t.epoch
                   FROM awa.storage_transition_state t;
END
$fn$;

-- Put `p_schema` in storage_draining: read, and maintained, until it has
-- drained and none of `p_fence` (the transactions that may still write to
-- it) is open.
CREATE OR REPLACE FUNCTION awa.storage_drain(p_schema text, p_reason text, p_fence text[])
RETURNS void LANGUAGE sql SECURITY INVOKER AS $fn$
    INSERT INTO awa.storage_draining AS d (schema_name, reason, fence_vxids)
    VALUES (p_schema, p_reason, coalesce(p_fence, '{}'))
    ON CONFLICT (schema_name) DO UPDATE
       SET reason = EXCLUDED.reason, fence_vxids = EXCLUDED.fence_vxids, since = now()
$fn$;

-- steady -> prepared: name the target. Nothing moves yet; runtimes that
-- understand the target register it (runtime_storage_backends), and claim
-- from it too (it is empty unless an earlier aborted move left work there).
CREATE OR REPLACE FUNCTION awa.storage_prepare(p_target text)
RETURNS TABLE (state text, active_schema text, target_schema text, epoch bigint)
LANGUAGE plpgsql SECURITY INVOKER AS $fn$
#variable_conflict use_column
DECLARE
    v awa.storage_transition_state := awa.storage_lock_state();
BEGIN
    IF v.state <> 'steady' THEN
        PERFORM awa.storage_refuse(
            format('a transition to %s is already %s', v.target_schema, v.state),
            'Finish it (awa storage enter-mixed-transition, then awa storage finalize) or abort it (awa storage abort) first.');
    END IF;
    IF p_target IS NULL OR NOT awa.storage_is_substrate(p_target) THEN
        PERFORM awa.storage_refuse(
            format('schema %s is not a prepared substrate', coalesce(p_target, 'NULL')),
            format('Prepare it first: awa storage prepare-queue-storage-schema --schema %s', coalesce(p_target, 'NAME')));
    END IF;
    IF p_target = v.active_schema THEN
        PERFORM awa.storage_refuse(
            format('schema %s is already the active substrate', p_target),
            'Name another prepared substrate as the target.');
    END IF;
    UPDATE awa.storage_transition_state t
       SET state = 'prepared', target_schema = p_target, epoch = t.epoch + 1, updated_at = now();
    -- A substrate left draining by an earlier abort is the target again:
    -- routing reads it as the target from now on.
    DELETE FROM awa.storage_draining d WHERE d.schema_name = p_target;
    RETURN QUERY SELECT * FROM awa.storage_changed('prepared');
END
$fn$;

-- prepared -> mixed: new work goes to the target; workers claim from both;
-- the old substrate only drains (its deferred and dead-lettered jobs are
-- moved to the target by the leader, see storage_transfer_in).
CREATE OR REPLACE FUNCTION awa.storage_enter_mixed()
RETURNS TABLE (state text, active_schema text, target_schema text, epoch bigint)
LANGUAGE plpgsql SECURITY INVOKER AS $fn$
#variable_conflict use_column
DECLARE
    v awa.storage_transition_state := awa.storage_lock_state();
BEGIN
    IF v.state <> 'prepared' THEN
        PERFORM awa.storage_refuse(
            CASE v.state WHEN 'steady' THEN 'no transition is prepared'
                         ELSE format('the transition to %s is already mixed', v.target_schema) END,
            CASE v.state WHEN 'steady' THEN 'Prepare one first: awa storage prepare --target-schema NAME'
                         ELSE 'Finalize it (awa storage finalize) once the old substrate has drained, or abort it.' END);
    END IF;
    IF NOT awa.storage_is_substrate(v.target_schema) THEN
        PERFORM awa.storage_refuse(
            format('the target %s is no longer a substrate (dropped?)', v.target_schema),
            'Abort the transition (awa storage abort) and prepare another target.');
    END IF;
    UPDATE awa.storage_transition_state t
       SET state = 'mixed', mixed_since = now(), fence_vxids = awa.storage_open_vxids(),
           epoch = t.epoch + 1, updated_at = now();
    RETURN QUERY SELECT * FROM awa.storage_changed('mixed');
END
$fn$;

-- mixed -> steady on the target. Refused while the old substrate holds a
-- non-terminal job, or a live runtime that uses the old substrate (or
-- registers none) has not registered the target (it would keep working
-- only the old substrate). Deferred and dead-lettered
-- jobs of the old substrate are moved to the target first, here, so
-- scheduled work far in the future does not hold finalize back. The old
-- substrate is then read-only history: it goes to storage_draining with
-- the fence of mixed, and the leader drops it from routing once the
-- transactions open when mixed began are gone (normally at once).
CREATE OR REPLACE FUNCTION awa.storage_finalize()
RETURNS TABLE (state text, active_schema text, target_schema text, epoch bigint)
LANGUAGE plpgsql SECURITY INVOKER AS $fn$
#variable_conflict use_column
DECLARE
    v awa.storage_transition_state := awa.storage_lock_state();
    v_moved integer;
    v_live  bigint;
    v_rt    record;
BEGIN
    IF v.state <> 'mixed' THEN
        PERFORM awa.storage_refuse(
            CASE v.state WHEN 'steady' THEN 'no transition is in progress'
                         ELSE format('the transition to %s is prepared but not mixed', v.target_schema) END,
            CASE v.state WHEN 'steady' THEN 'Start one: awa storage prepare --target-schema NAME, then awa storage enter-mixed-transition.'
                         ELSE 'Enter the mixed phase first: awa storage enter-mixed-transition.' END);
    END IF;
    SELECT r.instance_id, r.host, r.pid, r.role INTO v_rt
      FROM awa.runtimes r
     WHERE r.role IN ('worker', 'maintenance')
       AND r.last_seen_at > now() - interval '60 seconds'
       AND NOT EXISTS (SELECT 1 FROM awa.runtime_storage_backends b
                        WHERE b.instance_id = r.instance_id AND b.schema_name = v.target_schema)
       -- It uses the old substrate, or registers nothing (a runtime that
       -- does not follow the routing works the default). One pinned to
       -- an unrelated substrate does not hold the move back.
       AND (EXISTS (SELECT 1 FROM awa.runtime_storage_backends b
                     WHERE b.instance_id = r.instance_id AND b.schema_name = v.active_schema)
            OR NOT EXISTS (SELECT 1 FROM awa.runtime_storage_backends b
                            WHERE b.instance_id = r.instance_id))
     ORDER BY r.started_at
     LIMIT 1;
    IF FOUND THEN
        PERFORM awa.storage_refuse(
            format('runtime %s (%s on %s, pid %s) has not registered the target %s: it may only be able to use %s',
                   v_rt.instance_id, v_rt.role, v_rt.host, v_rt.pid, v.target_schema, v.active_schema),
            'Wait a few seconds for it to pick up the routing, or upgrade or stop it; then finalize again.');
    END IF;
    LOOP
        EXECUTE format('SELECT %I.storage_transfer_in($1, 10000)', v.target_schema)
           INTO v_moved USING v.active_schema;
        EXIT WHEN v_moved = 0;
    END LOOP;
    EXECUTE format('SELECT count(*) FROM %I.live_jobs', v.active_schema) INTO v_live;
    IF v_live > 0 THEN
        PERFORM awa.storage_refuse(
            format('the old substrate %s still holds %s non-terminal jobs (available or running)', v.active_schema, v_live),
            'Wait for workers to drain it (awa storage status shows its backlog), then finalize again.');
    END IF;
    PERFORM awa.storage_drain(v.active_schema, 'finalized', v.fence_vxids);
    UPDATE awa.storage_transition_state t
       SET state = 'steady', active_schema = v.target_schema, target_schema = NULL,
           mixed_since = NULL, fence_vxids = NULL, epoch = t.epoch + 1, updated_at = now();
    RETURN QUERY SELECT * FROM awa.storage_changed('finalized');
END
$fn$;

-- prepared or mixed -> steady on the old substrate. From mixed, work
-- already in the target keeps running there: the target goes to
-- storage_draining, so workers still claim from it and the leader moves
-- its deferred and dead-lettered jobs back, until it has drained.
CREATE OR REPLACE FUNCTION awa.storage_abort()
RETURNS TABLE (state text, active_schema text, target_schema text, epoch bigint)
LANGUAGE plpgsql SECURITY INVOKER AS $fn$
#variable_conflict use_column
DECLARE
    v awa.storage_transition_state := awa.storage_lock_state();
BEGIN
    IF v.state = 'steady' THEN
        PERFORM awa.storage_refuse(
            'no transition is in progress; there is nothing to abort',
            'awa storage status shows the state.');
    END IF;
    IF v.state = 'mixed' THEN
        PERFORM awa.storage_drain(v.target_schema, 'aborted', awa.storage_open_vxids());
    END IF;
    UPDATE awa.storage_transition_state t
       SET state = 'steady', target_schema = NULL, mixed_since = NULL, fence_vxids = NULL,
           epoch = t.epoch + 1, updated_at = now();
    RETURN QUERY SELECT * FROM awa.storage_changed('aborted');
END
$fn$;


-- awa.install_control_plane(schema, queue_slots, lease_slots, claim_slots)
--
-- Substrate-local control state: the substrate's own description, the ring
-- ledgers, lane heads and uniqueness keys. Called only by
-- awa.install_queue_storage_substrate, which has already validated the
-- arguments and holds the per-schema lock. Every statement is IF NOT EXISTS
-- so a re-run completes a partial install and changes nothing otherwise.
CREATE OR REPLACE FUNCTION awa.install_control_plane(
    p_schema text, p_queue_slots integer, p_lease_slots integer, p_claim_slots integer
) RETURNS void LANGUAGE plpgsql SECURITY INVOKER AS $fn$
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
                               CHECK (max_job_bytes BETWEEN 1024 AND 268435456)
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
    -- so the chain is checked here rather than trusted to ring_rotate: a
    -- bogus row would make every writer pick a wrong slot. (A trigger's
    -- function needs no EXECUTE grant to fire, and the runtime role, not
    -- owning the table, cannot disable it.)
    EXECUTE format($ddl$
        CREATE OR REPLACE FUNCTION %1$I.ring_ledger_chain_check() RETURNS trigger
        LANGUAGE plpgsql AS $trg$
        DECLARE
            v_prev  integer;
            v_slots integer;
        BEGIN
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
$fn$;


-- awa.install_ready_plane(schema, queue_slots)
--
-- The ready queue: runnable work appended to the current queue-ring slot and
-- claimed in lane order. Rows here are never updated or deleted; a claim
-- moves the lane head past them and a cancellation adds a tombstone. Whole
-- slots are reclaimed with TRUNCATE by maintenance.
CREATE OR REPLACE FUNCTION awa.install_ready_plane(p_schema text, p_queue_slots integer)
RETURNS void LANGUAGE plpgsql SECURITY INVOKER AS $fn$
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
            metadata     jsonb
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
$fn$;


-- awa.install_deferred_plane(schema)
--
-- Work that is not runnable yet: scheduled, waiting out a retry backoff, or
-- snoozed. An ordinary table: rows are deleted when promoted to the ready
-- ring, so it churns in proportion to deferred work only, never to the
-- whole job stream.
CREATE OR REPLACE FUNCTION awa.install_deferred_plane(p_schema text)
RETURNS void LANGUAGE plpgsql SECURITY INVOKER AS $fn$
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
            last_error   text
        )$ddl$, p_schema);
    -- Promotion takes the earliest due rows first.
    EXECUTE format('CREATE INDEX IF NOT EXISTS deferred_jobs_run_at_idx ON %1$I.deferred_jobs (run_at)', p_schema);
    -- live_jobs filtered by queue: queue stats, pending (--exit-when-idle).
    EXECUTE format('CREATE INDEX IF NOT EXISTS deferred_jobs_queue_idx ON %1$I.deferred_jobs (queue)', p_schema);
END
$fn$;


-- awa.install_exec_plane(schema, lease_slots, claim_slots)
--
-- Execution evidence, compact: a claim call writes one claim batch row for
-- all the jobs it hands out, and a finish call writes one closure link per
-- batch it touches, listing the items it closed. Both live in the claim
-- ring. Jobs that heartbeat, report progress or wait for a callback
-- additionally get a lease row in the lease ring and an attempt_state row;
-- short jobs never touch either.
--
-- An item of a batch is *open* while no link of its batch lists it. The
-- links of a batch are numbered 1, 2, 3, ... and a finisher inserts link
-- max+1 having read links 1..max under the same snapshot: the primary key
-- (slot, batch_id, link) lets exactly one of two racing finishers of a
-- batch insert it, and the loser reads again. So every item is listed by at
-- most one link: exactly one finisher per attempt (see fn_finish.sql).
CREATE OR REPLACE FUNCTION awa.install_exec_plane(
    p_schema text, p_lease_slots integer, p_claim_slots integer
) RETURNS void LANGUAGE plpgsql SECURITY INVOKER AS $fn$
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
            parked_at        timestamptz NOT NULL DEFAULT now()
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
END
$fn$;


-- awa.install_history_plane(schema, queue_slots)
--
-- Terminal history, in two shapes that share the queue ring (slot k's
-- history goes when slot k is reclaimed, which is what makes the retention
-- window "slot count x rotation interval"):
--   done_batches: the hot path. One row per finish call, queue slot and
--     queue, listing the jobs it completed whose bodies are in that slot's
--     ready entries (not copied). A batch of 100 completions is one row.
--   done_entries: one row per job, for failures, cancellations and
--     completions whose body is not in the slot (parked attempts, a job
--     cancelled while deferred): the body is copied into the row then.
-- terminal_jobs reads both and returns one row per terminal job.
CREATE OR REPLACE FUNCTION awa.install_history_plane(p_schema text, p_queue_slots integer)
RETURNS void LANGUAGE plpgsql SECURITY INVOKER AS $fn$
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
            last_error   text
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
    -- row per terminal job whichever shape its fact has.
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
               d.slot                                  AS ring_slot
          FROM %1$I.done_entries d
         -- A retired slot is gone for every snapshot that sees its marker.
         WHERE NOT EXISTS (SELECT 1 FROM %1$I.ring_retirements x
                            WHERE x.ring = 'queue' AND x.slot = d.slot)
        UNION ALL
        SELECT u.job_id, b.queue, r.kind, r.args, r.priority, 'completed'::text, u.attempt,
               r.max_attempts, u.run_lease, r.created_at, b.finalized_at, NULL::text, r.metadata,
               b.slot
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
    $ddl$, p_schema);
END
$fn$;


-- awa.install_dlq_plane(schema)
--
-- Dead-lettered jobs held for an operator: full body plus the reason. Kept
-- until retried, purged, or past the queue's retention.
CREATE OR REPLACE FUNCTION awa.install_dlq_plane(p_schema text)
RETURNS void LANGUAGE plpgsql SECURITY INVOKER AS $fn$
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
            unique_key   text
        )$ddl$, p_schema);
    -- dlq list and retention, by queue and age.
    EXECUTE format('CREATE INDEX IF NOT EXISTS dlq_entries_queue_idx ON %1$I.dlq_entries (queue, dead_at)', p_schema);
END
$fn$;


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
--   job_uniques               SID   enqueue claims a key; finish/cancel
--                                   release it (database-wide: every
--                                   substrate's functions use this table)
--   job_id_seq (sequence)     USAGE enqueue (nextval); never setval
--                                   (database-wide, like job_uniques)
-- Substrate tables (in the substrate's schema):
--   substrate_info            S     ring sizes (ring_slot_count), status
--   ring_ledger               SI    rotate appends generation + 1 (the
--                                   primary key is the compare-and-swap);
--                                   every writer reads its current slot.
--                                   Never U/D: the ledger is append-only
--   ring_retirements          SID   prune: retire marker, dropped after
--                                   truncate or un-retire; terminal_jobs
--   ring_outcomes             SIU   rotate/prune outcome upsert; status
--   lane_heads                SIU   ready_append creates lanes; ready_take
--                                   moves heads (FOR UPDATE); cancel
--                                   (ready_tombstone locks FOR UPDATE)
--   deferred_jobs             SIUD  enqueue (scheduled), finish (retry,
--                                   snooze, release), promote (FOR UPDATE
--                                   SKIP LOCKED needs U, then D), cancel
--   attempt_state             SIUD  heartbeat upsert; finish/cancel delete
--   parked_attempts           SIUD  prune parks long attempts (exec_park);
--                                   heartbeat updates; finish deletes (the
--                                   guard of a parked attempt); rescue reads
--   exec_settings             SIU   rescue publishes its bound (upsert);
--                                   workers read it for their cadence
--   history_horizon           SIU   prune moves it on retirement (upsert);
--                                   job dump reads it
--   dlq_entries               SIUD  finish (fail to DLQ), dlq list,
--                                   dlq retry locks the entries it moves
--                                   (FOR UPDATE needs U), dlq
--                                   retry/purge/retention delete
--   count_rollups             SIU   prune folds deltas (upsert); stats
--   ready_entries             SI    ready_append (enqueue, promote, dlq
--                                   retry); claim/finish/views read
--   ready_tombstones          SI    cancel of a waiting job
--   done_entries              SI    finish/cancel terminal facts
--   done_batches              SI    finish (completions, one row per call
--                                   and slot); views read
--   count_deltas              SID   finish/cancel; prune folds (delete)
--   claim_batches             SI    claim; finish/heartbeat/rescue read
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
--   claim_batch_seq (sequence) USAGE claim (nextval); never setval
--   ready_seq  (sequence)     USAGE, SELECT  ready_append (nextval),
--                                   ready_take reads last_value
-- Functions: EXECUTE on the substrate's runtime functions (those the
-- templates in awa.substrate_functions define) and on nothing else: the
-- installers (awa.install_*), this function and any other function in
-- schema awa or the substrate are revoked from the role and from PUBLIC
-- (PostgreSQL grants EXECUTE to PUBLIC by default).
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
        ['control',   'runtimes',                 'SELECT, INSERT, UPDATE, DELETE'],
        ['control',   'maintenance_leader',       'SELECT, INSERT, UPDATE'],
        ['control',   'cron_jobs',                'SELECT, INSERT, UPDATE, DELETE'],
        ['control',   'storage_transition_state', 'SELECT'],
        ['control',   'storage_draining',         'SELECT, DELETE'],
        ['control',   'runtime_storage_backends', 'SELECT, INSERT, UPDATE, DELETE'],
        ['control',   'queue_health',             'SELECT, INSERT, UPDATE'],
        ['control',   'job_uniques',              'SELECT, INSERT, DELETE'],
        ['control',   'job_id_seq',               'USAGE'],
        ['substrate', 'substrate_info',           'SELECT'],
        ['substrate', 'ring_ledger',              'SELECT, INSERT'],
        ['substrate', 'ring_retirements',         'SELECT, INSERT, DELETE'],
        ['substrate', 'ring_outcomes',            'SELECT, INSERT, UPDATE'],
        ['substrate', 'lane_heads',               'SELECT, INSERT, UPDATE'],
        ['substrate', 'deferred_jobs',            'SELECT, INSERT, UPDATE, DELETE'],
        ['substrate', 'attempt_state',            'SELECT, INSERT, UPDATE, DELETE'],
        ['substrate', 'parked_attempts',          'SELECT, INSERT, UPDATE, DELETE'],
        ['substrate', 'exec_settings',            'SELECT, INSERT, UPDATE'],
        ['substrate', 'history_horizon',          'SELECT, INSERT, UPDATE'],
        ['substrate', 'dlq_entries',              'SELECT, INSERT, UPDATE, DELETE'],
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
$fn$;

-- Runtime function templates, instantiated per substrate.
INSERT INTO awa.substrate_functions (name, ord, body) VALUES ('ready_append', 0, $awa_template$-- {schema}.ready_append(...): append runnable jobs to the current queue-ring
-- slot. Used by enqueue, promotion and release; nothing else inserts into
-- ready_entries.
--
-- Parameters are parallel arrays, one element per job, in lane order.
-- Returns each job's id, slot and lane position.
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
    p_metadata     jsonb[]
) RETURNS TABLE (job_id bigint, slot integer, lane_seq bigint)
LANGUAGE plpgsql AS $fn$
#variable_conflict use_column
DECLARE
    v_slot integer;
BEGIN
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
         max_attempts, run_lease, created_at, ready_at, unique_key, metadata)
    SELECT v_slot, i.queue, i.priority,
           (i.job_id % coalesce(m.shard_count, 1))::smallint,
           nextval('{schema}.ready_seq'),
           i.job_id, i.kind, i.args, i.attempt, i.max_attempts, i.run_lease,
           i.created_at, clock_timestamp(), i.unique_key, i.metadata
      FROM unnest(p_job_ids, p_queues, p_priorities, p_kinds, p_args, p_attempts,
                  p_max_attempts, p_run_leases, p_created_at, p_unique_keys, p_metadata)
           WITH ORDINALITY
           AS i(job_id, queue, priority, kind, args, attempt, max_attempts, run_lease,
                created_at, unique_key, metadata, ord)
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
INSERT INTO awa.substrate_functions (name, ord, body) VALUES ('ready_take', 1, $awa_template$-- {schema}.ready_take(queue, limit, cand_seq, cand_xid, aging): take up to
-- `limit` runnable jobs of a queue, and at most 8 MiB of args + metadata
-- (stored size; at least one job), in order, advancing the lane heads past
-- them. Called only from the execution plane's claim, in the same
-- statement that writes the claim batch.
--
-- Order: higher (aged) priority first, then lane position. Within one lane
-- the effective priority is made non-increasing (a running minimum), so
-- what is taken from a lane is always a prefix of it and the head can move
-- past exactly what was taken.
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
             ORDER BY h.priority DESC, h.shard
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
               min(c.priority + CASE WHEN p_aging IS NULL OR p_aging <= interval '0' THEN 0
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
        WINDOW w AS (ORDER BY a.effective DESC, a.lane_seq ROWS UNBOUNDED PRECEDING)
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
-- entry's slot, lane position and body (for its terminal fact), or no row
-- when the job is not waiting (already claimed, or not in the ready ring).
--
-- The lane row is locked first so a concurrent claim cannot take the job
-- between our check and our tombstone: ready_take locks the same row.
CREATE OR REPLACE FUNCTION {schema}.ready_tombstone(p_job_id bigint)
RETURNS TABLE (slot integer, lane_seq bigint, queue text, attempt integer, run_lease bigint, body jsonb)
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
            SELECT e.slot, e.job_id, e.lane_seq, e.attempt, e.run_lease,
                   {schema}.job_body(e.kind, e.args, e.priority, e.max_attempts, e.created_at, e.metadata) AS body
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
        SELECT b.slot, b.lane_seq, v_entry.queue, l.attempt, l.run_lease, l.body
          FROM buried b JOIN live l ON l.slot = b.slot AND l.lane_seq = b.lane_seq;
    END LOOP;
END
$fn$;
$awa_template$)
ON CONFLICT (name) DO UPDATE SET ord = EXCLUDED.ord, body = EXCLUDED.body;
INSERT INTO awa.substrate_functions (name, ord, body) VALUES ('unique_take', 3, $awa_template$-- {schema}.unique_take(keys, job_ids): claim unique keys for jobs the
-- caller is about to create in the same transaction. Parallel arrays, one
-- element per job; a NULL key means "no uniqueness".
--
-- Returns, per element in input order, the key's owner:
--   job_ids[i]  this call took keys[i] for job_ids[i] (or keys[i] is NULL):
--               the caller MUST create job job_ids[i], carrying keys[i], in
--               this transaction;
--   another id  the key is held by that job: create nothing for element i.
-- Used by enqueue and dlq_retry; nothing else inserts into job_uniques.
--
-- The rule that must not be broken: a key row commits only together with
-- its job, and a job carrying a key is created only by the element that
-- inserted the key row. Ownership is therefore decided by what THIS
-- statement inserted (INSERT ... ON CONFLICT DO NOTHING RETURNING), never by
-- reading job_uniques afterwards: a later read can see an owner that
-- finished in between (READ COMMITTED: no row at all; REPEATABLE READ /
-- SERIALIZABLE: a row its snapshot still shows beside the new one).
--
-- Keys not inserted are looked up in a new statement. A key found neither
-- inserted nor owned (its owner finished between the two statements) goes
-- round again, until every key is settled.
--
-- Duplicate keys in one call: the first element wins, the others report it.
-- Keys are inserted in key order, so two batches sharing keys wait for each
-- other in one order and do not deadlock on them.
--
-- Isolation. READ COMMITTED: each statement sees the latest commits, so a
-- round settles every key except those whose owner vanished in between.
-- REPEATABLE READ / SERIALIZABLE: when the conflicting key row was committed
-- after the caller's snapshot, PostgreSQL refuses the insert with SQLSTATE
-- 40001 (serialization_failure, "could not serialize access due to
-- concurrent update"): roll back and retry the whole transaction. A key row
-- released after the snapshot does not conflict; this call takes the key.
CREATE OR REPLACE FUNCTION {schema}.unique_take(p_keys text[], p_job_ids bigint[])
RETURNS bigint[] LANGUAGE plpgsql AS $fn$
#variable_conflict use_column
DECLARE
    v_owners bigint[];
    v_taken  bigint[];
    v_round  integer := 0;
BEGIN
    IF cardinality(p_keys) IS DISTINCT FROM cardinality(p_job_ids) THEN
        RAISE EXCEPTION 'unique_take arrays differ in length' USING ERRCODE = 'invalid_parameter_value';
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
            INSERT INTO awa.job_uniques AS u (unique_key, job_id)
            SELECT DISTINCT ON (k.key) k.key, k.id
              FROM unnest(p_keys, p_job_ids, v_owners) WITH ORDINALITY AS k(key, id, owner, ord)
             WHERE k.key IS NOT NULL AND k.owner IS NULL
             ORDER BY k.key, k.ord
            ON CONFLICT DO NOTHING
            RETURNING u.job_id
        )
        SELECT coalesce(array_agg(t.job_id), '{}') INTO v_taken FROM taken t;

        -- 2. A new statement: what we inserted is ours; for the rest, the
        -- current owner, or NULL (go round again) when it has vanished.
        -- Two rows for one key can be visible only to a snapshot-isolation
        -- transaction that took the key itself after the old owner released
        -- it (the old row is still in its snapshot); the younger row (ours:
        -- our xid is newer than any xid the snapshot sees committed) wins.
        v_owners := ARRAY(
            SELECT CASE
                       WHEN k.owner IS NOT NULL THEN k.owner
                       WHEN k.id = ANY (v_taken) THEN k.id
                       ELSE (SELECT u.job_id FROM awa.job_uniques u
                              WHERE u.unique_key = k.key
                              ORDER BY age(u.xmin)
                              LIMIT 1)
                   END
              FROM unnest(p_keys, p_job_ids, v_owners) WITH ORDINALITY AS k(key, id, owner, ord)
             ORDER BY k.ord);
    END LOOP;
    RETURN v_owners;
END
$fn$;
$awa_template$)
ON CONFLICT (name) DO UPDATE SET ord = EXCLUDED.ord, body = EXCLUDED.body;
INSERT INTO awa.substrate_functions (name, ord, body) VALUES ('enqueue_oversized', 4, $awa_template$-- {schema}.enqueue_oversized(ord, queue, kind, bytes, limit): refuse an
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
INSERT INTO awa.substrate_functions (name, ord, body) VALUES ('enqueue_local', 5, $awa_template$-- {schema}.enqueue_local(...): the producer's work, inside the caller's
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
-- Returns one row per input element, in input order.
CREATE OR REPLACE FUNCTION {schema}.enqueue_local(
    p_queues       text[],
    p_kinds        text[],
    p_args         jsonb[],
    p_priorities   smallint[],
    p_run_at       timestamptz[],
    p_max_attempts integer[],
    p_unique_keys  text[],
    p_metadata     jsonb[]
) RETURNS TABLE (job_id bigint, inserted boolean, scheduled boolean)
LANGUAGE plpgsql AS $fn$
#variable_conflict use_column
DECLARE
    v_n      integer := coalesce(array_length(p_queues, 1), 0);
    v_ids    bigint[];
    v_owners bigint[];
    v_max    integer[];
    v_now_runnable boolean;
    v_limit     integer;
    v_big_ord   bigint;
    v_big_bytes bigint;
    a_ids bigint[]; a_queues text[]; a_priorities smallint[]; a_kinds text[]; a_args jsonb[];
    a_max integer[]; a_run_at timestamptz[]; a_keys text[]; a_meta jsonb[];
BEGIN
    IF v_n = 0 THEN
        RETURN;
    END IF;
    IF array_length(p_kinds, 1) IS DISTINCT FROM v_n OR array_length(p_args, 1) IS DISTINCT FROM v_n
       OR array_length(p_priorities, 1) IS DISTINCT FROM v_n OR array_length(p_run_at, 1) IS DISTINCT FROM v_n
       OR array_length(p_max_attempts, 1) IS DISTINCT FROM v_n OR array_length(p_unique_keys, 1) IS DISTINCT FROM v_n
       OR array_length(p_metadata, 1) IS DISTINCT FROM v_n THEN
        RAISE EXCEPTION 'enqueue arrays differ in length' USING ERRCODE = 'invalid_parameter_value';
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

    -- The common case, everything runnable now and no unique keys, goes
    -- straight to the ready ring without splitting the arrays.
    IF NOT EXISTS (SELECT 1 FROM unnest(p_unique_keys, p_run_at) AS k(key, run_at)
                    WHERE k.key IS NOT NULL OR k.run_at > now()) THEN
        PERFORM 1 FROM {schema}.ready_append(
            v_ids, p_queues, p_priorities, p_kinds, p_args,
            array_fill(0, ARRAY[v_n]), v_max, array_fill(0::bigint, ARRAY[v_n]),
            array_fill(now(), ARRAY[v_n]), p_unique_keys, p_metadata);
        RETURN QUERY SELECT i.id, true, false FROM unnest(v_ids) WITH ORDINALITY AS i(id, ord) ORDER BY i.ord;
        RETURN;
    END IF;

    -- Ownership of every key is decided by what unique_take inserted for
    -- it; an element is created below only when it owns its key.
    IF EXISTS (SELECT 1 FROM unnest(p_unique_keys) k WHERE k IS NOT NULL) THEN
        v_owners := {schema}.unique_take(p_unique_keys, v_ids);
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
                      v_max, p_unique_keys, p_metadata)
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
INSERT INTO awa.substrate_functions (name, ord, body) VALUES ('enqueue', 6, $awa_template$-- {schema}.enqueue(queues, kinds, args, priorities, run_at, max_attempts,
--                  unique_keys, metadata): the public SQL producer function
-- (contract version 1; docs/sql-producer.md). Arguments, result and
-- errors are those of {schema}.enqueue_local (fn_enqueue.sql).
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
    p_metadata     jsonb[]
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
            p_unique_keys, p_metadata);
    ELSE
        RETURN QUERY EXECUTE format(
            'SELECT * FROM %I.enqueue_local($1, $2, $3, $4, $5, $6, $7, $8)', v_write)
            USING p_queues, p_kinds, p_args, p_priorities, p_run_at, p_max_attempts,
                  p_unique_keys, p_metadata;
    END IF;
END
$fn$;
$awa_template$)
ON CONFLICT (name) DO UPDATE SET ord = EXCLUDED.ord, body = EXCLUDED.body;
INSERT INTO awa.substrate_functions (name, ord, body) VALUES ('ready_slot_live', 7, $awa_template$-- {schema}.ready_slot_live(slot): why queue-ring slot `slot` still holds
-- runnable work, or NULL when it holds none: every entry is past its lane
-- head or tombstoned. Used by ring_prune before and after locking the slot.
CREATE OR REPLACE FUNCTION {schema}.ready_slot_live(p_slot integer)
RETURNS text LANGUAGE sql STABLE AS $fn$
    SELECT 'job ' || e.job_id || ' is still waiting to be claimed'
      FROM {schema}.ready_entries e
      JOIN {schema}.lane_heads h ON h.queue = e.queue AND h.priority = e.priority AND h.shard = e.shard
     WHERE e.slot = p_slot
       AND e.lane_seq > h.head_seq
       AND NOT EXISTS (SELECT 1 FROM {schema}.ready_tombstones t
                        WHERE t.slot = e.slot AND t.job_id = e.job_id AND t.lane_seq = e.lane_seq)
     LIMIT 1
$fn$;
$awa_template$)
ON CONFLICT (name) DO UPDATE SET ord = EXCLUDED.ord, body = EXCLUDED.body;
INSERT INTO awa.substrate_functions (name, ord, body) VALUES ('ready_relocate', 8, $awa_template$-- {schema}.ready_relocate(slot, limit): move up to `limit` jobs still
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
-- Returns how many jobs were moved.
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
             max_attempts, run_lease, created_at, ready_at, unique_key, metadata)
        SELECT v_cur, m.queue, m.priority, m.shard, m.lane_seq, m.job_id, m.kind, m.args, m.attempt,
               m.max_attempts, m.run_lease, m.created_at, m.ready_at, m.unique_key, m.metadata
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
INSERT INTO awa.substrate_functions (name, ord, body) VALUES ('deferred_schedule', 9, $awa_template$-- {schema}.deferred_schedule(...): hold jobs that are not runnable yet.
-- Parallel arrays, one element per job; run_at is when it becomes due.
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
) RETURNS void LANGUAGE sql AS $fn$
    INSERT INTO {schema}.deferred_jobs
        (job_id, queue, priority, kind, args, attempt, max_attempts, run_lease, run_at,
         reason, created_at, unique_key, metadata)
    SELECT i.job_id, i.queue, i.priority, i.kind, i.args, 0, i.max_attempts, 0, i.run_at,
           'scheduled', now(), i.unique_key, i.metadata
      FROM unnest(p_job_ids, p_queues, p_priorities, p_kinds, p_args, p_max_attempts,
                  p_run_at, p_unique_keys, p_metadata)
           AS i(job_id, queue, priority, kind, args, max_attempts, run_at, unique_key, metadata)
$fn$;
$awa_template$)
ON CONFLICT (name) DO UPDATE SET ord = EXCLUDED.ord, body = EXCLUDED.body;
INSERT INTO awa.substrate_functions (name, ord, body) VALUES ('deferred_promote', 10, $awa_template$-- {schema}.deferred_promote(limit): move up to `limit` due jobs into the
-- ready ring, earliest first. Returns how many moved.
--
-- Safe with several promoters: rows are taken FOR UPDATE SKIP LOCKED, so
-- two promoters split the due work instead of moving a job twice; the
-- delete and the append commit together or not at all.
CREATE OR REPLACE FUNCTION {schema}.deferred_promote(p_limit integer)
RETURNS integer LANGUAGE plpgsql AS $fn$
#variable_conflict use_column
DECLARE
    v_count integer;
BEGIN
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
          ARRAY(SELECT metadata FROM ordered));
    RETURN v_count;
END
$fn$;
$awa_template$)
ON CONFLICT (name) DO UPDATE SET ord = EXCLUDED.ord, body = EXCLUDED.body;
INSERT INTO awa.substrate_functions (name, ord, body) VALUES ('claim', 11, $awa_template$-- {schema}.claim(queue, limit, cand_seq, cand_xid, instance): claim up to
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
INSERT INTO awa.substrate_functions (name, ord, body) VALUES ('finish', 12, $awa_template$-- {schema}.finish(job_ids, run_leases, claim_slots, batch_ids, items,
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
--   cancelled / failed, or completed from parked -> one done_entries row each,
--                               with the body copied in
--   dead_lettered                   -> dlq_entries (queue opted in)
--   retryable / snoozed / available -> deferred_jobs, promoted when due
-- plus one count delta per (slot, queue, state). Retries past
-- max_attempts fail (or dead-letter); snooze and release do not count the
-- attempt.
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
    IF EXISTS (SELECT 1 FROM unnest(p_outcomes) o
                WHERE o IS NULL OR o NOT IN ('complete', 'retry', 'snooze', 'cancel', 'fail', 'release', 'rescue')) THEN
        RAISE EXCEPTION 'unknown finish outcome in %', p_outcomes
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'Use complete, retry, snooze, cancel, fail, release or rescue.';
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
               b.ready_slots, b.ready_seqs, b.priorities, b.shards, b.keyed, ch.last_link, ch.closed
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
               (i.outcome <> 'complete' OR coalesce(i.item = ANY (b.keyed), false)) AS needs_body
          FROM input i
          LEFT JOIN batches b ON b.slot = i.claim_slot AND b.batch_id = i.batch_id
    ),
    live_batch AS (
        SELECT p.job_id, p.run_lease, p.claim_slot, p.batch_id, p.item, p.outcome, p.delay,
               p.error, p.ord, 'batch'::text AS src, p.queue, p.attempt, p.hist_slot, p.hist_seq,
               p.lane_priority, p.lane_shard, NULL::jsonb AS hist_body,
               e.kind, e.args, e.priority, e.max_attempts, e.created_at, e.unique_key, e.metadata,
               coalesce(m.dlq_enabled, false) AS dlq
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
               coalesce(m.dlq_enabled, false) AS dlq
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
        -- Rare rows, so they carry the body: no lookup to hydrate them.
        INSERT INTO {schema}.done_entries
            (slot, job_id, run_lease, queue, state, attempt, body, last_error)
        SELECT w.hist_slot, w.job_id, w.run_lease, w.queue, w.next_state, w.attempt,
               coalesce(w.hist_body,
                        {schema}.job_body(w.kind, w.args, w.priority, w.max_attempts, w.created_at, w.metadata)),
               w.error
          FROM won w
         WHERE w.next_state IN ('cancelled', 'failed')
            OR (w.next_state = 'completed' AND w.src = 'parked')
    ),
    deferred AS (
        INSERT INTO {schema}.deferred_jobs
            (job_id, queue, priority, kind, args, attempt, max_attempts, run_lease, run_at,
             reason, created_at, unique_key, metadata, last_error)
        SELECT w.job_id, w.queue, w.priority, w.kind, w.args,
               CASE WHEN w.next_state = 'retryable' THEN w.attempt ELSE w.attempt - 1 END,
               w.max_attempts, w.run_lease,
               CASE WHEN w.next_state = 'available' THEN now()
                    ELSE now() + coalesce(w.delay,
                        make_interval(secs => least(power(2, w.attempt), 3600) * (0.75 + random() * 0.5)))
               END,
               CASE w.next_state WHEN 'retryable' THEN 'retry' WHEN 'snoozed' THEN 'snoozed' ELSE 'released' END,
               w.created_at, w.unique_key, w.metadata, w.error
          FROM won w
         WHERE w.next_state IN ('retryable', 'snoozed', 'available')
    ),
    dead AS (
        INSERT INTO {schema}.dlq_entries
            (job_id, queue, priority, kind, args, attempt, max_attempts, run_lease,
             created_at, last_error, metadata, unique_key)
        SELECT w.job_id, w.queue, w.priority, w.kind, w.args, w.attempt, w.max_attempts,
               w.run_lease, w.created_at, w.error, w.metadata, w.unique_key
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
    unique_released AS (
        DELETE FROM awa.job_uniques u
         WHERE u.unique_key = ANY (ARRAY(
                   SELECT w.unique_key FROM won w
                    WHERE w.unique_key IS NOT NULL
                      AND w.next_state IN ('completed', 'cancelled', 'failed', 'dead_lettered')))
           AND u.job_id = ANY (ARRAY(SELECT w.job_id FROM won w))
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
INSERT INTO awa.substrate_functions (name, ord, body) VALUES ('heartbeat', 13, $awa_template$-- {schema}.heartbeat(job_id, run_lease, claim_slot, batch_id, item,
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
CREATE OR REPLACE FUNCTION {schema}.heartbeat(
    p_job_id bigint, p_run_lease bigint, p_claim_slot integer, p_batch_id bigint, p_item integer,
    p_percent smallint, p_message text, p_checkpoint jsonb
) RETURNS boolean LANGUAGE plpgsql AS $fn$
#variable_conflict use_column
DECLARE
    v_lease_slot integer;
BEGIN
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
INSERT INTO awa.substrate_functions (name, ord, body) VALUES ('cancel_job', 14, $awa_template$-- {schema}.cancel_job(job_id): cancel a job wherever it is.
--   waiting in the ready ring -> tombstone + terminal fact (with its body)
--   deferred                  -> removed, terminal fact carries the body
--   running                   -> its live attempt is finished as cancelled
--                                through the guarded path; the worker's later
--                                writes for that attempt are rejected
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
        INSERT INTO {schema}.done_entries (slot, job_id, run_lease, queue, state, attempt, body)
        VALUES (v_t.slot, p_job_id, v_t.run_lease, v_t.queue, 'cancelled', v_t.attempt, v_t.body);
        INSERT INTO {schema}.count_deltas (slot, queue, state, delta) VALUES (v_t.slot, v_t.queue, 'cancelled', 1);
        DELETE FROM awa.job_uniques WHERE job_id = p_job_id;
        RETURN 'available';
    END IF;

    DELETE FROM {schema}.deferred_jobs d WHERE d.job_id = p_job_id RETURNING * INTO v_d;
    IF FOUND THEN
        SELECT g.slot INTO v_slot
          FROM {schema}.ring_ledger g WHERE g.ring = 'queue' ORDER BY g.generation DESC LIMIT 1;
        INSERT INTO {schema}.done_entries (slot, job_id, run_lease, queue, state, attempt, body)
        VALUES (v_slot, p_job_id, v_d.run_lease, v_d.queue, 'cancelled', v_d.attempt,
                {schema}.job_body(v_d.kind, v_d.args, v_d.priority, v_d.max_attempts, v_d.created_at, v_d.metadata));
        INSERT INTO {schema}.count_deltas (slot, queue, state, delta) VALUES (v_slot, v_d.queue, 'cancelled', 1);
        DELETE FROM awa.job_uniques WHERE job_id = p_job_id;
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
            RETURN 'running';
        END IF;
    END IF;
    RETURN NULL;
END
$fn$;
$awa_template$)
ON CONFLICT (name) DO UPDATE SET ord = EXCLUDED.ord, body = EXCLUDED.body;
INSERT INTO awa.substrate_functions (name, ord, body) VALUES ('exec_slot_live', 15, $awa_template$-- {schema}.exec_slot_live(ring, slot): why a ring slot still holds a live
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
CREATE OR REPLACE FUNCTION {schema}.exec_slot_live(p_ring text, p_slot integer)
RETURNS text LANGUAGE sql STABLE AS $fn$
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
    LIMIT 1
$fn$;
$awa_template$)
ON CONFLICT (name) DO UPDATE SET ord = EXCLUDED.ord, body = EXCLUDED.body;
INSERT INTO awa.substrate_functions (name, ord, body) VALUES ('rescue_stale', 16, $awa_template$-- {schema}.rescue_stale(stale, limit): finish abandoned attempts as
-- retries, through the guarded finish path (so a worker that was only slow
-- and finishes later is rejected, and at most one of them wins).
-- Abandoned means: open, and either claimed more than `stale` ago with no
-- lease heartbeat within `stale`, or past its hard deadline, or waiting for
-- a callback that timed out; parked attempts (exec_park) likewise. Returns
-- how many were rescued.
CREATE OR REPLACE FUNCTION {schema}.rescue_stale(p_stale interval, p_limit integer)
RETURNS integer LANGUAGE plpgsql AS $fn$
#variable_conflict use_column
DECLARE
    v_count integer;
BEGIN
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
    SELECT count(*) INTO v_count
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
INSERT INTO awa.substrate_functions (name, ord, body) VALUES ('exec_park', 17, $awa_template$-- {schema}.exec_park(ring, slot, limit): move up to `limit` open attempts
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
-- Returns how many attempts were parked.
CREATE OR REPLACE FUNCTION {schema}.exec_park(p_ring text, p_slot integer, p_limit integer)
RETURNS integer LANGUAGE plpgsql AS $fn$
#variable_conflict use_column
DECLARE
    v_slots   integer[];
    v_batches bigint[];
    v_items   integer[];
    v_parked  integer;
BEGIN
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
               e.kind, e.args, e.priority, e.max_attempts, e.created_at, e.unique_key, e.metadata
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
             ready_seq, kind, args, priority, max_attempts, created_at, unique_key, metadata)
        SELECT o.job_id, o.run_lease, o.slot, o.batch_id, o.item, o.queue, o.attempt, o.claimed_at,
               l.deadline_at, o.instance_id, l.heartbeat_at, l.callback_id, l.callback_timeout,
               o.ready_seq, o.kind, o.args, o.priority, o.max_attempts, o.created_at,
               o.unique_key, o.metadata
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
INSERT INTO awa.substrate_functions (name, ord, body) VALUES ('dlq_retry', 18, $awa_template$-- {schema}.dlq_retry(job_id, queue, all): put dead-lettered jobs back as
-- fresh work (attempt 0, same id, run_lease continuing so any old writer
-- stays rejected). Either one id, or every entry (optionally of one queue).
--
-- Returns one row per selected entry: held_by NULL when it was retried;
-- otherwise the entry stays in the DLQ and held_by names the job that now
-- holds its unique_key.
--
-- The rule that must not be broken: a job that was enqueued with a unique
-- key runs again only as the key's owner. Dead-lettering released the key,
-- so the retry takes it again through unique_take (the same decision
-- enqueue makes, in the same transaction as the append). When a newer job
-- holds the key, retrying would make two unfinished jobs with one key, and
-- dropping the key would silently drop the job's uniqueness: the entry is
-- kept instead, for the operator to retry after that job finishes, or to
-- purge.
CREATE OR REPLACE FUNCTION {schema}.dlq_retry(p_job_id bigint, p_queue text, p_all boolean)
RETURNS TABLE (job_id bigint, unique_key text, held_by bigint)
LANGUAGE plpgsql AS $fn$
#variable_conflict use_column
DECLARE
    v_ids    bigint[];
    v_keys   text[];
    v_owners bigint[];
BEGIN
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
            ARRAY(SELECT metadata FROM ordered)) a
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
INSERT INTO awa.substrate_functions (name, ord, body) VALUES ('jobs', 19, $awa_template$-- {schema}.live_jobs / {schema}.jobs: every non-terminal job (live_jobs)
-- or every job (jobs) the substrate knows, with the state the planes
-- together give it. live_jobs never reads history, so its cost is bounded
-- by live work, not by retained history. For operators and tests; the hot path never reads it.
--   available      ready entry past its lane head, not tombstoned
--   running        an open item of a claim batch (no closure link lists
--                  it), or a parked attempt
--   scheduled / retryable / snoozed   deferred row (released: available)
--   completed / failed / cancelled    terminal_jobs
--   dead_lettered  dlq entry
-- Live rows are never hidden: a retired slot holds none unless a late
-- writer committed one there, and then it must show (and the slot is
-- un-retired by the next prune). Only terminal_jobs leaves retired slots out.
CREATE OR REPLACE VIEW {schema}.live_jobs AS
SELECT e.job_id AS id, e.queue, e.kind, e.args, e.priority, 'available'::text AS state,
       e.attempt, e.max_attempts, e.run_lease, e.created_at, e.ready_at AS at,
       NULL::text AS last_error, e.metadata
  FROM {schema}.ready_entries e
  JOIN {schema}.lane_heads h ON h.queue = e.queue AND h.priority = e.priority AND h.shard = e.shard
 WHERE e.lane_seq > h.head_seq
   AND NOT EXISTS (SELECT 1 FROM {schema}.ready_tombstones t
                    WHERE t.slot = e.slot AND t.job_id = e.job_id AND t.lane_seq = e.lane_seq)
UNION ALL
SELECT u.job_id, b.queue, e.kind, e.args, e.priority, 'running', u.attempt, e.max_attempts,
       u.run_lease, e.created_at, b.claimed_at, NULL, e.metadata
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
SELECT p.job_id, p.queue, p.kind, p.args, p.priority, 'running', p.attempt, p.max_attempts,
       p.run_lease, p.created_at, p.claimed_at, NULL, p.metadata
  FROM {schema}.parked_attempts p
UNION ALL
SELECT d.job_id, d.queue, d.kind, d.args, d.priority,
       CASE d.reason WHEN 'retry' THEN 'retryable' WHEN 'released' THEN 'available' ELSE d.reason END,
       d.attempt, d.max_attempts, d.run_lease, d.created_at, d.run_at, d.last_error, d.metadata
  FROM {schema}.deferred_jobs d;

-- {schema}.jobs: live_jobs plus terminal history and dead letters.
CREATE OR REPLACE VIEW {schema}.jobs AS
SELECT * FROM {schema}.live_jobs
UNION ALL
SELECT t.id, t.queue, t.kind, t.args, t.priority, t.state, t.attempt, t.max_attempts,
       t.run_lease, t.created_at, t.finalized_at, t.last_error, t.metadata
  FROM {schema}.terminal_jobs t
UNION ALL
SELECT q.job_id, q.queue, q.kind, q.args, q.priority, 'dead_lettered', q.attempt, q.max_attempts,
       q.run_lease, q.created_at, q.dead_at, q.last_error, q.metadata
  FROM {schema}.dlq_entries q;
$awa_template$)
ON CONFLICT (name) DO UPDATE SET ord = EXCLUDED.ord, body = EXCLUDED.body;
INSERT INTO awa.substrate_functions (name, ord, body) VALUES ('routed_jobs', 20, $awa_template$-- {schema}.routed_jobs(): every job of every substrate the storage routing
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
INSERT INTO awa.substrate_functions (name, ord, body) VALUES ('terminal_job', 21, $awa_template$-- {schema}.terminal_job(job_id): the terminal_jobs rows of one job, found
-- through the indexes (done_entries by job id, done_batches by the id
-- range each batch covers) instead of unnesting every batch as a filter on
-- the view would. The two branches are terminal_jobs' own, with the job
-- filter inside: keep them in step with install_history_plane.sql.
CREATE OR REPLACE FUNCTION {schema}.terminal_job(p_job_id bigint)
RETURNS SETOF {schema}.terminal_jobs LANGUAGE sql STABLE AS $fn$
    SELECT d.job_id, d.queue, d.body ->> 'kind', d.body -> 'args',
           (d.body ->> 'priority')::smallint, d.state, d.attempt,
           (d.body ->> 'max_attempts')::integer, d.run_lease,
           (d.body ->> 'created_at')::timestamptz, d.finalized_at,
           d.last_error, d.body -> 'metadata', d.slot
      FROM {schema}.done_entries d
     WHERE d.job_id = p_job_id
       AND NOT EXISTS (SELECT 1 FROM {schema}.ring_retirements x
                        WHERE x.ring = 'queue' AND x.slot = d.slot)
    UNION ALL
    SELECT u.job_id, b.queue, r.kind, r.args, r.priority, 'completed'::text, u.attempt,
           r.max_attempts, u.run_lease, r.created_at, b.finalized_at, NULL::text, r.metadata,
           b.slot
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
$fn$;
$awa_template$)
ON CONFLICT (name) DO UPDATE SET ord = EXCLUDED.ord, body = EXCLUDED.body;
INSERT INTO awa.substrate_functions (name, ord, body) VALUES ('job_body', 22, $awa_template$-- {schema}.job_body(kind, args, priority, max_attempts, created_at, metadata):
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
INSERT INTO awa.substrate_functions (name, ord, body) VALUES ('history_retire_slot', 23, $awa_template$-- {schema}.history_retire_slot(slot): move queue-ring slot `slot`'s count
-- deltas into the rollups, in the transaction that retires the slot. The
-- delete is MVCC: snapshots older than the retirement still count the
-- deltas (and not the new rollup values), newer ones count the rollups; the
-- later TRUNCATE of the slot changes nothing any snapshot can still see.
--
-- It also moves history_horizon past the slot's newest job id, so a lookup
-- of a job that is no longer anywhere can say its history was pruned, and
-- when, instead of "no such job".
CREATE OR REPLACE FUNCTION {schema}.history_retire_slot(p_slot integer)
RETURNS void LANGUAGE sql AS $fn$
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
           pruned_at = now()
$fn$;
$awa_template$)
ON CONFLICT (name) DO UPDATE SET ord = EXCLUDED.ord, body = EXCLUDED.body;
INSERT INTO awa.substrate_functions (name, ord, body) VALUES ('ring_helpers', 24, $awa_template$-- Small helpers of ring_rotate and ring_prune.

-- {schema}.ring_slot_empty(ring, slot): whether every table of a ring slot
-- is empty. The families per ring are listed in ring_families.
CREATE OR REPLACE FUNCTION {schema}.ring_slot_empty(p_ring text, p_slot integer)
RETURNS boolean LANGUAGE plpgsql STABLE AS $fn$
DECLARE
    v_family text;
    v_found  boolean;
BEGIN
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
-- Every family of a ring is truncated together, as one unit.
CREATE OR REPLACE FUNCTION {schema}.ring_families(p_ring text)
RETURNS text[] LANGUAGE sql IMMUTABLE AS $fn$
    SELECT CASE p_ring
        WHEN 'queue' THEN ARRAY['ready_entries', 'ready_tombstones', 'done_entries', 'done_batches', 'count_deltas']
        WHEN 'claim' THEN ARRAY['claim_batches', 'claim_closures']
        WHEN 'lease' THEN ARRAY['leases']
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
        RAISE EXCEPTION 'unknown ring %', p_ring USING ERRCODE = 'invalid_parameter_value',
              HINT = 'Rings are queue, lease and claim.';
    END IF;
    RETURN v_slots;
END
$fn$;

-- {schema}.ring_slot_live(ring, slot): why a slot still holds live data, or
-- NULL: the ready plane's predicate for the queue ring, then the execution
-- plane's for every ring.
CREATE OR REPLACE FUNCTION {schema}.ring_slot_live(p_ring text, p_slot integer)
RETURNS text LANGUAGE sql STABLE AS $fn$
    SELECT coalesce(CASE WHEN p_ring = 'queue' THEN {schema}.ready_slot_live(p_slot) END,
                    {schema}.exec_slot_live(p_ring, p_slot))
$fn$;

-- {schema}.ring_slot_sealed_at(ring, slot): when the ring last moved off a
-- slot that is not its current one. Rotation always moves to the next slot,
-- so generation g writes slot g % slots, and the slot was sealed by the
-- generation after the last one that wrote it: one primary-key probe.
CREATE OR REPLACE FUNCTION {schema}.ring_slot_sealed_at(p_ring text, p_slot integer)
RETURNS timestamptz LANGUAGE sql STABLE AS $fn$
    WITH cur AS (
        SELECT l.generation, l.slot FROM {schema}.ring_ledger l
         WHERE l.ring = p_ring ORDER BY l.generation DESC LIMIT 1
    )
    SELECT l.rotated_at
      FROM cur c
      JOIN {schema}.ring_ledger l
        ON l.ring = p_ring
       AND l.generation = c.generation
                          - ((c.slot - p_slot + {schema}.ring_slot_count(p_ring)) % {schema}.ring_slot_count(p_ring))
                          + 1
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
INSERT INTO awa.substrate_functions (name, ord, body) VALUES ('ring_rotate', 25, $awa_template$-- {schema}.ring_rotate(ring, by): move a ring's current slot to the next one.
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
INSERT INTO awa.substrate_functions (name, ord, body) VALUES ('ring_prune', 26, $awa_template$-- {schema}.ring_prune(ring, lock_timeout_ms, rotate_interval): reclaim a
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
INSERT INTO awa.substrate_functions (name, ord, body) VALUES ('storage_transfer_in', 27, $awa_template$-- {schema}.storage_transfer_in(from, limit): move up to `limit` deferred
-- jobs (scheduled, retryable, snoozed, released) and up to `limit`
-- dead-lettered jobs from substrate `from` into this one, in one
-- transaction. Returns how many rows moved.
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
-- awa.job_uniques), so nothing about the key changes.
CREATE OR REPLACE FUNCTION {schema}.storage_transfer_in(p_from text, p_limit integer)
RETURNS integer LANGUAGE plpgsql AS $fn$
DECLARE
    v_deferred integer;
    v_dead     integer;
BEGIN
    IF p_from IS NULL OR to_regnamespace(p_from) = to_regnamespace('{schema}') THEN
        RAISE EXCEPTION 'storage_transfer_in: the source must be another substrate (got %)', coalesce(p_from, 'NULL')
            USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_class c
                     JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
                    WHERE n.nspname = p_from AND c.relname = 'substrate_info' AND c.relkind = 'r') THEN
        RAISE EXCEPTION 'storage_transfer_in: % is not a substrate', quote_literal(p_from)
            USING ERRCODE = 'invalid_schema_name';
    END IF;
    EXECUTE format($q$
        WITH moved AS (
            DELETE FROM %1$I.deferred_jobs d
             WHERE d.job_id IN (SELECT x.job_id FROM %1$I.deferred_jobs x
                                 ORDER BY x.run_at LIMIT $1 FOR UPDATE SKIP LOCKED)
            RETURNING d.job_id, d.queue, d.priority, d.kind, d.args, d.attempt, d.max_attempts,
                      d.run_lease, d.run_at, d.reason, d.created_at, d.unique_key, d.metadata,
                      d.last_error
        )
        INSERT INTO {schema}.deferred_jobs
            (job_id, queue, priority, kind, args, attempt, max_attempts, run_lease, run_at,
             reason, created_at, unique_key, metadata, last_error)
        SELECT * FROM moved$q$, p_from) USING p_limit;
    GET DIAGNOSTICS v_deferred = ROW_COUNT;
    EXECUTE format($q$
        WITH moved AS (
            DELETE FROM %1$I.dlq_entries d
             WHERE d.job_id IN (SELECT x.job_id FROM %1$I.dlq_entries x
                                 ORDER BY x.dead_at LIMIT $1 FOR UPDATE SKIP LOCKED)
            RETURNING d.job_id, d.queue, d.priority, d.kind, d.args, d.attempt, d.max_attempts,
                      d.run_lease, d.created_at, d.dead_at, d.last_error, d.metadata, d.unique_key
        )
        INSERT INTO {schema}.dlq_entries
            (job_id, queue, priority, kind, args, attempt, max_attempts, run_lease, created_at,
             dead_at, last_error, metadata, unique_key)
        SELECT * FROM moved$q$, p_from) USING p_limit;
    GET DIAGNOSTICS v_dead = ROW_COUNT;
    RETURN v_deferred + v_dead;
END
$fn$;
$awa_template$)
ON CONFLICT (name) DO UPDATE SET ord = EXCLUDED.ord, body = EXCLUDED.body;

-- The default substrate, through the same helper as every custom one.
SELECT awa.install_queue_storage_substrate('awa');
