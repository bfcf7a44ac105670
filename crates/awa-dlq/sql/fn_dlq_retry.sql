-- {schema}.dlq_retry(job_id, queue, all): put dead-lettered jobs back as
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
