-- ops-surface (issue 22, the operator's surface): bring an existing
-- database to the sources' shape. Runs once, in one transaction, as the
-- migrator; functions, templates and the runtime grants are refreshed by
-- the step's generated part.

-- 1. awa.queue_minutes: activity per queue and minute over the last two
--    hours (the dashboard's charts), written by the maintenance leader's
--    health task. A control table (once per database, in schema awa), so
--    the substrate refresh does not create it. The refresh's re-grant of
--    the runtime matrix gives roles that hold it SELECT, INSERT, UPDATE,
--    DELETE here.
CREATE TABLE IF NOT EXISTS awa.queue_minutes (
    schema_name     text             NOT NULL,
    queue           text             NOT NULL,
    minute          timestamptz      NOT NULL,
    completed       bigint           NOT NULL DEFAULT 0,
    failed          bigint           NOT NULL DEFAULT 0,
    cancelled       bigint           NOT NULL DEFAULT 0,
    dead_lettered   bigint           NOT NULL DEFAULT 0,
    claims_sampled  integer          NOT NULL DEFAULT 0,
    pickup_avg_secs double precision,
    pickup_max_secs double precision,
    wait_max_secs   double precision,
    measured_at     timestamptz      NOT NULL DEFAULT now(),
    PRIMARY KEY (schema_name, queue, minute)
);
