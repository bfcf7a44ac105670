-- {schema}.unique_derive(key, spec, queue, kind, args): the unique key of
-- one job enqueued with a key spec, and how long the key holds after the
-- job finished. The one place a spec becomes a key: every producer (Rust,
-- Python, raw SQL) enqueues through enqueue_local, which calls this, so
-- they agree by construction (ADR 10; docs/sql-producer.md, "Unique specs").
--
-- spec, a JSON object whose members are all optional:
--   by      array of "kind" (always part of the key; accepted for
--           clarity), "queue", "args" (the whole args) and "args.<field>"
--           (one top-level field of args: a missing field and JSON null
--           are the same value)
--   period  whole seconds, 1 to 31622400 (366 days). The key then holds
--           the window floor(epoch(now()) / period): windows are aligned
--           to the Unix epoch, and now() is the enqueueing transaction's
--           start, as the job's created_at is
--   states  the final states that keep holding the key after the job
--           finished, until its window ends: "completed", "failed" (a
--           dead-lettered job counts as failed) and "cancelled".
--           Unfinished jobs always hold their key. Default: ["completed"]
--           with a period, [] without; not empty needs a period
-- key: the caller's unique key (NULL for none), also part of the key.
--
-- Returns {"key": <derived key>}, plus "until" (the window's end, epoch
-- seconds) and "states" (sorted) when states is not empty: unique_take
-- records those with the key.
--
-- The key is 'u1:' || kind || ':' || the sha256 (hex) of a jsonb of the
-- chosen parts. jsonb's text form is canonical (object members sorted,
-- duplicates dropped, whitespace normalized), so equal args give one key
-- whatever order their members were written in; numbers keep the scale
-- they were written with (1 and 1.0 are different args). Named fields are
-- kept apart from whole args, so specs by args and by fields never share
-- a key; the period is part of the key, so two periods never share a
-- window number.
--
-- Refusals (a malformed spec, from raw SQL: the clients check first):
-- SQLSTATE 22023 invalid_parameter_value, naming what is wrong.
CREATE OR REPLACE FUNCTION {schema}.unique_derive(
    p_key   text,
    p_spec  jsonb,
    p_queue text,
    p_kind  text,
    p_args  jsonb
) RETURNS jsonb LANGUAGE plpgsql STABLE AS $fn$
DECLARE
    v_by     text[] := '{}';
    v_fields text[];
    v_period bigint;
    v_states text[];
    v_window bigint;
    v_parts  jsonb;
    v_bad    text;
BEGIN
    IF jsonb_typeof(p_spec) IS DISTINCT FROM 'object' THEN
        RAISE EXCEPTION 'a unique spec must be a JSON object, not %', coalesce(p_spec::text, 'NULL')
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'For example {"by": ["args"], "period": 600}.';
    END IF;
    SELECT k INTO v_bad FROM jsonb_object_keys(p_spec) k WHERE k NOT IN ('by', 'period', 'states') LIMIT 1;
    IF FOUND THEN
        RAISE EXCEPTION 'unique spec % has an unknown member "%"', p_spec, v_bad
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'A unique spec has the members by, period and states.';
    END IF;

    IF jsonb_typeof(p_spec -> 'by') = 'array' THEN
        SELECT e::text INTO v_bad FROM jsonb_array_elements(p_spec -> 'by') e
         WHERE jsonb_typeof(e) <> 'string'
            OR NOT (e #>> '{}' IN ('kind', 'queue', 'args') OR e #>> '{}' ~ '^args\..')
         LIMIT 1;
        IF FOUND THEN
            RAISE EXCEPTION 'unique spec % names % in "by"', p_spec, v_bad
                USING ERRCODE = 'invalid_parameter_value',
                      HINT = '"by" lists "kind", "queue", "args" or "args.<field>" (a top-level field of args).';
        END IF;
        v_by := ARRAY(SELECT jsonb_array_elements_text(p_spec -> 'by'));
    ELSIF jsonb_typeof(p_spec -> 'by') IS DISTINCT FROM 'null' AND p_spec ? 'by' THEN
        RAISE EXCEPTION 'unique spec %: "by" must be an array', p_spec
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'For example "by": ["queue", "args.tenant"].';
    END IF;

    IF jsonb_typeof(p_spec -> 'period') = 'number' THEN
        IF (p_spec ->> 'period')::numeric NOT BETWEEN 1 AND 31622400
           OR (p_spec ->> 'period')::numeric <> trunc((p_spec ->> 'period')::numeric) THEN
            RAISE EXCEPTION 'unique spec %: the period must be whole seconds from 1 to 31622400 (366 days)', p_spec
                USING ERRCODE = 'invalid_parameter_value';
        END IF;
        v_period := (p_spec ->> 'period')::numeric;
    ELSIF jsonb_typeof(p_spec -> 'period') IS DISTINCT FROM 'null' AND p_spec ? 'period' THEN
        RAISE EXCEPTION 'unique spec %: the period must be a number of seconds', p_spec
            USING ERRCODE = 'invalid_parameter_value';
    END IF;

    IF jsonb_typeof(p_spec -> 'states') = 'array' THEN
        SELECT e::text INTO v_bad FROM jsonb_array_elements(p_spec -> 'states') e
         WHERE jsonb_typeof(e) <> 'string' OR e #>> '{}' NOT IN ('completed', 'failed', 'cancelled')
         LIMIT 1;
        IF FOUND THEN
            RAISE EXCEPTION 'unique spec % names % in "states"', p_spec, v_bad
                USING ERRCODE = 'invalid_parameter_value',
                      HINT = '"states" lists final states that keep the key until the period ends: "completed", "failed" (also dead-lettered), "cancelled". Unfinished jobs always hold their key.';
        END IF;
        v_states := ARRAY(SELECT DISTINCT s FROM jsonb_array_elements_text(p_spec -> 'states') s ORDER BY s);
    ELSIF jsonb_typeof(p_spec -> 'states') IS DISTINCT FROM 'null' AND p_spec ? 'states' THEN
        RAISE EXCEPTION 'unique spec %: "states" must be an array', p_spec
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'For example "states": ["completed", "failed"].';
    ELSE
        v_states := CASE WHEN v_period IS NULL THEN '{}'::text[] ELSE '{completed}'::text[] END;
    END IF;
    IF cardinality(v_states) > 0 AND v_period IS NULL THEN
        RAISE EXCEPTION 'unique spec % keeps the key after the job finished but has no period', p_spec
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'Give a period (how long a finished job keeps the key), or leave "states" out.';
    END IF;

    v_fields := ARRAY(SELECT DISTINCT substr(b, 6) FROM unnest(v_by) b WHERE b LIKE 'args.%' ORDER BY 1);
    v_window := floor(extract(epoch FROM now()) / v_period);
    v_parts := jsonb_build_object(
        'kind',   p_kind,
        'queue',  CASE WHEN 'queue' = ANY (v_by) THEN to_jsonb(p_queue) END,
        'args',   CASE WHEN 'args' = ANY (v_by) THEN p_args END,
        'fields', CASE WHEN cardinality(v_fields) > 0 THEN
                      (SELECT jsonb_object_agg(f, coalesce(p_args -> f, 'null'::jsonb)) FROM unnest(v_fields) f)
                  END,
        'key',    p_key,
        'period', v_period,
        'window', v_window);
    RETURN jsonb_build_object(
               'key', 'u1:' || p_kind || ':' || encode(sha256(convert_to(v_parts::text, 'UTF8')), 'hex'))
           || CASE WHEN cardinality(v_states) > 0
                   THEN jsonb_build_object('until', (v_window + 1) * v_period, 'states', to_jsonb(v_states))
                   ELSE '{}'::jsonb END;
END
$fn$;
