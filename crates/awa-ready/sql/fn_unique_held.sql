-- {schema}.unique_held(hold_until, hold_states, state): whether a key row
-- (awa.job_uniques) must be kept now that its job finished in `state`
-- (completed, failed, dead_lettered, cancelled): its key spec keeps that
-- state (a dead-lettered job counts as failed) and its window ended less
-- than a minute ago, or has not ended. False for a key without a spec
-- (hold_until NULL).
--
-- Why the minute past the window (the grace): a key names the window of
-- its transaction's start, so a producer begun inside the window may
-- enqueue after it ended by the clock, and must still find the row to be
-- told the window's job. A row is therefore deleted only once the grace
-- has passed (here, and in unique_prune), and unique_take refuses a key
-- it finds no row for once its window's grace has passed (40001).
--
-- The one statement of the rule. finish and cancel_job delete the rows it
-- is false for and mark the others finished (finished_at), in the commit
-- that makes the job terminal; unique_prune deletes a finished row once
-- the grace past hold_until has passed. A SQL function, so the planner
-- inlines it.
CREATE OR REPLACE FUNCTION {schema}.unique_held(
    p_hold_until  timestamptz,
    p_hold_states text[],
    p_state       text
) RETURNS boolean LANGUAGE sql STABLE AS $fn$
    SELECT coalesce(p_hold_until + interval '1 minute' > now()
                    AND (CASE p_state WHEN 'dead_lettered' THEN 'failed' ELSE p_state END) = ANY (p_hold_states),
                    false)
$fn$;
