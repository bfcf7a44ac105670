-- Control objects that exist once per database, in schema awa.
--
-- These tables coordinate; they are never on the per-job hot path, so they
-- are ordinary heap tables updated in place. Substrate-local control state
-- (lane heads, ring ledgers, uniqueness) lives in each substrate instead:
-- see install_control_plane.sql.

CREATE SCHEMA IF NOT EXISTS awa;

-- One row per applied migration. Written only by the migrator, under the
-- migration advisory lock.
CREATE TABLE IF NOT EXISTS awa.schema_version (
    version     integer     PRIMARY KEY,
    description text        NOT NULL,
    checksum    text        NOT NULL,
    applied_at  timestamptz NOT NULL DEFAULT now()
);

-- Per-queue settings. A queue with no row uses the column defaults.
CREATE TABLE IF NOT EXISTS awa.queue_meta (
    queue                   text        PRIMARY KEY,
    dlq_enabled             boolean     NOT NULL DEFAULT false,
    max_attempts            integer     NOT NULL DEFAULT 25
                                        CHECK (max_attempts BETWEEN 1 AND 1000),
    -- Lanes per priority. One shard keeps strict FIFO for the whole queue;
    -- more shards let more claimers work a queue at once.
    shard_count             smallint    NOT NULL DEFAULT 1
                                        CHECK (shard_count BETWEEN 1 AND 64),
    -- A waiting job gains one priority step per interval, so low priority
    -- work cannot starve. NULL turns aging off. The ranges of this and
    -- dlq_retention are awa_core::bounds (PRIORITY_AGING_STORED,
    -- DLQ_RETENTION),
    -- refused here too so no caller can store a value that breaks every
    -- claim (a zero interval divides by zero) or every retention pass
    -- (now() - retention out of range).
    priority_aging_interval interval
        CONSTRAINT queue_meta_priority_aging_in_range
        CHECK (priority_aging_interval BETWEEN interval '1 millisecond' AND interval '30 days'),
    dlq_retention           interval    NOT NULL DEFAULT interval '14 days'
        CONSTRAINT queue_meta_dlq_retention_in_range
        CHECK (dlq_retention BETWEEN interval '1 second' AND interval '3650 days'),
    paused                  boolean     NOT NULL DEFAULT false,
    created_at              timestamptz NOT NULL DEFAULT now(),
    updated_at              timestamptz NOT NULL DEFAULT now()
);

-- Rate limits and global concurrency (docs/adr/0015): at most rate_max
-- claims (attempt starts) in any rate_period, and at most concurrency_max
-- open attempts, of the queue's jobs (kind '') or of one kind's jobs in it;
-- each optionally per partition, the text at a path into the job's args
-- (rate_by / concurrency_by; a job without the field is in partition '').
-- Enforced by the claim ({schema}.limit_take / limit_record, state per
-- substrate); a queue with no row here pays one index probe per claim.
-- The ranges are awa_core::bounds (RATE_LIMIT, RATE_PERIOD,
-- GLOBAL_CONCURRENCY, LIMIT_PATH), refused here too.
CREATE TABLE IF NOT EXISTS awa.queue_limits (
    queue           text        NOT NULL,
    kind            text        NOT NULL DEFAULT '',
    rate_max        integer     CONSTRAINT queue_limits_rate_max_in_range
                                CHECK (rate_max BETWEEN 1 AND 100000),
    rate_period     interval    CONSTRAINT queue_limits_rate_period_in_range
                                CHECK (rate_period BETWEEN interval '1 second' AND interval '1 day'),
    rate_by         text[]      CONSTRAINT queue_limits_rate_by_path
                                CHECK (cardinality(rate_by) BETWEEN 1 AND 8),
    concurrency_max integer     CONSTRAINT queue_limits_concurrency_in_range
                                CHECK (concurrency_max BETWEEN 1 AND 100000),
    concurrency_by  text[]      CONSTRAINT queue_limits_concurrency_by_path
                                CHECK (cardinality(concurrency_by) BETWEEN 1 AND 8),
    updated_at      timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (queue, kind),
    CONSTRAINT queue_limits_rate_whole CHECK ((rate_max IS NULL) = (rate_period IS NULL)),
    CONSTRAINT queue_limits_rate_by_needs_rate CHECK (rate_by IS NULL OR rate_max IS NOT NULL),
    CONSTRAINT queue_limits_by_needs_concurrency
        CHECK (concurrency_by IS NULL OR concurrency_max IS NOT NULL)
    -- (A row with neither limit is deleted by the transaction that cleared
    -- the last one: limits_prune.sql.)
);

-- Live worker and maintenance processes; heartbeated, garbage-collected by
-- maintenance when stale.
CREATE TABLE IF NOT EXISTS awa.runtimes (
    instance_id  uuid        PRIMARY KEY,
    host         text        NOT NULL,
    pid          integer     NOT NULL,
    role         text        NOT NULL CHECK (role IN ('worker', 'maintenance', 'cli')),
    queues       text[]      NOT NULL DEFAULT '{}',
    started_at   timestamptz NOT NULL DEFAULT now(),
    last_seen_at timestamptz NOT NULL DEFAULT now()
);

-- Who holds the maintenance advisory lock, for operators. The lock itself
-- is the authority; this row is only a description of it.
CREATE TABLE IF NOT EXISTS awa.maintenance_leader (
    singleton   boolean     PRIMARY KEY DEFAULT true CHECK (singleton),
    instance_id uuid        NOT NULL,
    host        text        NOT NULL,
    pid         integer     NOT NULL,
    backend_pid integer     NOT NULL,
    since       timestamptz NOT NULL DEFAULT now()
);

-- Periodic jobs (awa_control::cron; fired by the leader's cron task).
-- Expression and time zone are validated by the client before they are
-- written (croner, chrono-tz); the database checks the rest.
--
-- Exactly once per tick: a tick t is fired by the transaction that enqueues
-- its job AND moves last_tick forward to t (cron_fire.sql: UPDATE ... WHERE
-- last_tick < t), so last_tick only increases and no tick can be fired by
-- two transactions, whoever runs them. Ticks at or before fire_from are
-- never fired: it is the creation time, and is moved to the time of a
-- change of expression or zone, or of a resume (ticks of a paused or
-- different schedule are not "missed").
CREATE TABLE IF NOT EXISTS awa.cron_jobs (
    name             text        PRIMARY KEY
                                 CHECK (name ~ '^[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}$'),
    cron_expr        text        NOT NULL CHECK (length(cron_expr) BETWEEN 1 AND 256),
    timezone         text        NOT NULL DEFAULT 'UTC',
    queue            text        NOT NULL,
    kind             text        NOT NULL CHECK (length(kind) BETWEEN 1 AND 255),
    args             jsonb       NOT NULL DEFAULT '{}',
    priority         smallint    NOT NULL DEFAULT 3 CHECK (priority BETWEEN 1 AND 4),  -- 1 runs first
    max_attempts     integer     CHECK (max_attempts BETWEEN 1 AND 1000),
    metadata         jsonb,
    -- After downtime: 'skip' fires only the latest missed tick,
    -- 'catch_up' the latest catch_up_limit of them, oldest first.
    missed_policy    text        NOT NULL DEFAULT 'skip'
                                 CHECK (missed_policy IN ('skip', 'catch_up')),
    catch_up_limit   integer     NOT NULL DEFAULT 1 CHECK (catch_up_limit BETWEEN 1 AND 1000),
    enabled          boolean     NOT NULL DEFAULT true,
    fire_from        timestamptz NOT NULL DEFAULT now(),
    last_tick        timestamptz,
    last_job_id      bigint,
    last_enqueued_at timestamptz,
    created_at       timestamptz NOT NULL DEFAULT now(),
    updated_at       timestamptz NOT NULL DEFAULT now(),
    -- Why the leader could not fire this schedule, while it cannot (a bad
    -- expression, zone or queue written by SQL, args over max_job_bytes):
    -- the leader records it, skips the schedule and fires the others
    -- (cron_record_error.sql); the next fire or a change clears it.
    error            text,
    error_since      timestamptz,
    -- Every time a reader shows, within awa_core::time::WRITABLE (the
    -- runtime role may write this table by SQL; issue 36): finite, from
    -- 1970 up to, not including, year 10000. NULLs pass.
    CONSTRAINT cron_jobs_times_writable CHECK (
        fire_from >= '1970-01-01 00:00:00+00' AND fire_from < '10000-01-01 00:00:00+00'
        AND last_tick >= '1970-01-01 00:00:00+00' AND last_tick < '10000-01-01 00:00:00+00'
        AND last_enqueued_at >= '1970-01-01 00:00:00+00'
        AND last_enqueued_at < '10000-01-01 00:00:00+00'
        AND created_at >= '1970-01-01 00:00:00+00' AND created_at < '10000-01-01 00:00:00+00'
        AND updated_at >= '1970-01-01 00:00:00+00' AND updated_at < '10000-01-01 00:00:00+00'
        AND error_since >= '1970-01-01 00:00:00+00' AND error_since < '10000-01-01 00:00:00+00')
);

-- Job identity is database-wide: every substrate draws job ids from this
-- one sequence and records unique keys in this one table. A job keeps its
-- id when a storage transition moves it to another substrate, a job id
-- names one job whichever substrate holds it, and a unique key held by a
-- live job in one substrate blocks a duplicate in any other, under every
-- isolation level (the primary key decides, as within one substrate).
CREATE SEQUENCE IF NOT EXISTS awa.job_id_seq AS bigint;

-- At most one job per unique key among the unfinished ones and those a
-- key spec keeps holding after they finished. Taken only by
-- {schema}.unique_take (awa-ready). A row is removed when its job becomes
-- terminal, unless the job was enqueued with a key spec (ADR 10) whose
-- period has not ended and whose kept states include the job's final
-- state (completed, failed - dead-lettered counts as failed - or
-- cancelled): then finish/cancel mark it finished (finished_at) and it
-- holds the key until hold_until, the end of the period; the leader's
-- unique_prune task deletes it after that, and unique_take takes a
-- finished row over once hold_until has passed. So only jobs that opt
-- into uniqueness pay, and only those that keep holding pay the update.
--   hold_until   end of the period, when the row may hold after its job
--                finished; NULL: released when the job finishes
--   hold_states  the final states that keep holding until hold_until
--   finished_at  when the job finished; NULL while it is unfinished
CREATE TABLE IF NOT EXISTS awa.job_uniques (
    unique_key  text        PRIMARY KEY,
    job_id      bigint      NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now(),
    hold_until  timestamptz,
    hold_states text[],
    finished_at timestamptz,
    CONSTRAINT job_uniques_hold_check CHECK (
        (hold_until IS NULL) = (hold_states IS NULL)
        AND hold_states <@ ARRAY['completed', 'failed', 'cancelled']::text[]
        AND cardinality(hold_states) > 0
        AND (finished_at IS NULL OR hold_until IS NOT NULL))
);
-- cancel_job releases a key by its job id (finish goes by key).
CREATE INDEX IF NOT EXISTS job_uniques_job_idx ON awa.job_uniques (job_id);
-- unique_prune: finished rows whose period has ended, oldest first.
CREATE INDEX IF NOT EXISTS job_uniques_expiry_idx ON awa.job_uniques (hold_until)
    WHERE finished_at IS NOT NULL;

-- Which substrate receives new work, and any staged move to another one:
-- the one place routing is decided (awa_control::routing reads it; the
-- state machine and each state's routing rule are in ARCHITECTURE.md).
-- Changed only by the transition functions (awa.storage_prepare,
-- awa.storage_enter_mixed, awa.storage_finalize, awa.storage_abort in
-- fn_storage_transition.sql), each one transaction under the migration
-- lock.
--   steady    writes and reads: active_schema (plus storage_draining)
--   prepared  as steady; runtimes also register target_schema
--   mixed     writes: target_schema; reads: active_schema and
--             target_schema; the active (old) substrate only drains
-- epoch grows by one at every change, so a runtime sees a change by
-- comparing one number. fence_vxids: the transactions open when mixed was
-- entered (see storage_draining).
CREATE TABLE IF NOT EXISTS awa.storage_transition_state (
    singleton     boolean     PRIMARY KEY DEFAULT true CHECK (singleton),
    state         text        NOT NULL DEFAULT 'steady'
                              CHECK (state IN ('steady', 'prepared', 'mixed')),
    active_schema text        NOT NULL DEFAULT 'awa',
    target_schema text,
    epoch         bigint      NOT NULL DEFAULT 1,
    mixed_since   timestamptz,
    fence_vxids   text[],
    updated_at    timestamptz NOT NULL DEFAULT now(),
    CHECK ((state = 'steady') = (target_schema IS NULL)),
    CHECK (target_schema IS DISTINCT FROM active_schema),
    CHECK ((state = 'mixed') = (mixed_since IS NOT NULL))
);
INSERT INTO awa.storage_transition_state DEFAULT VALUES ON CONFLICT DO NOTHING;

-- Substrates that no longer receive writes but may still hold live work:
-- the old substrate after finalize, the target after an abort from mixed.
-- Workers keep claiming from them and the leader keeps maintaining them
-- (and moves their deferred and dead-lettered jobs to the write
-- substrate) until the leader removes the row: when the substrate holds
-- no live job and none of fence_vxids, the transactions open when it
-- stopped receiving writes, is still running (a REPEATABLE READ
-- transaction that read the old routing could still write to it).
CREATE TABLE IF NOT EXISTS awa.storage_draining (
    schema_name text        PRIMARY KEY,
    reason      text        NOT NULL CHECK (reason IN ('finalized', 'aborted')),
    fence_vxids text[]      NOT NULL DEFAULT '{}',
    since       timestamptz NOT NULL DEFAULT now()
);

-- Which substrates each runtime reads and writes: registered by the
-- runtime itself each time it reads the routing, so finalize can refuse
-- while a live runtime has not picked up the target.
CREATE TABLE IF NOT EXISTS awa.runtime_storage_backends (
    instance_id uuid        NOT NULL REFERENCES awa.runtimes (instance_id) ON DELETE CASCADE,
    schema_name text        NOT NULL,
    mode        text        NOT NULL CHECK (mode IN ('read_write', 'drain')),
    updated_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (instance_id, schema_name)
);


-- Queue health as the maintenance leader last measured it, for operators
-- and dashboards: overwritten in place, one row per queue and substrate.
CREATE TABLE IF NOT EXISTS awa.queue_health (
    schema_name           text        NOT NULL,
    queue                 text        NOT NULL,
    available             bigint      NOT NULL,
    running               bigint      NOT NULL,  -- claimed: running or buffered
    deferred              bigint      NOT NULL,
    oldest_available_secs double precision,
    measured_at           timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (schema_name, queue)
);

-- Activity per queue and minute over the last two hours, for the
-- dashboard's charts: written by the maintenance leader's health task
-- (awa-history `publish_activity.sql`), a few rows per queue per pass, never
-- by the job path. Terminal counts are re-read from the count deltas of the
-- last minutes (they only grow, so a pass keeps the larger figure); pickup
-- latency is sampled from claim batches (claimed_at minus when the batch's
-- first job became runnable); wait is the longest any available job had
-- waited at a pass in that minute. Rows older than two hours are deleted
-- by the same task, so the table holds at most substrates x queues x 120
-- rows.
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
