-- {schema}.enqueue(queues, kinds, args, priorities, run_at, max_attempts,
--                  unique_keys, metadata [, unique [, traceparent
--                  [, tracestate]]]): the public SQL producer function
-- (contract version 1; docs/sql-producer.md; the trailing arguments are
-- optional, so version-1 calls are unchanged). Arguments, result and
-- errors are those of {schema}.enqueue_local (fn_enqueue.sql), plus:
--
-- * traceparent, tracestate (optional, one per call): the producer's W3C
--   trace context. Stored in the metadata of every job of the call as
--   {"awa_trace": {"traceparent": ..., "tracestate": ...}} (tracestate
--   left out when NULL or empty), except where an element's metadata is
--   not a JSON object or already has "awa_trace". A traceparent that is
--   not version 00 (00-<32 hex>-<16 hex>-<2 hex>, ids not all zero), a
--   tracestate over 512 bytes or without a traceparent refuse the call
--   with SQLSTATE 22023 before anything is written. The stored context is
--   what the worker's span takes as its parent (awa::otel). Both NULL
--   (the default): the metadata is passed on untouched.
--
-- Routing: the jobs go to the substrate the storage-transition state says
-- receives writes now (awa.storage_transition_state: the active substrate,
-- or the target while a transition is mixed), whichever substrate's
-- enqueue was called. So `awa.enqueue(...)` is a stable entry point for
-- any producer (raw SQL, the Python client), and a caller whose idea of
-- the routing is stale still writes where the state says, in its own
-- transaction. Under READ COMMITTED the state is read by this call; under
-- REPEATABLE READ or SERIALIZABLE it is the state of the transaction's
-- snapshot, so a transaction begun before a step may still write where
-- the routing was (the transition keeps reading that substrate until such
-- transactions are gone: see storage_draining in control_schema.sql).
-- Forwarding to another substrate costs a dynamic statement; the Rust
-- client avoids it by calling the write substrate's enqueue directly.
CREATE OR REPLACE FUNCTION {schema}.enqueue(
    p_queues       text[],
    p_kinds        text[],
    p_args         jsonb[],
    p_priorities   smallint[],
    p_run_at       timestamptz[],
    p_max_attempts integer[],
    p_unique_keys  text[],
    p_metadata     jsonb[],
    p_unique       jsonb[] DEFAULT NULL,
    p_traceparent  text DEFAULT NULL,
    p_tracestate   text DEFAULT NULL
) RETURNS TABLE (job_id bigint, inserted boolean, scheduled boolean)
LANGUAGE plpgsql AS $fn$
DECLARE
    v_write    text;
    v_metadata jsonb[] := p_metadata;
    v_trace    jsonb;
BEGIN
    IF p_traceparent IS NOT NULL OR p_tracestate IS NOT NULL THEN
        IF p_traceparent IS NULL
           OR p_traceparent !~ '^00-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}$'
           OR substr(p_traceparent, 4, 32) = repeat('0', 32)
           OR substr(p_traceparent, 37, 16) = repeat('0', 16) THEN
            RAISE EXCEPTION 'traceparent % is not a W3C trace context of version 00',
                            coalesce(quote_literal(left(p_traceparent, 80)), 'NULL')
                USING ERRCODE = 'invalid_parameter_value',
                      HINT = 'Send 00-<32 hex trace id>-<16 hex span id>-<2 hex flags> (lower case, ids not all zero), or leave both trace arguments out.';
        END IF;
        IF octet_length(p_tracestate) > 512 THEN
            RAISE EXCEPTION 'tracestate is % bytes; at most 512 are accepted', octet_length(p_tracestate)
                USING ERRCODE = 'invalid_parameter_value',
                      HINT = 'Send the tracestate your tracer propagates (W3C: up to 32 members), or leave it out.';
        END IF;
        v_trace := jsonb_build_object('traceparent', p_traceparent);
        IF p_tracestate <> '' THEN
            v_trace := v_trace || jsonb_build_object('tracestate', p_tracestate);
        END IF;
        -- Only metadata that is an object without a context of its own.
        v_metadata := ARRAY(
            SELECT CASE WHEN i.md IS NULL OR jsonb_typeof(i.md) = 'null'
                             THEN jsonb_build_object('awa_trace', v_trace)
                        WHEN jsonb_typeof(i.md) = 'object' AND NOT i.md ? 'awa_trace'
                             THEN i.md || jsonb_build_object('awa_trace', v_trace)
                        ELSE i.md END
              FROM unnest(p_metadata) WITH ORDINALITY AS i(md, ord)
             ORDER BY i.ord);
    END IF;
    SELECT CASE WHEN t.state = 'mixed' THEN t.target_schema ELSE t.active_schema END
      INTO v_write FROM awa.storage_transition_state t;
    IF to_regnamespace(v_write) IS NOT DISTINCT FROM to_regnamespace('{schema}') THEN
        RETURN QUERY SELECT * FROM {schema}.enqueue_local(
            p_queues, p_kinds, p_args, p_priorities, p_run_at, p_max_attempts,
            p_unique_keys, v_metadata, p_unique);
    ELSE
        RETURN QUERY EXECUTE format(
            'SELECT * FROM %I.enqueue_local($1, $2, $3, $4, $5, $6, $7, $8, $9)', v_write)
            USING p_queues, p_kinds, p_args, p_priorities, p_run_at, p_max_attempts,
                  p_unique_keys, v_metadata, p_unique;
    END IF;
END
$fn$;
