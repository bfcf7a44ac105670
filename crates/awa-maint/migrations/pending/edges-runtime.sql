-- Pending migration of branch edges-runtime (issue 20, items 8 and 9).
-- Runs once, in one transaction, as the migrator.
--
-- 1. Priority (item 9): 1 now runs first and 4 last (docs/adr/0012). Until now 4
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

-- 2. Buffered is not running (issue 20, item 8): each worker engine says
--    which claimed jobs wait in its local buffer, not started, in one row
--    of {schema}.worker_buffers (awa-exec install_exec_plane.sql); the read
--    views (view_jobs.sql, a template regenerated with the functions)
--    show those as 'buffered'. Create the table in every substrate, and
--    give it to every role that holds the runtime grants there (the
--    grant_runtime_role matrix: SELECT, INSERT, UPDATE, DELETE), found by
--    its INSERT grant on claim_batches. This must run before the view
--    templates are regenerated (they read the table).
DO $migration$
DECLARE
    v_schema name;
    v_role   name;
BEGIN
    FOR v_schema IN
        SELECT n.nspname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
         WHERE c.relname = 'substrate_info' AND c.relkind = 'r'
         ORDER BY n.nspname
    LOOP
        EXECUTE format($ddl$
            CREATE TABLE IF NOT EXISTS %1$I.worker_buffers (
                instance_id uuid        PRIMARY KEY,
                job_ids     bigint[]    NOT NULL,
                updated_at  timestamptz NOT NULL DEFAULT now()
            ) WITH (fillfactor = 50)$ddl$, v_schema);
        FOR v_role IN
            SELECT DISTINCT r.rolname
              FROM pg_class c
             CROSS JOIN LATERAL aclexplode(c.relacl) a
              JOIN pg_roles r ON r.oid = a.grantee
             WHERE c.oid = format('%I.claim_batches', v_schema)::regclass
               AND a.privilege_type = 'INSERT'
               AND a.grantee <> c.relowner
        LOOP
            EXECUTE format('GRANT SELECT, INSERT, UPDATE, DELETE ON %I.worker_buffers TO %I',
                           v_schema, v_role);
        END LOOP;
    END LOOP;
END
$migration$;
