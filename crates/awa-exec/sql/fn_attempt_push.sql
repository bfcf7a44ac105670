-- {schema}.attempt_push(prior, attempt, outcome, next_state, started_at,
--                       instance, error):
-- a job's attempt records (ADR 11) with one more: the attempt that just
-- ended. Called by finish for every attempt that ends other than by a
-- completion from a batch (whose record is derived on read), in the row
-- it writes for that outcome anyway, so the history travels with the
-- job's body and is reclaimed with it.
--
-- A record: {attempt, started_at (the claim), ended_at (now), outcome,
-- error, runtime: {id, host, pid}}. outcome names what happened to the
-- attempt (as the closure link records it): retried, rescued, snoozed,
-- released, failed, cancelled, dead_lettered, completed. The runtime's
-- host and pid are copied from awa.runtimes now, because the registry
-- forgets dead runtimes; an unknown instance keeps its id only.
--
-- Bounded: the latest c_keep records (awa_core::bounds::ATTEMPT_HISTORY),
-- each error already at most 8 KiB (Finish::error). A plain SQL function:
-- one expression, no table written.
CREATE OR REPLACE FUNCTION {schema}.attempt_push(
    p_prior      jsonb,
    p_attempt    integer,
    p_outcome    text,
    p_next_state text,
    p_started_at timestamptz,
    p_instance   uuid,
    p_error      text
) RETURNS jsonb LANGUAGE sql STABLE AS $fn$
    WITH c AS (SELECT 25 AS c_keep),
    h AS (
        SELECT coalesce(p_prior, '[]'::jsonb) || jsonb_build_array(jsonb_build_object(
                   'attempt', p_attempt,
                   'started_at', p_started_at,
                   'ended_at', now(),
                   'outcome', CASE p_outcome
                                  WHEN 'rescue' THEN 'rescued'
                                  WHEN 'release' THEN 'released'
                                  WHEN 'retry' THEN CASE p_next_state WHEN 'retryable' THEN 'retried'
                                                                      ELSE p_next_state END
                                  ELSE p_next_state
                              END,
                   'error', p_error,
                   'runtime', CASE WHEN p_instance IS NOT NULL THEN
                                  jsonb_build_object('id', p_instance, 'host', r.host, 'pid', r.pid)
                              END)) AS hist
          FROM (SELECT 1) one
          LEFT JOIN awa.runtimes r ON r.instance_id = p_instance
    )
    SELECT CASE WHEN jsonb_array_length(h.hist) <= c.c_keep THEN h.hist
                ELSE (SELECT jsonb_agg(e.rec ORDER BY e.n)
                        FROM jsonb_array_elements(h.hist) WITH ORDINALITY AS e(rec, n)
                       WHERE e.n > jsonb_array_length(h.hist) - c.c_keep)
           END
      FROM h, c
$fn$;
