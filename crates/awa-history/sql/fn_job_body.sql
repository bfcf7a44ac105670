-- {schema}.job_body(kind, args, priority, max_attempts, created_at, metadata):
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
