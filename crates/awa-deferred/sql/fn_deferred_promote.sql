-- {schema}.deferred_promote(limit): move up to `limit` due jobs into the
-- ready ring, earliest first, with their attempt records. Returns how many
-- moved.
--
-- Safe with several promoters: rows are taken FOR UPDATE SKIP LOCKED, so
-- two promoters split the due work instead of moving a job twice; the
-- delete and the append commit together or not at all.
--
-- `limit` is 1 to 10000 (awa_core::bounds::MAINT_LIMIT; SQLSTATE 22023).
CREATE OR REPLACE FUNCTION {schema}.deferred_promote(p_limit integer)
RETURNS integer LANGUAGE plpgsql AS $fn$
#variable_conflict use_column
DECLARE
    v_count integer;
BEGIN
    IF p_limit IS NULL OR p_limit NOT BETWEEN 1 AND 10000 THEN
        RAISE EXCEPTION 'deferred_promote: limit must be 1 to 10000 (got %)', coalesce(p_limit::text, 'NULL')
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'Rows one maintenance call moves (awa_core::bounds::MAINT_LIMIT); the leader promotes 2000 at a time.';
    END IF;
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
          -- A created_at outside what ready_append accepts (only a
          -- superuser's write can hold one) becomes now(), rather than
          -- refusing every promotion behind it.
          ARRAY(SELECT CASE WHEN created_at >= '1970-01-01 00:00:00+00'
                             AND created_at < '10000-01-01 00:00:00+00'
                            THEN created_at ELSE now() END FROM ordered),
          ARRAY(SELECT unique_key FROM ordered),
          ARRAY(SELECT metadata FROM ordered),
          ARRAY(SELECT attempts FROM ordered));
    RETURN v_count;
END
$fn$;
