-- {schema}.deferred_promote(limit): move up to `limit` due jobs into the
-- ready ring, earliest first, with their attempt records. Returns how many
-- moved.
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
          ARRAY(SELECT metadata FROM ordered),
          ARRAY(SELECT attempts FROM ordered));
    RETURN v_count;
END
$fn$;
