-- {schema}.unique_take(keys, job_ids): claim unique keys for jobs the
-- caller is about to create in the same transaction. Parallel arrays, one
-- element per job; a NULL key means "no uniqueness".
--
-- Returns, per element in input order, the key's owner:
--   job_ids[i]  this call took keys[i] for job_ids[i] (or keys[i] is NULL):
--               the caller MUST create job job_ids[i], carrying keys[i], in
--               this transaction;
--   another id  the key is held by that job: create nothing for element i.
-- Used by enqueue, dlq_retry and failure_retry; nothing else inserts into
-- job_uniques.
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
