-- {schema}.unique_held(hold_until, hold_states, state): whether a key row
-- (awa.job_uniques) keeps holding its key now that its job finished in
-- `state` (completed, failed, dead_lettered, cancelled): its key spec's
-- period has not ended and keeps that state (a dead-lettered job counts
-- as failed). False for a key without a spec (hold_until NULL).
--
-- The one statement of the rule. finish and cancel_job delete the rows it
-- is false for and mark the others finished (finished_at), in the commit
-- that makes the job terminal; unique_prune deletes a finished row once
-- hold_until has passed. A SQL function, so the planner inlines it.
CREATE OR REPLACE FUNCTION {schema}.unique_held(
    p_hold_until  timestamptz,
    p_hold_states text[],
    p_state       text
) RETURNS boolean LANGUAGE sql STABLE AS $fn$
    SELECT coalesce(p_hold_until > now()
                    AND (CASE p_state WHEN 'dead_lettered' THEN 'failed' ELSE p_state END) = ANY (p_hold_states),
                    false)
$fn$;
