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
