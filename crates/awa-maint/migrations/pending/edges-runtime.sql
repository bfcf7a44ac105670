-- Pending migration of branch edges-runtime (issue 20, items 7 to 9).
-- Runs once, in one transaction, as the migrator.
--
-- 1. Priority: 1 now runs first and 4 last (docs/adr/0007). Until now 4
--    ran first. Every stored priority p becomes 5 - p, so every job keeps
--    its place in the run order across the upgrade (a backlog of former
--    "4" jobs still runs before former "1" jobs), and the number shown
--    for it is the one that means that place now. The default moves from
--    2 to 3 for the same reason: former default jobs (2) become 3, the
--    lane new default jobs join, so FIFO among default jobs holds across
--    the upgrade. Lane keys (queue, priority, shard) are rewritten
--    everywhere they are stored together: ready entries, lane heads, the
--    item arrays of claim and done batches (which find bodies by lane
--    key), parked attempts; plus deferred jobs, dead letters, the bodies
--    copied into done_entries, and cron schedules. The statements take
--    row locks on lane heads, so a claim running at the same time waits
--    for the commit and then sees only the new keys. Cost: one rewrite of
--    every row of those tables (run it when the rings are small).

-- Cron schedules (database-wide): remap, and the new default.
UPDATE awa.cron_jobs SET priority = 5 - priority;
ALTER TABLE awa.cron_jobs ALTER COLUMN priority SET DEFAULT 3;

DO $migration$
DECLARE
    v_schema name;
BEGIN
    -- Every substrate: the schemas holding a substrate_info table.
    FOR v_schema IN
        SELECT n.nspname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
         WHERE c.relname = 'substrate_info' AND c.relkind = 'r'
         ORDER BY n.nspname
    LOOP
        -- Lane heads: the primary key (queue, priority, shard) would
        -- collide mid-statement if swapped in place (1 <-> 4), so move
        -- every key out of range first, then into its new place.
        EXECUTE format('UPDATE %I.lane_heads SET priority = priority + 10', v_schema);
        EXECUTE format('UPDATE %I.lane_heads SET priority = 15 - priority', v_schema);
        -- Bodies (every slot: completed jobs' bodies stay here for history).
        EXECUTE format('UPDATE %I.ready_entries SET priority = 5 - priority', v_schema);
        -- Claim and done batches name each item's body by lane key.
        EXECUTE format($sql$
            UPDATE %I.claim_batches
               SET priorities = ARRAY(SELECT (5 - p)::smallint
                                        FROM unnest(priorities) WITH ORDINALITY AS u(p, i)
                                       ORDER BY i)$sql$, v_schema);
        EXECUTE format($sql$
            UPDATE %I.done_batches
               SET priorities = ARRAY(SELECT (5 - p)::smallint
                                        FROM unnest(priorities) WITH ORDINALITY AS u(p, i)
                                       ORDER BY i)$sql$, v_schema);
        EXECUTE format('UPDATE %I.parked_attempts SET priority = 5 - priority', v_schema);
        EXECUTE format('UPDATE %I.deferred_jobs SET priority = 5 - priority', v_schema);
        EXECUTE format('UPDATE %I.dlq_entries SET priority = 5 - priority', v_schema);
        -- Failed and cancelled jobs' bodies (job_body's JSON).
        EXECUTE format($sql$
            UPDATE %I.done_entries
               SET body = jsonb_set(body, '{priority}', to_jsonb(5 - (body ->> 'priority')::integer))
             WHERE body ? 'priority'$sql$, v_schema);
    END LOOP;
END
$migration$;
