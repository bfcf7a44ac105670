-- {schema}.failure_retry(job_ids): put failed or cancelled jobs back as
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
