-- {schema}.enqueue_oversized(ord, queue, kind, bytes, limit): refuse an
-- enqueue because job `ord` has `bytes` of args plus metadata (as JSON
-- text), over the substrate's max_job_bytes `limit`. Always raises SQLSTATE
-- 54000 (program_limit_exceeded); never returns.
--
-- The one wording of the refusal, shared by every enqueue path
-- ({schema}.enqueue, call_enqueue_append.sql), which
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
