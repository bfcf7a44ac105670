-- {schema}.unique_take(keys, job_ids, holds): claim unique keys for jobs
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
--
-- The end of a window. A key spec's key names the window of the
-- transaction's start (now()), which may have ended by the clock when
-- this runs. Rows a kept state holds are deleted only a minute past
-- their window (the grace, unique_held), so until then the row decides
-- as above. A key found with no row once its window's grace has passed
-- is refused with 40001: roll back and retry in the current window.
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

        -- A key whose window's grace has passed, found with no row (so
        -- inserted just now): its window may have had a job whose kept
        -- row was deleted once the grace passed, and which this call
        -- cannot see. Refused; the retry's transaction has a new window.
        -- The clock is read after the insert, whose conflict check waited
        -- for any delete of the row in flight, and deletes happen only
        -- past the grace (unique_held, unique_prune): a clock before it
        -- means the insert found every row kept for the window.
        IF cardinality(v_taken) > 0 AND p_holds IS NOT NULL AND EXISTS (
               SELECT 1 FROM unnest(p_job_ids, p_holds) AS k(id, hold)
                WHERE k.id = ANY (v_taken) AND k.hold ? 'until'
                  AND clock_timestamp() >= to_timestamp((k.hold ->> 'until')::bigint) + interval '1 minute') THEN
            RAISE EXCEPTION 'a unique key''s window ended more than a minute before this transaction took the key'
                USING ERRCODE = 'serialization_failure',
                      DETAIL = 'A key spec with a period names the window of the transaction''s start; a job of that window may have finished and released the key since.',
                      HINT = 'Roll back and retry the transaction: the retry enqueues in the current window.';
        END IF;

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
