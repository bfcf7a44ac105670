-- awa.install_history_plane(schema, queue_slots)
--
-- Terminal history, in two shapes that share the queue ring (slot k's
-- history goes when slot k is reclaimed, which is what makes the retention
-- window "slot count x rotation interval"):
--   done_batches: the hot path. One row per finish call, queue slot and
--     queue, listing the jobs it completed whose bodies are in that slot's
--     ready entries (not copied). A batch of 100 completions is one row.
--   done_entries: one row per job, for failures, cancellations and
--     completions whose body is not in the slot (parked attempts, a job
--     cancelled while deferred): the body is copied into the row then.
-- terminal_jobs reads both and returns one row per terminal job.
CREATE OR REPLACE FUNCTION awa.install_history_plane(p_schema text, p_queue_slots integer)
RETURNS void LANGUAGE plpgsql SECURITY INVOKER AS $fn$
DECLARE
    i integer;
BEGIN
    EXECUTE format($ddl$
        CREATE TABLE IF NOT EXISTS %1$I.done_entries (
            slot         integer     NOT NULL,
            job_id       bigint      NOT NULL,
            run_lease    bigint      NOT NULL,
            queue        text        NOT NULL,
            state        text        NOT NULL CHECK (state IN ('completed', 'failed', 'cancelled')),
            attempt      integer     NOT NULL,
            finalized_at timestamptz NOT NULL DEFAULT now(),
            -- The job's body (kind, args, priority, max_attempts,
            -- created_at, metadata): these rows are rare, and carrying the
            -- body spares the read views a lookup by id.
            body         jsonb       NOT NULL,
            last_error   text
        ) PARTITION BY LIST (slot)$ddl$, p_schema);
    FOR i IN 0 .. p_queue_slots - 1 LOOP
        EXECUTE format('CREATE TABLE IF NOT EXISTS %1$I.%2$I PARTITION OF %1$I.done_entries FOR VALUES IN (%3$s)',
                       p_schema, 'done_entries_' || i, i);
    END LOOP;
    -- job dump / list by id (the hot path never reads history).
    EXECUTE format('CREATE INDEX IF NOT EXISTS done_entries_job_idx ON %1$I.done_entries (job_id)', p_schema);

    EXECUTE format($ddl$
        CREATE TABLE IF NOT EXISTS %1$I.done_batches (
            slot         integer     NOT NULL,
            queue        text        NOT NULL,
            finalized_at timestamptz NOT NULL DEFAULT now(),
            lo_job_id    bigint      NOT NULL,  -- min(job_ids), max(job_ids):
            hi_job_id    bigint      NOT NULL,  -- what the lookup index covers
            -- Completed job i: job_ids[i], its lease, attempt and the lane
            -- position of its body in ready_entries of this slot.
            job_ids      bigint[]    NOT NULL,
            run_leases   bigint[]    NOT NULL,
            attempts     integer[]   NOT NULL,
            ready_seqs   bigint[]    NOT NULL,
            priorities   smallint[]  NOT NULL,  -- with queue and ready_seqs:
            shards       smallint[]  NOT NULL,  -- the body's lane index key
            CHECK (lo_job_id <= hi_job_id)
        ) PARTITION BY LIST (slot)$ddl$, p_schema);
    FOR i IN 0 .. p_queue_slots - 1 LOOP
        EXECUTE format('CREATE TABLE IF NOT EXISTS %1$I.%2$I PARTITION OF %1$I.done_batches FOR VALUES IN (%3$s) WITH (toast_tuple_target = 8160)',
                       p_schema, 'done_batches_' || i, i);
    END LOOP;
    -- job dump / list by id: which batches may hold a job (one entry per
    -- batch row, not per job).
    EXECUTE format('CREATE INDEX IF NOT EXISTS done_batches_jobs_idx ON %1$I.done_batches USING gist (int8range(lo_job_id, hi_job_id, ''[]''))', p_schema);

    -- Exact counts without counting rows: terminal transitions append deltas
    -- in the queue-ring slot of the job's terminal fact; retiring a slot
    -- folds its deltas into the rollups (see history_retire_slot), so the
    -- totals outlive the slot.
    EXECUTE format($ddl$
        CREATE TABLE IF NOT EXISTS %1$I.count_deltas (
            slot  integer     NOT NULL,
            queue text        NOT NULL,
            state text        NOT NULL,
            delta bigint      NOT NULL,
            at    timestamptz NOT NULL DEFAULT now()
        ) PARTITION BY LIST (slot)$ddl$, p_schema);
    FOR i IN 0 .. p_queue_slots - 1 LOOP
        EXECUTE format('CREATE TABLE IF NOT EXISTS %1$I.%2$I PARTITION OF %1$I.count_deltas FOR VALUES IN (%3$s)',
                       p_schema, 'count_deltas_' || i, i);
    END LOOP;
    EXECUTE format($ddl$
        CREATE TABLE IF NOT EXISTS %1$I.count_rollups (
            queue      text        NOT NULL,
            state      text        NOT NULL,
            total      bigint      NOT NULL DEFAULT 0,
            updated_at timestamptz NOT NULL DEFAULT now(),
            PRIMARY KEY (queue, state)
        )$ddl$, p_schema);

    -- How far pruning has gone: every job whose terminal fact was in a
    -- retired slot has an id at or below pruned_through_job_id. One row,
    -- updated once per retired slot.
    EXECUTE format($ddl$
        CREATE TABLE IF NOT EXISTS %1$I.history_horizon (
            singleton             boolean     PRIMARY KEY DEFAULT true CHECK (singleton),
            pruned_through_job_id bigint      NOT NULL,
            pruned_at             timestamptz NOT NULL
        )$ddl$, p_schema);

    -- The public read view: terminal facts hydrated with their bodies, one
    -- row per terminal job whichever shape its fact has.
    EXECUTE format($ddl$
        CREATE OR REPLACE VIEW %1$I.terminal_jobs AS
        SELECT d.job_id                                AS id,
               d.queue,
               d.body ->> 'kind'                       AS kind,
               d.body -> 'args'                        AS args,
               (d.body ->> 'priority')::smallint       AS priority,
               d.state,
               d.attempt,
               (d.body ->> 'max_attempts')::integer    AS max_attempts,
               d.run_lease,
               (d.body ->> 'created_at')::timestamptz  AS created_at,
               d.finalized_at,
               d.last_error,
               d.body -> 'metadata'                    AS metadata,
               d.slot                                  AS ring_slot
          FROM %1$I.done_entries d
         -- A retired slot is gone for every snapshot that sees its marker.
         WHERE NOT EXISTS (SELECT 1 FROM %1$I.ring_retirements x
                            WHERE x.ring = 'queue' AND x.slot = d.slot)
        UNION ALL
        SELECT u.job_id, b.queue, r.kind, r.args, r.priority, 'completed'::text, u.attempt,
               r.max_attempts, u.run_lease, r.created_at, b.finalized_at, NULL::text, r.metadata,
               b.slot
          FROM %1$I.done_batches b
         CROSS JOIN LATERAL unnest(b.job_ids, b.run_leases, b.attempts, b.ready_seqs,
                                   b.priorities, b.shards)
               AS u(job_id, run_lease, attempt, ready_seq, priority, shard)
          -- LATERAL + LIMIT: one probe of the lane index per job, whatever
          -- filters a caller puts on the view (they cannot be pushed inside
          -- and turn the join into a scan of every entry per batch).
          LEFT JOIN LATERAL (
                SELECT r.* FROM %1$I.ready_entries r
                 WHERE r.slot = b.slot AND r.queue = b.queue AND r.priority = u.priority
                   AND r.shard = u.shard AND r.lane_seq = u.ready_seq AND r.job_id = u.job_id
                 LIMIT 1) r ON true
         WHERE NOT EXISTS (SELECT 1 FROM %1$I.ring_retirements x
                            WHERE x.ring = 'queue' AND x.slot = b.slot)
    $ddl$, p_schema);
END
$fn$;
