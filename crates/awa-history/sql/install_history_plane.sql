-- awa.install_history_plane(schema, queue_slots)
--
-- Terminal history. Completions share the queue ring (slot k's history
-- goes when slot k is reclaimed, which is what makes the retention window
-- "slot count x rotation interval"), in two shapes:
--   done_batches: the hot path. One row per finish call, queue slot and
--     queue, listing the jobs it completed whose bodies are in that slot's
--     ready entries (not copied). A batch of 100 completions is one row.
--   done_entries: one row per job, for completions whose body is not in
--     the slot (parked attempts): the body is copied into the row then.
-- Failures and cancellations are kept apart, for days (ADR 11):
--   failure_entries: one row per failed or cancelled job with its body
--     and attempt records, outside the rings, kept for the substrate's
--     failure_retention (the leader's failure_retention task deletes
--     older rows) and deleted at once when an operator retries the job.
-- terminal_jobs reads all three and returns one row per terminal job.
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
            last_error   text,
            -- Records of every attempt, the completing one included (ADR 11).
            attempts     jsonb
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
    PERFORM awa.prefer_lz4(format('%I.done_batches', p_schema)::regclass,
                           ARRAY['job_ids', 'run_leases', 'attempts', 'ready_seqs', 'priorities', 'shards']);
    -- job dump / list by id: which batches may hold a job (one entry per
    -- batch row, not per job).
    EXECUTE format('CREATE INDEX IF NOT EXISTS done_batches_jobs_idx ON %1$I.done_batches USING gist (int8range(lo_job_id, hi_job_id, ''[]''))', p_schema);

    -- Failed and cancelled jobs, kept for failure_retention whatever the
    -- ring does. An ordinary table: one insert per failure and one delete
    -- a retention later (or when the job is retried), so its churn follows
    -- the failures, never the job stream. At most one row per job: a job
    -- is terminal once until an operator retries it, which deletes the row.
    EXECUTE format($ddl$
        CREATE TABLE IF NOT EXISTS %1$I.failure_entries (
            job_id       bigint      PRIMARY KEY,
            run_lease    bigint      NOT NULL,
            queue        text        NOT NULL,
            state        text        NOT NULL CHECK (state IN ('failed', 'cancelled')),
            attempt      integer     NOT NULL,
            priority     smallint    NOT NULL,
            kind         text        NOT NULL,
            args         jsonb       NOT NULL,
            max_attempts integer     NOT NULL,
            created_at   timestamptz NOT NULL,
            finalized_at timestamptz NOT NULL DEFAULT now(),
            -- Released when the job ended; a retry takes it again.
            unique_key   text,
            metadata     jsonb,
            last_error   text,
            attempts     jsonb
        )$ddl$, p_schema);
    -- Retention deletes the oldest first.
    EXECUTE format('CREATE INDEX IF NOT EXISTS failure_entries_finalized_idx ON %1$I.failure_entries (finalized_at)', p_schema);
    -- Bulk retry and lists by queue and state (`awa job retry --queue Q
    -- --state failed`).
    EXECUTE format('CREATE INDEX IF NOT EXISTS failure_entries_queue_idx ON %1$I.failure_entries (queue, state, finalized_at)', p_schema);
    -- Finding failures by what their args contain (`--args-contains`):
    -- days of failures would make that a long scan; the index costs only
    -- the failure path.
    EXECUTE format('CREATE INDEX IF NOT EXISTS failure_entries_args_idx ON %1$I.failure_entries USING gin (args jsonb_path_ops)', p_schema);

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
    -- row per terminal job whichever shape its fact has. attempts: the
    -- job's attempt records (ADR 11); a completion from a batch gets its
    -- completing attempt derived from the batch (number and end), which is
    -- all a completion writes. ring_slot: NULL for a kept failure.
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
               d.slot                                  AS ring_slot,
               d.attempts
          FROM %1$I.done_entries d
         -- A retired slot is gone for every snapshot that sees its marker.
         WHERE NOT EXISTS (SELECT 1 FROM %1$I.ring_retirements x
                            WHERE x.ring = 'queue' AND x.slot = d.slot)
        UNION ALL
        SELECT u.job_id, b.queue, r.kind, r.args, r.priority, 'completed'::text, u.attempt,
               r.max_attempts, u.run_lease, r.created_at, b.finalized_at, NULL::text, r.metadata,
               b.slot,
               coalesce(r.attempts, '[]'::jsonb) || jsonb_build_array(jsonb_build_object(
                   'attempt', u.attempt, 'ended_at', b.finalized_at, 'outcome', 'completed'))
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
        UNION ALL
        -- Kept failures are outside the rings: no retirement hides them.
        SELECT f.job_id, f.queue, f.kind, f.args, f.priority, f.state, f.attempt,
               f.max_attempts, f.run_lease, f.created_at, f.finalized_at, f.last_error,
               f.metadata, NULL::integer, f.attempts
          FROM %1$I.failure_entries f
    $ddl$, p_schema);
END
$fn$;
