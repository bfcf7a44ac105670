-- {schema}.dlq_retry(job_id, queue, all): put dead-lettered jobs back as
-- fresh work (attempt 0, same id, run_lease continuing so any old writer
-- stays rejected). Either one id, or every entry (optionally of one queue).
-- Returns the ids retried.
CREATE OR REPLACE FUNCTION {schema}.dlq_retry(p_job_id bigint, p_queue text, p_all boolean)
RETURNS SETOF bigint LANGUAGE plpgsql AS $fn$
#variable_conflict use_column
BEGIN
    RETURN QUERY
    WITH taken AS (
        DELETE FROM {schema}.dlq_entries d
         WHERE (p_all OR d.job_id = p_job_id)
           AND (p_queue IS NULL OR d.queue = p_queue)
        RETURNING d.*
    ),
    ordered AS (SELECT * FROM taken ORDER BY dead_at, job_id)
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
        ARRAY(SELECT NULL::text FROM ordered),
        ARRAY(SELECT metadata FROM ordered)) a;
END
$fn$;
