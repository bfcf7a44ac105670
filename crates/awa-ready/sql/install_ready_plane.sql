-- awa.install_ready_plane(schema, queue_slots)
--
-- The ready queue: runnable work appended to the current queue-ring slot and
-- claimed in lane order. Rows here are never updated or deleted; a claim
-- moves the lane head past them and a cancellation adds a tombstone. Whole
-- slots are reclaimed with TRUNCATE by maintenance.
CREATE OR REPLACE FUNCTION awa.install_ready_plane(p_schema text, p_queue_slots integer)
RETURNS void LANGUAGE plpgsql SECURITY INVOKER AS $fn$
DECLARE
    i integer;
BEGIN
    -- Job ids come from awa.job_id_seq, shared by every substrate
    -- (control_schema.sql).
    -- Lane positions. CACHE 1 is load-bearing: the claim frontier reads
    -- last_value as an upper bound of every position handed out so far,
    -- which per-session caches would break.
    EXECUTE format('CREATE SEQUENCE IF NOT EXISTS %1$I.ready_seq AS bigint CACHE 1', p_schema);

    EXECUTE format($ddl$
        CREATE TABLE IF NOT EXISTS %1$I.ready_entries (
            slot         integer     NOT NULL,
            queue        text        NOT NULL,
            -- Bounds as awa_core::bounds has them, so a raw-SQL producer
            -- cannot store a job no worker would understand.
            priority     smallint    NOT NULL CHECK (priority BETWEEN 1 AND 4),
            shard        smallint    NOT NULL,
            lane_seq     bigint      NOT NULL,
            job_id       bigint      NOT NULL,
            kind         text        NOT NULL,
            args         jsonb       NOT NULL,
            attempt      integer     NOT NULL,  -- attempts already made
            max_attempts integer     NOT NULL CHECK (max_attempts BETWEEN 1 AND 1000),
            run_lease    bigint      NOT NULL,  -- leases already issued
            created_at   timestamptz NOT NULL,  -- first enqueue of the job
            ready_at     timestamptz NOT NULL,  -- when this row became runnable
            unique_key   text,
            metadata     jsonb,
            -- Records of the job's earlier attempts (ADR 11; attempt_push):
            -- NULL for a job that has not run yet, so a first run costs
            -- nothing here.
            attempts     jsonb
        ) PARTITION BY LIST (slot)$ddl$, p_schema);

    FOR i IN 0 .. p_queue_slots - 1 LOOP
        EXECUTE format('CREATE TABLE IF NOT EXISTS %1$I.%2$I PARTITION OF %1$I.ready_entries FOR VALUES IN (%3$s)',
                       p_schema, 'ready_entries_' || i, i);
    END LOOP;
    -- Every index here costs WAL for every job, so there are two.
    -- The lane index serves the claim (a lane in order from its head) and
    -- every lookup of a body whose lane is known: finish, park, and the
    -- read views hydrating claim and done batches (they carry each item's
    -- priority and shard for this).
    EXECUTE format('CREATE INDEX IF NOT EXISTS ready_entries_lane_idx ON %1$I.ready_entries (queue, priority, shard, lane_seq)', p_schema);
    -- Lookups by id alone (cancel of a waiting job, job dump and list) are
    -- operator paths: a BRIN index over job ids, which arrive roughly in
    -- order, costs nothing per insert (ranges are summarized in the
    -- background as they fill, autosummarize) and narrows a lookup to a
    -- few small page ranges plus the unsummarized tail of the slot.
    EXECUTE format('CREATE INDEX IF NOT EXISTS ready_entries_job_brin ON %1$I.ready_entries USING brin (job_id) WITH (pages_per_range = 8, autosummarize = on)', p_schema);

    -- The queue-ring generations no producer can write to any more: every
    -- entry in a slot of generation <= `generation` is committed (or gone)
    -- and visible to any snapshot that sees this row. ready_seal (with the
    -- leader's prune and rotate of the queue ring) moves it forward in two
    -- steps: a proposal (`pending_generation`, proven once no snapshot
    -- older than the rotation onto pending_generation + 1 is in use) becomes
    -- the seal once no transaction below `pending_xid` is running.
    -- ready_take uses it to stop scanning slots that hold nothing past a
    -- lane's head (lane_heads.low_gen). -1: nothing sealed yet.
    EXECUTE format($ddl$
        CREATE TABLE IF NOT EXISTS %1$I.ready_sealed (
            singleton          boolean     PRIMARY KEY DEFAULT true CHECK (singleton),
            generation         bigint      NOT NULL DEFAULT -1,
            sealed_at          timestamptz NOT NULL DEFAULT now(),
            pending_generation bigint,
            pending_xid        xid8
        )$ddl$, p_schema);
    EXECUTE format('INSERT INTO %1$I.ready_sealed DEFAULT VALUES ON CONFLICT DO NOTHING', p_schema);

    -- How far relocation has got, per lane, in a sealed queue-ring slot
    -- (ready_relocate, "Resuming"): every entry of the lane in `slot` at
    -- lane_seq <= moved_through is behind the lane head or tombstoned.
    -- Valid only for the slot's generation `generation` once that
    -- generation is sealed (ready_sealed), so a row left from an earlier
    -- turn of the ring is ignored and overwritten. Written by the leader's
    -- prune; at most one row per lane and slot, never deleted (a few
    -- hundred rows at most: lanes that ever had a backlog relocated).
    EXECUTE format($ddl$
        CREATE TABLE IF NOT EXISTS %1$I.ready_relocated (
            slot          integer  NOT NULL,
            queue         text     NOT NULL,
            priority      smallint NOT NULL,
            shard         smallint NOT NULL,
            generation    bigint   NOT NULL,
            moved_through bigint   NOT NULL,
            PRIMARY KEY (slot, queue, priority, shard)
        )$ddl$, p_schema);

    -- Cancelled-before-claim markers, in the same slot as the entry they
    -- cancel so both disappear together.
    EXECUTE format($ddl$
        CREATE TABLE IF NOT EXISTS %1$I.ready_tombstones (
            slot         integer     NOT NULL,
            job_id       bigint      NOT NULL,
            lane_seq     bigint      NOT NULL,
            cancelled_at timestamptz NOT NULL DEFAULT now(),
            PRIMARY KEY (slot, job_id, lane_seq)
        ) PARTITION BY LIST (slot)$ddl$, p_schema);
    FOR i IN 0 .. p_queue_slots - 1 LOOP
        EXECUTE format('CREATE TABLE IF NOT EXISTS %1$I.%2$I PARTITION OF %1$I.ready_tombstones FOR VALUES IN (%3$s)',
                       p_schema, 'ready_tombstones_' || i, i);
    END LOOP;
END
$fn$;
