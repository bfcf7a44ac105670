-- Awa migration 15: finish reads batch arrays once claims skip absent tombstones and ring arrays compress with lz4
--
-- Drafted by `cargo xtask migration draft` (hand-written parts first, then
-- what the sources define), then reviewed. Frozen once on main: never edit
-- it, add a new step. Runs once, in one transaction, as the migrator.

-- Control functions, installers and helpers, as the sources define them.
CREATE OR REPLACE FUNCTION awa.install_exec_plane(p_schema text, p_lease_slots integer, p_claim_slots integer)
 RETURNS void
 LANGUAGE plpgsql
AS $function$
DECLARE
    i integer;
BEGIN
    -- Batch ids. The default CACHE 1 is load-bearing: claim_floor_advance
    -- reads last_value as a bound of every id handed out so far, which
    -- per-session caches would break.
    EXECUTE format('CREATE SEQUENCE IF NOT EXISTS %1$I.claim_batch_seq AS bigint', p_schema);
    EXECUTE format($ddl$
        CREATE TABLE IF NOT EXISTS %1$I.claim_batches (
            slot        integer     NOT NULL,
            batch_id    bigint      NOT NULL,
            queue       text        NOT NULL,
            claimed_at  timestamptz NOT NULL DEFAULT now(),
            instance_id uuid,
            -- The distinct queue slots holding the items' bodies (usually
            -- one): exec_slot_live('queue') filters on it.
            body_slots  integer[]   NOT NULL,
            -- Item i (1-based) of the batch: job_ids[i], run_leases[i], ...
            job_ids     bigint[]    NOT NULL,
            run_leases  bigint[]    NOT NULL,
            attempts    integer[]   NOT NULL,
            ready_slots integer[]   NOT NULL,  -- where each body lives
            ready_seqs  bigint[]    NOT NULL,
            priorities  smallint[]  NOT NULL,  -- with queue and ready_seqs:
            shards      smallint[]  NOT NULL,  -- the body's lane index key
            -- Items whose job holds a unique key (NULL: none). Completing
            -- any other item needs nothing from its body.
            keyed       integer[],
            PRIMARY KEY (slot, batch_id)
        ) PARTITION BY LIST (slot)$ddl$, p_schema);
    EXECUTE format($ddl$
        CREATE TABLE IF NOT EXISTS %1$I.claim_closures (
            slot       integer     NOT NULL,
            batch_id   bigint      NOT NULL,
            link       integer     NOT NULL CHECK (link >= 1),
            items      integer[]   NOT NULL,  -- the items this link closed
            -- One outcome for every item, or 'mixed' with one per item.
            outcome    text        NOT NULL CHECK (outcome IN
                       ('completed', 'retried', 'snoozed', 'cancelled', 'failed', 'dead_lettered', 'rescued', 'released',
                        'parked', 'mixed')),
            outcomes   text[]      CHECK ((outcome = 'mixed') = (outcomes IS NOT NULL)),
            -- Items of the batch still open after this link; 0 closes the
            -- batch, which lets liveness checks skip it with one probe.
            open_after integer     NOT NULL CHECK (open_after >= 0),
            closed_at  timestamptz NOT NULL DEFAULT now(),
            PRIMARY KEY (slot, batch_id, link)
        ) PARTITION BY LIST (slot)$ddl$, p_schema);
    FOR i IN 0 .. p_claim_slots - 1 LOOP
        -- toast_tuple_target: a batch of a few hundred items stays in its
        -- heap row instead of going to TOAST (a second table and index).
        EXECUTE format('CREATE TABLE IF NOT EXISTS %1$I.%2$I PARTITION OF %1$I.claim_batches FOR VALUES IN (%3$s) WITH (toast_tuple_target = 8160)',
                       p_schema, 'claim_batches_' || i, i);
        EXECUTE format('CREATE TABLE IF NOT EXISTS %1$I.%2$I PARTITION OF %1$I.claim_closures FOR VALUES IN (%3$s)',
                       p_schema, 'claim_closures_' || i, i);
    END LOOP;
    PERFORM awa.prefer_lz4(format('%I.claim_batches', p_schema)::regclass,
                           ARRAY['body_slots', 'job_ids', 'run_leases', 'attempts', 'ready_slots',
                                 'ready_seqs', 'priorities', 'shards', 'keyed']);
    PERFORM awa.prefer_lz4(format('%I.claim_closures', p_schema)::regclass, ARRAY['items', 'outcomes']);
    -- Rescue looks for old batches (one entry per claim call, not per job).
    EXECUTE format('CREATE INDEX IF NOT EXISTS claim_batches_claimed_idx ON %1$I.claim_batches (claimed_at)', p_schema);
    -- The read views find the batches claimed since claim_floor's floor
    -- (below) by their id: one range per slot, however many closed batches
    -- the ring still holds (one entry per claim call). The primary key
    -- cannot serve it: its first column, the slot, is not known.
    EXECUTE format('CREATE INDEX IF NOT EXISTS claim_batches_batch_idx ON %1$I.claim_batches (batch_id)', p_schema);

    -- Where the open claim batches are, so the read views (live_jobs) read
    -- them without reading the closed ones the claim ring still holds (a
    -- batch stays in its slot until the slot is truncated). One row, moved
    -- by the leader's health task (claim_floor_advance, which has the
    -- proof). The promise: every batch whose batch_id is below `floor` is
    -- closed (a link of it says open_after = 0), gone with its slot, or
    -- listed in (open_slots, open_batches); a reader reads the listed ones
    -- and those from `floor` on. A stale row only costs a reader more
    -- batches, never a wrong answer. pending_*: the next floor, proposed
    -- and waiting for the transactions that were running then.
    -- claim_batch_seq keeps CACHE 1 (above): the proof needs ids handed out
    -- in the order they are drawn.
    EXECUTE format($ddl$
        CREATE TABLE IF NOT EXISTS %1$I.claim_floor (
            singleton     boolean     PRIMARY KEY DEFAULT true CHECK (singleton),
            floor         bigint      NOT NULL DEFAULT 0,
            open_slots    integer[]   NOT NULL DEFAULT '{}',
            open_batches  bigint[]    NOT NULL DEFAULT '{}',
            pending_floor bigint,
            pending_vxids text[],
            moved_at      timestamptz NOT NULL DEFAULT now(),
            CHECK (cardinality(open_slots) = cardinality(open_batches)),
            CHECK ((pending_floor IS NULL) = (pending_vxids IS NULL))
        ) WITH (fillfactor = 50)$ddl$, p_schema);
    EXECUTE format('INSERT INTO %1$I.claim_floor DEFAULT VALUES ON CONFLICT DO NOTHING', p_schema);

    EXECUTE format($ddl$
        CREATE TABLE IF NOT EXISTS %1$I.leases (
            slot             integer     NOT NULL,
            job_id           bigint      NOT NULL,
            run_lease        bigint      NOT NULL,
            claim_slot       integer     NOT NULL,  -- the attempt's batch item
            batch_id         bigint      NOT NULL,
            item             integer     NOT NULL,
            heartbeat_at     timestamptz NOT NULL DEFAULT now(),
            deadline_at      timestamptz,
            callback_id      uuid,
            callback_timeout timestamptz,
            PRIMARY KEY (slot, job_id, run_lease)
        ) PARTITION BY LIST (slot)$ddl$, p_schema);
    FOR i IN 0 .. p_lease_slots - 1 LOOP
        EXECUTE format('CREATE TABLE IF NOT EXISTS %1$I.%2$I PARTITION OF %1$I.leases FOR VALUES IN (%3$s) WITH (fillfactor = 70)',
                       p_schema, 'leases_' || i, i);
    END LOOP;

    -- Attempts moved out of the rings (see exec_park): a job that runs longer
    -- than a ring takes to come round would otherwise keep its batch's
    -- claim slot, its body's queue slot and its lease slot live, and the
    -- rings could not rotate past it. Parking closes the item with a
    -- 'parked' link and copies everything the attempt still needs here, in one
    -- transaction; the attempt is then finished by deleting its row (the
    -- delete's row lock lets exactly one finisher win). One open attempt per
    -- job, so the job id is the key. Rows are few (long jobs only) and each
    -- is deleted once, so this table's churn is bounded by long jobs, not by
    -- throughput.
    EXECUTE format($ddl$
        CREATE TABLE IF NOT EXISTS %1$I.parked_attempts (
            job_id           bigint      PRIMARY KEY,
            run_lease        bigint      NOT NULL,
            claim_slot       integer     NOT NULL,  -- the attempt token's batch item
            batch_id         bigint      NOT NULL,
            item             integer     NOT NULL,
            queue            text        NOT NULL,
            attempt          integer     NOT NULL,
            claimed_at       timestamptz NOT NULL,
            deadline_at      timestamptz,
            instance_id      uuid,
            heartbeat_at     timestamptz,
            callback_id      uuid,
            callback_timeout timestamptz,
            -- The body, as the ready entry held it.
            ready_seq        bigint      NOT NULL,
            kind             text        NOT NULL,
            args             jsonb       NOT NULL,
            priority         smallint    NOT NULL,
            max_attempts     integer     NOT NULL,
            created_at       timestamptz NOT NULL,
            unique_key       text,
            metadata         jsonb,
            parked_at        timestamptz NOT NULL DEFAULT now(),
            -- The body's attempt records (ADR 11).
            attempts         jsonb
        ) WITH (fillfactor = 70)$ddl$, p_schema);

    -- Progress and checkpoints survive retries, so they live outside the
    -- rings, keyed by job.
    EXECUTE format($ddl$
        CREATE TABLE IF NOT EXISTS %1$I.attempt_state (
            job_id     bigint      PRIMARY KEY,
            run_lease  bigint      NOT NULL,
            percent    smallint    CHECK (percent BETWEEN 0 AND 100),
            message    text,
            checkpoint jsonb,
            updated_at timestamptz NOT NULL DEFAULT now()
        )$ddl$, p_schema);

    -- The rescue bound maintenance uses on this substrate, published by the
    -- leader's rescue task so workers (often other processes) can heartbeat
    -- at a third of it: a short --rescue-after then cannot take healthy
    -- long jobs. No row: no leader has published yet (workers use their
    -- own cadence). The range is awa_core::bounds::RESCUE_AFTER.
    EXECUTE format($ddl$
        CREATE TABLE IF NOT EXISTS %1$I.exec_settings (
            singleton    boolean     PRIMARY KEY DEFAULT true CHECK (singleton),
            rescue_after interval    NOT NULL
                CONSTRAINT exec_settings_rescue_after_in_range
                CHECK (rescue_after BETWEEN interval '1 second' AND interval '1 day'),
            changed_at   timestamptz NOT NULL DEFAULT now()
        )$ddl$, p_schema);

    -- Which claimed jobs each worker holds in its local buffer, not started
    -- (the read views call them 'buffered', the other open items
    -- 'running'). A claimed job's start is not written per job: each
    -- worker engine rewrites its one row at most once a second, when its
    -- buffer changed (and every few minutes while it is not empty), and
    -- deletes it when it stops. So the split is true to about a second,
    -- and costs the hot path nothing per job. A row left by a worker that
    -- died names attempts that are indeed not running (rescue closes
    -- them); rows not refreshed for an hour are removed by the next
    -- worker engine that starts. Few rows, rewritten in place: the low
    -- fillfactor keeps the updates HOT.
    EXECUTE format($ddl$
        CREATE TABLE IF NOT EXISTS %1$I.worker_buffers (
            instance_id uuid        PRIMARY KEY,  -- claim_batches.instance_id
            job_ids     bigint[]    NOT NULL,
            updated_at  timestamptz NOT NULL DEFAULT now()
        ) WITH (fillfactor = 50)$ddl$, p_schema);

    -- The state of the limits in awa.queue_limits on this substrate
    -- (docs/adr/0015), written only by claims of a limited queue, under
    -- that queue's claim-limit lock; an unlimited queue never touches it.
    -- limit_holds: one row per open attempt and concurrency limit it
    -- counts against, naming its batch item. Not deleted by finish: the
    -- next claim of the queue deletes the rows whose attempt is closed
    -- (finished, rescued, cancelled; a parked attempt is still open), so
    -- the rows are at most the limit plus what ended since.
    EXECUTE format($ddl$
        CREATE TABLE IF NOT EXISTS %1$I.limit_holds (
            queue      text    NOT NULL,
            kind       text    NOT NULL,  -- the limit's kind ('' = the queue)
            part       text    NOT NULL,  -- the job's partition ('' = none)
            job_id     bigint  NOT NULL,
            run_lease  bigint  NOT NULL,
            claim_slot integer NOT NULL,
            batch_id   bigint  NOT NULL,
            item       integer NOT NULL,
            PRIMARY KEY (queue, kind, part, job_id, run_lease)
        )$ddl$, p_schema);
    -- limit_rates: per rate limit and partition, the claims of the last
    -- period: at[i] is a claim's admission time (its batch's claimed_at),
    -- n[i] how many jobs it admitted there. Pruned to the period on every
    -- write, so at most one entry per claim call in the period (at most
    -- rate_max). Rewritten in place: the low fillfactor keeps it HOT.
    EXECUTE format($ddl$
        CREATE TABLE IF NOT EXISTS %1$I.limit_rates (
            queue text          NOT NULL,
            kind  text          NOT NULL,
            part  text          NOT NULL,
            at    timestamptz[] NOT NULL,
            n     integer[]     NOT NULL,
            PRIMARY KEY (queue, kind, part)
        ) WITH (fillfactor = 50)$ddl$, p_schema);
END
$function$;

CREATE OR REPLACE FUNCTION awa.install_history_plane(p_schema text, p_queue_slots integer)
 RETURNS void
 LANGUAGE plpgsql
AS $function$
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
$function$;

CREATE OR REPLACE FUNCTION awa.prefer_lz4(p_table regclass, p_columns text[])
 RETURNS void
 LANGUAGE plpgsql
AS $function$
DECLARE
    r record;
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_settings s
                    WHERE s.name = 'default_toast_compression' AND 'lz4' = ANY (s.enumvals)) THEN
        RETURN;
    END IF;
    FOR r IN
        SELECT a.attrelid::regclass AS rel, a.attname
          FROM pg_catalog.pg_attribute a
         WHERE a.attrelid IN (SELECT p_table
                              UNION ALL
                              SELECT i.inhrelid FROM pg_catalog.pg_inherits i WHERE i.inhparent = p_table)
           AND a.attname = ANY (p_columns) AND NOT a.attisdropped
           AND a.attcompression IS DISTINCT FROM 'l'
         ORDER BY a.attrelid, a.attnum
    LOOP
        EXECUTE format('ALTER TABLE %s ALTER COLUMN %I SET COMPRESSION lz4', r.rel, r.attname);
    END LOOP;
END
$function$;

-- Runtime function templates, as the sources define them.
INSERT INTO awa.substrate_functions (name, ord, body) VALUES ('claim', 14, $awa_template$-- {schema}.claim(queue, limit, cand_seq, cand_xid, instance): claim up to
-- `limit` jobs of a queue in one statement: take them from the ready plane
-- (which advances the lane heads) and write ONE claim batch row for all of
-- them in the current claim-ring slot (item i = the i-th job returned).
-- Each claim issues run_lease + 1 and counts the attempt (the first run is
-- attempt 1). The attempt token is (job_id, run_lease, claim_slot,
-- batch_id, item): finishing goes straight to its item.
--
-- cand_seq/cand_xid: the frontier candidate returned by the previous
-- call (NULL on the first); see ready_take. Every returned row carries the
-- next candidate; a row with job_id NULL carries only that.
--
-- waiting: work is visible in the queue that this call could not take
-- yet: the frontier has not settled past it, the ledger moved, or another
-- transaction (usually another worker's claim) held one of its lanes. The
-- caller should look again shortly rather than wait for a notification
-- that already came, or never comes (a standing backlog).
--
-- A paused queue hands out nothing.
--
-- Limits (docs/adr/0015): a queue with a row in awa.queue_limits takes
-- through limit_take (ready_take's rows cut to what its rate limits and
-- global concurrency admit, under the queue's limit lock) and records what
-- it admitted through limit_record; its batch's claimed_at is the
-- admission instant. Any other queue pays one probe of that table's
-- primary key, in the statement that reads its settings.
--
-- Bounds: limit within awa_core::bounds::CLAIM_BATCH, 1 to 1024 (SQLSTATE
-- 22023, before anything is read).
CREATE OR REPLACE FUNCTION {schema}.claim(
    p_queue     text,
    p_limit     integer,
    p_cand_seq  bigint,
    p_cand_xid  xid8,
    p_instance  uuid
) RETURNS TABLE (
    job_id bigint, run_lease bigint, claim_slot integer, batch_id bigint, item integer,
    ready_slot integer, ready_seq bigint,
    kind text, args jsonb, priority smallint, attempt integer, max_attempts integer,
    created_at timestamptz, ready_at timestamptz, unique_key text, metadata jsonb,
    next_seq bigint, next_xid xid8, waiting boolean
) LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan AS $fn$
#variable_conflict use_column
DECLARE
    v_claim_slot integer;
    v_aging      interval;
    v_paused     boolean;
    v_limited    boolean;
    v_at         timestamptz;  -- a limited claim's admission instant
    v_taken      jsonb;        -- a limited claim's rows (limit_take)
BEGIN
    IF p_limit IS NULL OR p_limit NOT BETWEEN 1 AND 1024 THEN
        RAISE EXCEPTION 'claim limit must be 1 to 1024 (got %)', coalesce(p_limit::text, 'NULL')
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'Claim at most a claim batch (awa_core::bounds::CLAIM_BATCH) per call.';
    END IF;
    SELECT m.priority_aging_interval, m.paused,
           (SELECT l.slot FROM {schema}.ring_ledger l
             WHERE l.ring = 'claim' ORDER BY l.generation DESC LIMIT 1),
           EXISTS (SELECT 1 FROM awa.queue_limits q WHERE q.queue = p_queue)
      INTO v_aging, v_paused, v_claim_slot, v_limited
      FROM (SELECT 1) one
      LEFT JOIN awa.queue_meta m ON m.queue = p_queue;
    IF v_limited AND NOT coalesce(v_paused, false) THEN
        SELECT x.admitted_at, x.taken INTO v_at, v_taken
          FROM {schema}.limit_take(p_queue, p_limit, p_cand_seq, p_cand_xid, v_aging) x;
    END IF;
    IF coalesce(v_paused, false) OR (v_limited AND v_taken IS NULL) THEN
        RETURN QUERY SELECT NULL::bigint, NULL::bigint, NULL::integer, NULL::bigint, NULL::integer,
                            NULL::integer, NULL::bigint,
                            NULL::text, NULL::jsonb, NULL::smallint, NULL::integer, NULL::integer,
                            NULL::timestamptz, NULL::timestamptz, NULL::text, NULL::jsonb,
                            p_cand_seq, p_cand_xid, false;
        RETURN;
    END IF;

    -- ready_take's rows, in its order: item i of the batch is the i-th job.
    -- Each is returned as it comes (a set-returning function's rows reach
    -- the caller only when it returns, so after the batch row below is
    -- written); the batch's arrays are built on the way.
    -- (A limited claim's rows come from limit_take instead; the branch not
    -- taken is not run.)
    -- One statement: the rows taken (in the order ready_take returns
    -- them: item i is the i-th job), ONE claim batch row for all of them,
    -- and the rows returned. A loop over the rows in PL/pgSQL (a dozen
    -- assignments and seven array appends per job) cost more than the
    -- take itself.
    RETURN QUERY
    WITH t AS MATERIALIZED (
        -- it: the item number. Both takes return either the rows taken
        -- or one row without a job (carrying only the frontier), never
        -- both, so the i-th row is item i. (A running count over the rows
        -- sorted them, args and all, once more per claim.)
        SELECT x.*, x.n AS it
          FROM (SELECT r.*, r.ord AS n
                  FROM {schema}.ready_take(p_queue, p_limit, p_cand_seq, p_cand_xid, v_aging)
                       WITH ORDINALITY AS r(job_id, slot, lane_seq, kind, args, priority, attempt,
                                            max_attempts, run_lease, created_at, ready_at,
                                            unique_key, metadata, frontier, next_seq, next_xid,
                                            shard, ord)
                 WHERE NOT v_limited
                UNION ALL
                SELECT r.*, r.ord
                  FROM ROWS FROM (jsonb_to_recordset(v_taken) AS (
                           job_id bigint, slot integer, lane_seq bigint, kind text, args jsonb,
                           priority smallint, attempt integer, max_attempts integer, run_lease bigint,
                           created_at timestamptz, ready_at timestamptz, unique_key text, metadata jsonb,
                           frontier bigint, next_seq bigint, next_xid xid8, shard smallint))
                       WITH ORDINALITY AS r(job_id, slot, lane_seq, kind, args, priority, attempt,
                                            max_attempts, run_lease, created_at, ready_at,
                                            unique_key, metadata, frontier, next_seq, next_xid,
                                            shard, ord)
                 WHERE v_limited) x
    ),
    b AS MATERIALIZED (
        SELECT nextval('{schema}.claim_batch_seq') AS id
         WHERE EXISTS (SELECT 1 FROM t WHERE t.job_id IS NOT NULL)
    ),
    batch AS (
        INSERT INTO {schema}.claim_batches
            (slot, batch_id, queue, claimed_at, instance_id, body_slots,
             job_ids, run_leases, attempts, ready_slots, ready_seqs, priorities, shards, keyed)
        SELECT v_claim_slot, b.id, p_queue, coalesce(v_at, now()), p_instance,
               -- The distinct queue slots of the bodies, in order of first use.
               (SELECT array_agg(f.slot ORDER BY f.first)
                  FROM (SELECT t2.slot, min(t2.it) AS first FROM t t2
                         WHERE t2.job_id IS NOT NULL GROUP BY t2.slot) f),
               array_agg(t.job_id ORDER BY t.it), array_agg(t.run_lease + 1 ORDER BY t.it),
               array_agg(t.attempt + 1 ORDER BY t.it), array_agg(t.slot ORDER BY t.it),
               array_agg(t.lane_seq ORDER BY t.it), array_agg(t.priority ORDER BY t.it),
               array_agg(t.shard ORDER BY t.it),
               array_agg(t.it::integer ORDER BY t.it) FILTER (WHERE t.unique_key IS NOT NULL)
          FROM t CROSS JOIN b
         WHERE t.job_id IS NOT NULL
         GROUP BY b.id
        RETURNING 1
    )
    SELECT t.job_id, t.run_lease + 1,
           CASE WHEN t.job_id IS NOT NULL THEN v_claim_slot END,
           CASE WHEN t.job_id IS NOT NULL THEN (SELECT b.id FROM b) END,
           CASE WHEN t.job_id IS NOT NULL THEN t.it::integer END,
           t.slot, t.lane_seq, t.kind, t.args, t.priority, t.attempt + 1, t.max_attempts,
           t.created_at, t.ready_at, t.unique_key, t.metadata,
           t.next_seq, t.next_xid, coalesce(t.frontier < t.next_seq, false)
      FROM t
     ORDER BY t.n;

    IF v_limited AND jsonb_array_length(v_taken) > 0 THEN
        PERFORM {schema}.limit_record(p_queue, v_at, v_claim_slot,
                                      currval('{schema}.claim_batch_seq'), v_taken);
    END IF;
END
$fn$;
$awa_template$)
ON CONFLICT (name) DO UPDATE SET ord = EXCLUDED.ord, body = EXCLUDED.body;
INSERT INTO awa.substrate_functions (name, ord, body) VALUES ('exec_park', 23, $awa_template$-- {schema}.exec_park(ring, slot, limit): move up to `limit` open attempts
-- that keep ring slot `slot` live out of the rings, into parked_attempts.
-- Called by ring_prune for the slot a ring must rotate onto next, so a job
-- that runs for hours never stops reclamation.
--
--   queue: open items whose body is in that queue slot
--   claim: open items of the batches in that claim slot
--   lease: open items whose lease is in that lease slot
--
-- The move, in this one transaction: per batch, insert the next closure
-- link listing its items being parked (outcome 'parked'), exactly as
-- finish does (same numbering, same primary key), and, only for the links
-- this call inserted, a parked_attempts row per item with the batch item,
-- the lease's heartbeat and callback, and the job's body. So parking and
-- finishing exclude each other: a finisher that took the link number first
-- makes this park of that batch do nothing (the next prune tries again);
-- once parked, finish can only win by deleting the parked row (see finish).
-- Either way the attempt has exactly one open piece of evidence at a time.
--
-- The worker's token (job_id, run_lease, claim_slot, batch_id, item) stays
-- valid: finish and heartbeat look for a parked row when the item is
-- closed.
--
-- Returns how many attempts were parked. An unknown ring, a slot not of
-- that ring, or a limit outside 1..10000 (awa_core::bounds::MAINT_LIMIT)
-- is refused (22023).
CREATE OR REPLACE FUNCTION {schema}.exec_park(p_ring text, p_slot integer, p_limit integer)
RETURNS integer LANGUAGE plpgsql AS $fn$
#variable_conflict use_column
DECLARE
    v_slots   integer[];
    v_batches bigint[];
    v_items   integer[];
    v_parked  integer;
BEGIN
    -- A slot of this ring (ring_slot_count refuses an unknown ring).
    IF p_slot IS NULL OR p_slot NOT BETWEEN 0 AND {schema}.ring_slot_count(p_ring) - 1 THEN
        RAISE EXCEPTION 'slot % is not a slot of the % ring', coalesce(p_slot::text, 'NULL'), p_ring
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'Slots are numbered from 0 to the ring''s slot count - 1 (substrate_info).';
    END IF;
    IF p_limit IS NULL OR p_limit NOT BETWEEN 1 AND 10000 THEN
        RAISE EXCEPTION 'exec_park: limit must be 1 to 10000 (got %)', coalesce(p_limit::text, 'NULL')
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'Attempts one maintenance call parks (awa_core::bounds::MAINT_LIMIT); prune parks 1000 at a time.';
    END IF;
    -- Which items: one statement per ring, each shaped so the planner can
    -- prune to the partitions it names (claim: one claim slot; lease: one
    -- lease slot, then batches by primary key; queue: batches whose
    -- body_slots name the slot).
    IF p_ring = 'claim' THEN
        SELECT array_agg(o.slot), array_agg(o.batch_id), array_agg(o.item)
          INTO v_slots, v_batches, v_items
          FROM (SELECT b.slot, b.batch_id, u.item::integer AS item
                  FROM {schema}.claim_batches b
                 CROSS JOIN LATERAL generate_subscripts(b.job_ids, 1) AS u(item)
                 WHERE b.slot = p_slot
                   AND NOT EXISTS (SELECT 1 FROM {schema}.claim_closures c
                                    WHERE c.slot = b.slot AND c.batch_id = b.batch_id AND c.open_after = 0)
                   AND NOT EXISTS (SELECT 1 FROM {schema}.claim_closures c
                                    WHERE c.slot = b.slot AND c.batch_id = b.batch_id AND u.item = ANY (c.items))
                 ORDER BY b.batch_id, u.item LIMIT p_limit) o;
    ELSIF p_ring = 'lease' THEN
        SELECT array_agg(o.slot), array_agg(o.batch_id), array_agg(o.item)
          INTO v_slots, v_batches, v_items
          FROM (SELECT DISTINCT l.claim_slot AS slot, l.batch_id, l.item
                  FROM {schema}.leases l
                  JOIN {schema}.claim_batches b ON b.slot = l.claim_slot AND b.batch_id = l.batch_id
                 WHERE l.slot = p_slot
                   AND NOT EXISTS (SELECT 1 FROM {schema}.claim_closures c
                                    WHERE c.slot = l.claim_slot AND c.batch_id = l.batch_id AND l.item = ANY (c.items))
                 ORDER BY l.batch_id, l.item LIMIT p_limit) o;
    ELSE
        SELECT array_agg(o.slot), array_agg(o.batch_id), array_agg(o.item)
          INTO v_slots, v_batches, v_items
          FROM (SELECT b.slot, b.batch_id, u.item::integer AS item
                  FROM {schema}.claim_batches b
                 CROSS JOIN LATERAL unnest(b.ready_slots) WITH ORDINALITY AS u(ready_slot, item)
                 WHERE p_slot = ANY (b.body_slots) AND u.ready_slot = p_slot
                   AND NOT EXISTS (SELECT 1 FROM {schema}.claim_closures c
                                    WHERE c.slot = b.slot AND c.batch_id = b.batch_id AND c.open_after = 0)
                   AND NOT EXISTS (SELECT 1 FROM {schema}.claim_closures c
                                    WHERE c.slot = b.slot AND c.batch_id = b.batch_id AND u.item = ANY (c.items))
                 ORDER BY b.batch_id, u.item LIMIT p_limit) o;
    END IF;
    IF v_items IS NULL THEN
        RETURN 0;
    END IF;

    WITH open AS (
        -- Inner join with the body: an open item always has it (the queue
        -- slot is not reclaimed while the item is open).
        SELECT k.slot, k.batch_id, k.item, b.job_ids[k.item] AS job_id,
               b.run_leases[k.item] AS run_lease, b.queue, b.attempts[k.item] AS attempt,
               b.claimed_at, b.instance_id, b.ready_seqs[k.item] AS ready_seq,
               cardinality(b.job_ids) AS size,
               e.kind, e.args, e.priority, e.max_attempts, e.created_at, e.unique_key, e.metadata,
               e.attempts
          FROM unnest(v_slots, v_batches, v_items) AS k(slot, batch_id, item)
          -- Each batch's arrays read whole once (`[:]`): a subscript of
          -- the stored, compressed array decompresses all of it, per item.
          JOIN (SELECT b.slot, b.batch_id, b.queue, b.claimed_at, b.instance_id,
                       b.job_ids[:] AS job_ids, b.run_leases[:] AS run_leases,
                       b.attempts[:] AS attempts, b.ready_slots[:] AS ready_slots,
                       b.ready_seqs[:] AS ready_seqs, b.priorities[:] AS priorities,
                       b.shards[:] AS shards
                  FROM (SELECT DISTINCT u.slot, u.batch_id
                          FROM unnest(v_slots, v_batches) AS u(slot, batch_id)) u
                 CROSS JOIN LATERAL (
                        SELECT bb.* FROM {schema}.claim_batches bb
                         WHERE bb.slot = u.slot AND bb.batch_id = u.batch_id LIMIT 1) b
                OFFSET 0) b ON b.slot = k.slot AND b.batch_id = k.batch_id
          JOIN {schema}.ready_entries e
            ON e.slot = b.ready_slots[k.item] AND e.queue = b.queue
           AND e.priority = b.priorities[k.item] AND e.shard = b.shards[k.item]
           AND e.lane_seq = b.ready_seqs[k.item] AND e.job_id = b.job_ids[k.item]
         -- Again, in the snapshot the links below are numbered in: an item
         -- a finisher closed since the choice above is not parked.
         WHERE NOT EXISTS (SELECT 1 FROM {schema}.claim_closures c
                            WHERE c.slot = k.slot AND c.batch_id = k.batch_id AND k.item = ANY (c.items))
    ),
    links AS (
        -- The next link of each batch, given what its links have closed
        -- (read in this statement's snapshot, like finish does).
        SELECT o.slot, o.batch_id, ch.last_link + 1 AS link,
               array_agg(o.item ORDER BY o.item) AS items,
               (min(o.size) - min(ch.closed) - count(*))::integer AS open_after
          FROM open o
         CROSS JOIN LATERAL (
                SELECT coalesce(max(c.link), 0) AS last_link,
                       coalesce(sum(cardinality(c.items)), 0) AS closed
                  FROM {schema}.claim_closures c
                 WHERE c.slot = o.slot AND c.batch_id = o.batch_id) ch
         GROUP BY o.slot, o.batch_id, ch.last_link
         ORDER BY o.slot, o.batch_id
    ),
    closed AS (
        INSERT INTO {schema}.claim_closures AS c (slot, batch_id, link, items, outcome, open_after)
        SELECT l.slot, l.batch_id, l.link, l.items, 'parked', l.open_after FROM links l
        ON CONFLICT DO NOTHING
        RETURNING c.slot, c.batch_id
    ),
    parked AS (
        INSERT INTO {schema}.parked_attempts
            (job_id, run_lease, claim_slot, batch_id, item, queue, attempt, claimed_at, deadline_at,
             instance_id, heartbeat_at, callback_id, callback_timeout,
             ready_seq, kind, args, priority, max_attempts, created_at, unique_key, metadata,
             attempts)
        SELECT o.job_id, o.run_lease, o.slot, o.batch_id, o.item, o.queue, o.attempt, o.claimed_at,
               l.deadline_at, o.instance_id, l.heartbeat_at, l.callback_id, l.callback_timeout,
               o.ready_seq, o.kind, o.args, o.priority, o.max_attempts, o.created_at,
               o.unique_key, o.metadata, o.attempts
          FROM open o
          JOIN closed c ON c.slot = o.slot AND c.batch_id = o.batch_id
          LEFT JOIN LATERAL (
                SELECT l.heartbeat_at, l.deadline_at, l.callback_id, l.callback_timeout
                  FROM {schema}.leases l
                 WHERE l.job_id = o.job_id AND l.run_lease = o.run_lease
                 ORDER BY l.heartbeat_at DESC
                 LIMIT 1) l ON true
        RETURNING 1
    )
    SELECT count(*)::integer INTO v_parked FROM parked;
    RETURN v_parked;
END
$fn$;
$awa_template$)
ON CONFLICT (name) DO UPDATE SET ord = EXCLUDED.ord, body = EXCLUDED.body;
INSERT INTO awa.substrate_functions (name, ord, body) VALUES ('finish', 18, $awa_template$-- {schema}.finish(job_ids, run_leases, claim_slots, batch_ids, items,
--                 outcomes, delays, errors):
-- the guarded finish path. Every way an attempt ends goes through here:
-- the worker's complete/retry/snooze/cancel/fail, graceful-shutdown
-- release, and maintenance's rescue. Many attempts per call; each is named
-- by its token (job_id, run_lease, claim_slot, batch_id, item).
--
-- outcomes: complete | retry | snooze | cancel | fail | release | rescue
-- delays:   for retry/snooze, NULL means the default backoff
--           (2^attempt seconds, at most an hour, +-25% jitter).
--
-- The guard. An attempt is finished only if its batch item still names it
-- (job_ids[item] = job_id, run_leases[item] = run_lease), no closure link
-- of its batch lists the item, and this call inserts the next link of the
-- batch listing it. A call reads all links of each batch it touches and
-- inserts, per batch, ONE link numbered max(link) + 1 with every item it
-- closes there (ON CONFLICT DO NOTHING). Two finishers of one batch that
-- read the same links both try the same number; the primary key (slot,
-- batch_id, link) lets one insert it and the other gets nothing back
-- (under READ COMMITTED it waits for the winner's commit first; under
-- REPEATABLE READ or SERIALIZABLE the conflict with an invisible row is a
-- serialization failure, 40001). So whoever inserts link n saw links
-- 1..n-1: every item is listed by at most one link, whatever the
-- isolation level. A call whose link lost the race reports those items
-- `contended`, and finish runs them again in a new statement (a new
-- snapshot that sees the winner's link): they are then finished, or
-- rejected because the winner closed them. A stale lease, a second
-- completion, or a completion racing a rescue or a cancel thus gets
-- accepted = false and changes nothing.
--
-- Parked attempts (see exec_park) have their item closed by a 'parked'
-- link and a row in parked_attempts: for them the guard is the DELETE of
-- that row, whose row lock lets exactly one deleter win. exec_park writes
-- the link and the row in one transaction and only for items whose link it
-- inserted, so an attempt has exactly one open piece of evidence at a
-- time. Their terminal fact goes to the current queue slot with the body
-- copied in (their original slot may be gone).
--
-- Evidence written (the hot path is the first line):
--   completed (from a batch) -> one done_batches row per queue slot and
--                               queue touched, body left in its ready slot
--   completed from parked    -> one done_entries row each, body copied in
--   cancelled / failed       -> one failure_entries row each, body copied
--                               in, kept for failure_retention (ADR 11)
--   dead_lettered                   -> dlq_entries (queue opted in)
--   retryable / snoozed / available -> deferred_jobs, promoted when due
-- plus one count delta per (slot, queue, state). Retries past
-- max_attempts fail (or dead-letter); snooze and release do not count the
-- attempt. Every row but the completion's carries the job's attempt
-- records with this attempt's appended (attempt_push, ADR 11): those rows
-- copy the body anyway, and a completion from a batch writes nothing new.
--
-- Bounds (SQLSTATE 22023, before anything is read or written; the Rust
-- side clamps what handlers return to the same): arrays of one length, an
-- outcome from the list above, a delay NULL or 0 to 30 days
-- (awa_core::bounds::MAX_HANDLER_DELAY), an error NULL or at most 8 KiB
-- (MAX_ERROR_BYTES).
CREATE OR REPLACE FUNCTION {schema}.finish_pass(
    p_job_ids     bigint[],
    p_run_leases  bigint[],
    p_claim_slots integer[],
    p_batch_ids   bigint[],
    p_items       integer[],
    p_outcomes    text[],
    p_delays      interval[],
    p_errors      text[]
) RETURNS TABLE (job_id bigint, run_lease bigint, accepted boolean, next_state text, contended boolean)
LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan AS $fn$
#variable_conflict use_column
BEGIN
    IF array_length(p_run_leases, 1) IS DISTINCT FROM array_length(p_job_ids, 1)
       OR array_length(p_claim_slots, 1) IS DISTINCT FROM array_length(p_job_ids, 1)
       OR array_length(p_batch_ids, 1) IS DISTINCT FROM array_length(p_job_ids, 1)
       OR array_length(p_items, 1) IS DISTINCT FROM array_length(p_job_ids, 1)
       OR array_length(p_outcomes, 1) IS DISTINCT FROM array_length(p_job_ids, 1)
       OR array_length(p_delays, 1) IS DISTINCT FROM array_length(p_job_ids, 1)
       OR array_length(p_errors, 1) IS DISTINCT FROM array_length(p_job_ids, 1) THEN
        RAISE EXCEPTION 'finish arrays differ in length' USING ERRCODE = 'invalid_parameter_value',
              HINT = 'Send one element per attempt in every array.';
    END IF;
    IF EXISTS (SELECT 1 FROM unnest(p_outcomes) o
                WHERE o IS NULL OR o NOT IN ('complete', 'retry', 'snooze', 'cancel', 'fail', 'release', 'rescue')) THEN
        RAISE EXCEPTION 'unknown finish outcome in %', p_outcomes
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'Use complete, retry, snooze, cancel, fail, release or rescue.';
    END IF;
    IF EXISTS (SELECT 1 FROM unnest(p_delays, p_errors) AS x(delay, error)
                WHERE x.delay NOT BETWEEN interval '0' AND interval '30 days'
                   OR octet_length(x.error) > 8192) THEN
        RAISE EXCEPTION 'finish: a delay is outside 0 to 30 days, or an error is longer than 8192 bytes'
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'Clamp retry and snooze delays to 30 days and cut error text to 8 KiB (awa_core::bounds::handler_delay, error_text).';
    END IF;

    RETURN QUERY
    WITH input AS (
        -- A pair named twice in one call is finished once: the first wins.
        SELECT DISTINCT ON (i.job_id, i.run_lease) i.*
          FROM unnest(p_job_ids, p_run_leases, p_claim_slots, p_batch_ids, p_items,
                      p_outcomes, p_delays, p_errors)
               WITH ORDINALITY AS i(job_id, run_lease, claim_slot, batch_id, item, outcome, delay, error, ord)
         ORDER BY i.job_id, i.run_lease, i.ord
    ),
    batches AS MATERIALIZED (
        -- Each batch touched, with what its links have closed so far. The
        -- lookups are LATERAL so they stay index probes per batch whatever
        -- the planner thinks of the (unknown) batch count.
        SELECT b.slot, b.batch_id, b.queue, b.job_ids, b.run_leases, b.attempts,
               b.ready_slots, b.ready_seqs, b.priorities, b.shards, b.keyed, ch.last_link, ch.closed,
               b.claimed_at, b.instance_id
          FROM (SELECT DISTINCT i.claim_slot, i.batch_id FROM input i) k
         CROSS JOIN LATERAL (
                -- Each array read whole once (`[:]`, as in finish's lean
                -- path): subscripts of the stored, compressed arrays
                -- would decompress one per item read.
                SELECT b.slot, b.batch_id, b.queue, b.job_ids[:] AS job_ids,
                       b.run_leases[:] AS run_leases, b.attempts[:] AS attempts,
                       b.ready_slots[:] AS ready_slots, b.ready_seqs[:] AS ready_seqs,
                       b.priorities[:] AS priorities, b.shards[:] AS shards, b.keyed,
                       b.claimed_at, b.instance_id
                  FROM {schema}.claim_batches b
                 WHERE b.slot = k.claim_slot AND b.batch_id = k.batch_id LIMIT 1) b
         CROSS JOIN LATERAL (
                SELECT coalesce(max(c.link), 0) AS last_link,
                       coalesce((SELECT array_agg(x) FROM {schema}.claim_closures c2, unnest(c2.items) x
                                  WHERE c2.slot = b.slot AND c2.batch_id = b.batch_id), '{}') AS closed
                  FROM {schema}.claim_closures c
                 WHERE c.slot = b.slot AND c.batch_id = b.batch_id) ch
    ),
    probe AS (
        -- Each input against its batch: open = the item still names this
        -- attempt and no link lists it.
        SELECT i.*, b.queue, b.attempts[i.item] AS attempt,
               b.ready_slots[i.item] AS hist_slot, b.ready_seqs[i.item] AS hist_seq,
               b.priorities[i.item] AS lane_priority, b.shards[i.item] AS lane_shard,
               coalesce(b.job_ids[i.item] = i.job_id AND b.run_leases[i.item] = i.run_lease
                        AND NOT (i.item = ANY (b.closed)), false) AS open,
               -- The body is read only when the outcome needs it: a retry
               -- or a failure copies it, a keyed job releases its key. A
               -- plain completion leaves it where it is, unread.
               (i.outcome <> 'complete' OR coalesce(i.item = ANY (b.keyed), false)) AS needs_body,
               b.claimed_at AS started_at, b.instance_id
          FROM input i
          LEFT JOIN batches b ON b.slot = i.claim_slot AND b.batch_id = i.batch_id
    ),
    live_batch AS (
        SELECT p.job_id, p.run_lease, p.claim_slot, p.batch_id, p.item, p.outcome, p.delay,
               p.error, p.ord, 'batch'::text AS src, p.queue, p.attempt, p.hist_slot, p.hist_seq,
               p.lane_priority, p.lane_shard, NULL::jsonb AS hist_body,
               e.kind, e.args, e.priority, e.max_attempts, e.created_at, e.unique_key, e.metadata,
               coalesce(m.dlq_enabled, false) AS dlq,
               p.started_at, p.instance_id, e.attempts AS history
          FROM probe p
          LEFT JOIN LATERAL (
                SELECT e.* FROM {schema}.ready_entries e
                 WHERE p.needs_body AND e.slot = p.hist_slot AND e.queue = p.queue
                   AND e.priority = p.lane_priority AND e.shard = p.lane_shard
                   AND e.lane_seq = p.hist_seq AND e.job_id = p.job_id
                 LIMIT 1) e ON true
          LEFT JOIN LATERAL (
                SELECT m.dlq_enabled FROM awa.queue_meta m
                 WHERE p.outcome <> 'complete' AND m.queue = p.queue) m ON true
         WHERE p.open
           -- A body that is needed is there (the slot is live while the
           -- item is open); without it the item is not finished.
           AND (NOT p.needs_body OR e.job_id IS NOT NULL)
    ),
    live_parked AS (
        -- Only an item closed in its batch can be parked: one index probe
        -- each on a small table, none on the hot path.
        SELECT i.job_id, i.run_lease, i.claim_slot, i.batch_id, i.item, i.outcome, i.delay,
               i.error, i.ord, 'parked'::text AS src, p.queue, p.attempt,
               (SELECT g.slot FROM {schema}.ring_ledger g
                 WHERE g.ring = 'queue' ORDER BY g.generation DESC LIMIT 1) AS hist_slot,
               NULL::bigint AS hist_seq, NULL::smallint AS lane_priority, NULL::smallint AS lane_shard,
               {schema}.job_body(p.kind, p.args, p.priority, p.max_attempts, p.created_at, p.metadata) AS hist_body,
               p.kind, p.args, p.priority, p.max_attempts, p.created_at, p.unique_key, p.metadata,
               coalesce(m.dlq_enabled, false) AS dlq,
               p.claimed_at, p.instance_id, p.attempts
          FROM probe i
          JOIN {schema}.parked_attempts p ON p.job_id = i.job_id AND p.run_lease = i.run_lease
          LEFT JOIN awa.queue_meta m ON m.queue = p.queue
         WHERE NOT i.open
    ),
    decided AS (
        SELECT l.*,
               CASE
                   WHEN l.outcome = 'complete' THEN 'completed'
                   WHEN l.outcome = 'cancel' THEN 'cancelled'
                   WHEN l.outcome = 'snooze' THEN 'snoozed'
                   WHEN l.outcome = 'release' THEN 'available'
                   WHEN l.outcome IN ('retry', 'rescue') AND l.attempt < l.max_attempts THEN 'retryable'
                   WHEN l.dlq THEN 'dead_lettered'
                   ELSE 'failed'
               END AS next_state
          FROM (SELECT * FROM live_batch UNION ALL SELECT * FROM live_parked) l
    ),
    coded AS (
        -- What the closure link records for each item.
        SELECT d.*,
               CASE d.outcome
                   WHEN 'rescue' THEN 'rescued'
                   WHEN 'release' THEN 'released'
                   WHEN 'retry' THEN CASE d.next_state WHEN 'retryable' THEN 'retried' ELSE d.next_state END
                   ELSE d.next_state
               END AS code
          FROM decided d
         WHERE d.src = 'batch'
    ),
    links AS (
        -- One link per batch, in (slot, batch_id) order so two calls that
        -- touch the same batches wait for each other in the same order.
        SELECT c.claim_slot, c.batch_id,
               min(b.last_link) + 1 AS link,
               array_agg(c.item ORDER BY c.item) AS items,
               CASE WHEN count(DISTINCT c.code) = 1 THEN min(c.code) ELSE 'mixed' END AS outcome,
               CASE WHEN count(DISTINCT c.code) = 1 THEN NULL
                    ELSE array_agg(c.code ORDER BY c.item) END AS outcomes,
               (min(cardinality(b.job_ids)) - min(cardinality(b.closed)) - count(*))::integer AS open_after
          FROM coded c
          JOIN batches b ON b.slot = c.claim_slot AND b.batch_id = c.batch_id
         GROUP BY c.claim_slot, c.batch_id
         ORDER BY c.claim_slot, c.batch_id
    ),
    closed AS (
        INSERT INTO {schema}.claim_closures AS c (slot, batch_id, link, items, outcome, outcomes, open_after)
        SELECT l.claim_slot, l.batch_id, l.link, l.items, l.outcome, l.outcomes, l.open_after
          FROM links l
        ON CONFLICT DO NOTHING
        RETURNING c.slot, c.batch_id
    ),
    unparked AS (
        DELETE FROM {schema}.parked_attempts p
         USING decided d
         WHERE d.src = 'parked' AND p.job_id = d.job_id AND p.run_lease = d.run_lease
        RETURNING p.job_id, p.run_lease
    ),
    won AS (
        SELECT d.*
          FROM decided d
          JOIN closed c ON c.slot = d.claim_slot AND c.batch_id = d.batch_id
         WHERE d.src = 'batch'
        UNION ALL
        SELECT d.*
          FROM decided d
          JOIN unparked u ON u.job_id = d.job_id AND u.run_lease = d.run_lease
         WHERE d.src = 'parked'
    ),
    done_batch AS (
        -- The hot path: one compact row per (queue slot, queue).
        INSERT INTO {schema}.done_batches
            (slot, queue, lo_job_id, hi_job_id, job_ids, run_leases, attempts, ready_seqs,
             priorities, shards)
        SELECT w.hist_slot, w.queue, min(w.job_id), max(w.job_id),
               array_agg(w.job_id ORDER BY w.job_id), array_agg(w.run_lease ORDER BY w.job_id),
               array_agg(w.attempt ORDER BY w.job_id), array_agg(w.hist_seq ORDER BY w.job_id),
               array_agg(w.lane_priority ORDER BY w.job_id), array_agg(w.lane_shard ORDER BY w.job_id)
          FROM won w
         WHERE w.src = 'batch' AND w.next_state = 'completed'
         GROUP BY w.hist_slot, w.queue
    ),
    history AS (
        -- A parked attempt's body may be in a slot that is gone: the fact
        -- carries it.
        INSERT INTO {schema}.done_entries
            (slot, job_id, run_lease, queue, state, attempt, body, last_error, attempts)
        SELECT w.hist_slot, w.job_id, w.run_lease, w.queue, w.next_state, w.attempt,
               w.hist_body, w.error,
               {schema}.attempt_push(w.history, w.attempt, w.outcome, w.next_state,
                                     w.started_at, w.instance_id, w.error)
          FROM won w
         WHERE w.next_state = 'completed' AND w.src = 'parked'
    ),
    failures AS (
        -- Failed and cancelled jobs leave the ring (ADR 11): kept for the
        -- substrate's failure_retention, readable and retryable meanwhile.
        -- A job is terminal once until it is retried, which deletes its
        -- row; should a row be there anyway, the newer fact replaces it.
        INSERT INTO {schema}.failure_entries AS f
            (job_id, run_lease, queue, state, attempt, priority, kind, args, max_attempts,
             created_at, unique_key, metadata, last_error, attempts)
        SELECT w.job_id, w.run_lease, w.queue, w.next_state, w.attempt, w.priority, w.kind,
               w.args, w.max_attempts, w.created_at, w.unique_key, w.metadata, w.error,
               {schema}.attempt_push(w.history, w.attempt, w.outcome, w.next_state,
                                     w.started_at, w.instance_id, w.error)
          FROM won w
         WHERE w.next_state IN ('cancelled', 'failed')
        ON CONFLICT (job_id) DO UPDATE
           SET run_lease = EXCLUDED.run_lease, queue = EXCLUDED.queue, state = EXCLUDED.state,
               attempt = EXCLUDED.attempt, priority = EXCLUDED.priority, kind = EXCLUDED.kind,
               args = EXCLUDED.args, max_attempts = EXCLUDED.max_attempts,
               created_at = EXCLUDED.created_at, finalized_at = EXCLUDED.finalized_at,
               unique_key = EXCLUDED.unique_key, metadata = EXCLUDED.metadata,
               last_error = EXCLUDED.last_error, attempts = EXCLUDED.attempts
    ),
    deferred AS (
        INSERT INTO {schema}.deferred_jobs
            (job_id, queue, priority, kind, args, attempt, max_attempts, run_lease, run_at,
             reason, created_at, unique_key, metadata, last_error, attempts)
        SELECT w.job_id, w.queue, w.priority, w.kind, w.args,
               CASE WHEN w.next_state = 'retryable' THEN w.attempt ELSE w.attempt - 1 END,
               w.max_attempts, w.run_lease,
               CASE WHEN w.next_state = 'available' THEN now()
                    ELSE now() + coalesce(w.delay,
                        make_interval(secs => least(power(2, w.attempt), 3600) * (0.75 + random() * 0.5)))
               END,
               CASE w.next_state WHEN 'retryable' THEN 'retry' WHEN 'snoozed' THEN 'snoozed' ELSE 'released' END,
               w.created_at, w.unique_key, w.metadata, w.error,
               {schema}.attempt_push(w.history, w.attempt, w.outcome, w.next_state,
                                     w.started_at, w.instance_id, w.error)
          FROM won w
         WHERE w.next_state IN ('retryable', 'snoozed', 'available')
    ),
    dead AS (
        INSERT INTO {schema}.dlq_entries
            (job_id, queue, priority, kind, args, attempt, max_attempts, run_lease,
             created_at, last_error, metadata, unique_key, attempts)
        SELECT w.job_id, w.queue, w.priority, w.kind, w.args, w.attempt, w.max_attempts,
               w.run_lease, w.created_at, w.error, w.metadata, w.unique_key,
               {schema}.attempt_push(w.history, w.attempt, w.outcome, w.next_state,
                                     w.started_at, w.instance_id, w.error)
          FROM won w
         WHERE w.next_state = 'dead_lettered'
    ),
    counted AS (
        INSERT INTO {schema}.count_deltas (slot, queue, state, delta)
        SELECT w.hist_slot, w.queue, w.next_state, count(*)
          FROM won w
         WHERE w.next_state IN ('completed', 'cancelled', 'failed', 'dead_lettered')
         GROUP BY w.hist_slot, w.queue, w.next_state
    ),
    -- Key lookups through = ANY(array): index probes, no join to plan.
    -- A key row is released, unless its key spec keeps holding it in the
    -- job's final state until the period ends (unique_held; only rows
    -- with a hold_until ask): then it is marked finished instead.
    unique_released AS (
        DELETE FROM awa.job_uniques u
         WHERE u.unique_key = ANY (ARRAY(
                   SELECT w.unique_key FROM won w
                    WHERE w.unique_key IS NOT NULL
                      AND w.next_state IN ('completed', 'cancelled', 'failed', 'dead_lettered')))
           AND u.job_id = ANY (ARRAY(SELECT w.job_id FROM won w))
           AND (u.hold_until IS NULL
                OR NOT {schema}.unique_held(u.hold_until, u.hold_states,
                       (SELECT w.next_state FROM won w WHERE w.job_id = u.job_id LIMIT 1)))
    ),
    unique_kept AS (
        UPDATE awa.job_uniques u SET finished_at = now()
         WHERE u.unique_key = ANY (ARRAY(
                   SELECT w.unique_key FROM won w
                    WHERE w.unique_key IS NOT NULL
                      AND w.next_state IN ('completed', 'cancelled', 'failed', 'dead_lettered')))
           AND u.job_id = ANY (ARRAY(SELECT w.job_id FROM won w))
           AND u.hold_until IS NOT NULL
           AND {schema}.unique_held(u.hold_until, u.hold_states,
               (SELECT w.next_state FROM won w WHERE w.job_id = u.job_id LIMIT 1))
    ),
    state_dropped AS (
        DELETE FROM {schema}.attempt_state s
         WHERE s.job_id = ANY (ARRAY(
                   SELECT w.job_id FROM won w
                    WHERE w.next_state IN ('completed', 'cancelled', 'failed', 'dead_lettered')))
    )
    SELECT r.job_id, r.run_lease, w.job_id IS NOT NULL, w.next_state,
           -- Live in its batch, but another finisher took this link number.
           (w.job_id IS NULL AND EXISTS (SELECT 1 FROM coded c WHERE c.ord = r.ord))
      FROM unnest(p_job_ids, p_run_leases) WITH ORDINALITY AS r(job_id, run_lease, ord)
      LEFT JOIN won w ON w.ord = r.ord
     ORDER BY r.ord;
END
$fn$;

-- finish: the guarded finish of any attempts. Two paths to the same
-- evidence, guarded by the same closure links:
--
-- * The lean path, for what a worker sends at low rates: every attempt
--   completes ('complete') and every token names the same claim slot.
--   Per batch touched, one read of the batch row and one of its links, and
--   one insert of the next link listing the items this call closes (ON
--   CONFLICT DO NOTHING: the same guard as finish_pass); then, for what it
--   closed, one done_batches row per (queue slot, queue), one count delta
--   each, and the deletes of attempt state and unique keys. Every statement
--   names the claim slot as a plain parameter, so a generic plan prunes the
--   claim ring's partitions when the executor starts instead of starting
--   a scan of each; and none of them touches a table the outcome does not
--   need (ready entries, deferred jobs, dead letters, parked attempts):
--   those are finish_pass's. It reads every batch before writing: if any
--   token does not name an open item (closed or parked, a stale lease, a
--   batch gone with its slot, a pair named twice), the whole call goes to
--   finish_pass instead, so one call still writes one count delta per
--   slot, queue and state.
-- * finish_pass for everything else, as many attempts and outcomes as the
--   call has.
--
-- Then finish_pass again for what lost a link race, each time in a new
-- statement (a new snapshot). Every round that finds contention means
-- another finisher committed a link of the same batch, so the rounds are
-- bounded by the finishers racing for it; after 8 the call gives up with a
-- serialization failure (40001), which the completer retries.
CREATE OR REPLACE FUNCTION {schema}.finish(
    p_job_ids     bigint[],
    p_run_leases  bigint[],
    p_claim_slots integer[],
    p_batch_ids   bigint[],
    p_items       integer[],
    p_outcomes    text[],
    p_delays      interval[],
    p_errors      text[]
) RETURNS TABLE (job_id bigint, run_lease bigint, accepted boolean, next_state text)
LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan AS $fn$
#variable_conflict use_column
DECLARE
    v_n         integer := coalesce(cardinality(p_job_ids), 0);
    v_accepted  boolean[];
    v_next      text[];
    v_contended boolean[];
    v_acc       boolean[];
    v_nx        text[];
    v_todo      integer[];   -- indexes into the inputs still to decide
    v_again     integer[];
    v_round     integer := 1;
    k integer;
    m integer;
    -- the lean path
    v_slot      integer;
    v_lean      boolean;
    v_won       integer[] := '{}';  -- inputs the lean path finished
    w_keyed     bigint[] := '{}';   -- and their jobs that hold a key
BEGIN
    IF v_n = 0 THEN
        RETURN;
    END IF;
    v_slot := p_claim_slots[1];
    v_accepted := array_fill(false, ARRAY[v_n]);
    v_next := array_fill(NULL::text, ARRAY[v_n]);
    v_todo := '{}';
    v_lean := coalesce('complete' = ALL (p_outcomes) AND v_slot = ALL (p_claim_slots), false);
    IF v_lean THEN
        -- One statement: every token against its batch row and the batch's
        -- links; if each names an open item, once (the verdict), the next
        -- link of each batch listing the items it closes (the guard, ON
        -- CONFLICT DO NOTHING as in finish_pass), and for the batches whose
        -- link this call inserted, one done_batches row and one count delta
        -- per (queue slot, queue) and the deletes of attempt state. Any
        -- token that is not open (closed or parked, a stale lease, a batch
        -- gone with its slot, a pair named twice) makes the verdict false:
        -- nothing is written and finish_pass decides the whole call, so one
        -- call still writes one count delta per slot, queue and state.
        -- Set-based: a loop over the items in PL/pgSQL cost about 15 us an
        -- item, most of a drain's finish time.
        WITH inp AS MATERIALIZED (
            -- (named: how many times this call names the item)
            SELECT i.job_id, i.run_lease, i.batch_id, i.item, i.ord,
                   count(*) OVER (PARTITION BY i.batch_id, i.item) AS named
              FROM unnest(p_job_ids, p_run_leases, p_batch_ids, p_items)
                   WITH ORDINALITY AS i(job_id, run_lease, batch_id, item, ord)
        ),
        bat AS MATERIALIZED (
            -- LATERAL: index probes per batch, whatever the planner
            -- thinks of the batch count.
            -- The arrays are read whole (`[:]`) once per batch: a batch
            -- row's arrays are stored compressed (a few KB each), and a
            -- subscript of a stored array decompresses all of it, so read
            -- per item seven subscripts of 512-element arrays were two
            -- thirds of a finish. A whole-array slice is a plain copy,
            -- materialized here, whose subscripts cost what an offset
            -- costs (fixed-width elements, no NULLs). (No sort may run
            -- above the join with it: it would copy the arrays per item.)
            SELECT k.batch_id, b.queue, b.job_ids, b.run_leases, b.attempts, b.ready_slots,
                   b.ready_seqs, b.priorities, b.shards, b.keyed, cardinality(b.job_ids) AS size,
                   ch.last_link, ch.closed
              FROM (SELECT DISTINCT i.batch_id FROM inp i) k
              LEFT JOIN LATERAL (
                    -- (LIMIT 1: a subquery the planner cannot pull up
                    -- into a join that reads the whole partition.)
                    SELECT bb.queue, bb.job_ids[:] AS job_ids, bb.run_leases[:] AS run_leases,
                           bb.attempts[:] AS attempts, bb.ready_slots[:] AS ready_slots,
                           bb.ready_seqs[:] AS ready_seqs, bb.priorities[:] AS priorities,
                           bb.shards[:] AS shards, bb.keyed
                      FROM {schema}.claim_batches bb
                     WHERE bb.slot = v_slot AND bb.batch_id = k.batch_id LIMIT 1) b ON true
             CROSS JOIN LATERAL (
                    SELECT coalesce(max(c.link), 0) AS last_link,
                           coalesce(array_agg(x) FILTER (WHERE x IS NOT NULL), '{}') AS closed
                      FROM {schema}.claim_closures c
                      LEFT JOIN LATERAL unnest(c.items) AS x ON true
                     WHERE c.slot = v_slot AND c.batch_id = k.batch_id) ch
        ),
        chk AS MATERIALIZED (
            SELECT i.job_id, i.run_lease, i.batch_id, i.item, i.ord, b.queue,
                   b.attempts[i.item] AS attempt, b.ready_slots[i.item] AS rslot,
                   b.ready_seqs[i.item] AS rseq, b.priorities[i.item] AS prio,
                   b.shards[i.item] AS shard, coalesce(i.item = ANY (b.keyed), false) AS keyed,
                   -- Open: the item still names this attempt, no link
                   -- lists it, and this call names it once.
                   coalesce(b.job_ids[i.item] = i.job_id AND b.run_leases[i.item] = i.run_lease
                            AND NOT (i.item = ANY (b.closed)), false)
                     AND i.named = 1 AS open,
                   b.last_link, b.size - cardinality(b.closed) AS open_before
              FROM inp i
              LEFT JOIN bat b ON b.batch_id = i.batch_id
        ),
        verdict AS MATERIALIZED (
            SELECT bool_and(c.open) AS lean FROM chk c
        ),
        links AS (
            INSERT INTO {schema}.claim_closures AS c (slot, batch_id, link, items, outcome, open_after)
            SELECT v_slot, k.batch_id, min(k.last_link) + 1, array_agg(k.item ORDER BY k.item),
                   'completed', min(k.open_before) - count(*)
              FROM chk k
             WHERE (SELECT v.lean FROM verdict v)
             GROUP BY k.batch_id
            ON CONFLICT DO NOTHING
            RETURNING c.batch_id
        ),
        won AS MATERIALIZED (
            SELECT k.* FROM chk k JOIN links l ON l.batch_id = k.batch_id
        ),
        done AS (
            -- One row per (queue slot, queue), as finish_pass writes it.
            INSERT INTO {schema}.done_batches
                (slot, queue, lo_job_id, hi_job_id, job_ids, run_leases, attempts, ready_seqs,
                 priorities, shards)
            SELECT w.rslot, w.queue, min(w.job_id), max(w.job_id),
                   array_agg(w.job_id ORDER BY w.job_id), array_agg(w.run_lease ORDER BY w.job_id),
                   array_agg(w.attempt ORDER BY w.job_id), array_agg(w.rseq ORDER BY w.job_id),
                   array_agg(w.prio ORDER BY w.job_id), array_agg(w.shard ORDER BY w.job_id)
              FROM won w
             GROUP BY w.rslot, w.queue
            RETURNING 1
        ),
        counted AS (
            INSERT INTO {schema}.count_deltas (slot, queue, state, delta)
            SELECT w.rslot, w.queue, 'completed', count(*)
              FROM won w
             GROUP BY w.rslot, w.queue
            RETURNING 1
        ),
        cleared AS (
            -- Progress and checkpoints end with the job.
            DELETE FROM {schema}.attempt_state s
             WHERE s.job_id IN (SELECT w.job_id FROM won w)
            RETURNING 1
        )
        SELECT coalesce((SELECT v.lean FROM verdict v), false),
               coalesce(array_agg(w.ord::integer), '{}'),
               coalesce(array_agg(w.job_id) FILTER (WHERE w.keyed), '{}')
          INTO v_lean, v_won, w_keyed
          FROM won w;
    END IF;

    IF NOT v_lean THEN
        -- finish_pass decides everything.
        v_todo := ARRAY(SELECT x.i FROM generate_series(1, v_n) AS x(i));
    ELSE
        FOREACH m IN ARRAY v_won LOOP
            v_accepted[m] := true;
            v_next[m] := 'completed';
        END LOOP;
        IF cardinality(v_won) < v_n THEN
            -- Another finisher took a batch's link number: finish_pass
            -- decides that batch's items again, in a new statement.
            v_todo := ARRAY(SELECT x.i FROM generate_series(1, v_n) AS x(i)
                             WHERE NOT (x.i = ANY (v_won)));
        END IF;
        IF cardinality(w_keyed) > 0 THEN
            -- A job holds at most one key, recorded under its id
            -- (job_uniques_job_idx). As in finish_pass: the key is
            -- released, unless its key spec holds it in the completed
            -- state until its period ends; then it is marked finished.
            DELETE FROM awa.job_uniques u
             WHERE u.job_id = ANY (w_keyed)
               AND (u.hold_until IS NULL
                    OR NOT {schema}.unique_held(u.hold_until, u.hold_states, 'completed'));
            UPDATE awa.job_uniques u SET finished_at = now()
             WHERE u.job_id = ANY (w_keyed)
               AND u.hold_until IS NOT NULL
               AND {schema}.unique_held(u.hold_until, u.hold_states, 'completed');
        END IF;
    END IF;

    -- finish_pass for what is left: everything (general path), or what lost
    -- a link race; again while contention remains.
    WHILE cardinality(v_todo) > 0 LOOP
        IF v_round > 8 THEN
            RAISE EXCEPTION 'finish lost the race for a claim batch link % times in a row', v_round - 1
                USING ERRCODE = 'serialization_failure',
                      HINT = 'Other finishers keep closing items of the same batches; retry the call.';
        END IF;
        v_round := v_round + 1;
        SELECT array_agg(f.accepted ORDER BY f.ord), array_agg(f.next_state ORDER BY f.ord),
               array_agg(f.contended ORDER BY f.ord)
          INTO v_acc, v_nx, v_contended
          FROM {schema}.finish_pass(
                   ARRAY(SELECT p_job_ids[x.i] FROM unnest(v_todo) WITH ORDINALITY AS x(i, o) ORDER BY x.o),
                   ARRAY(SELECT p_run_leases[x.i] FROM unnest(v_todo) WITH ORDINALITY AS x(i, o) ORDER BY x.o),
                   ARRAY(SELECT p_claim_slots[x.i] FROM unnest(v_todo) WITH ORDINALITY AS x(i, o) ORDER BY x.o),
                   ARRAY(SELECT p_batch_ids[x.i] FROM unnest(v_todo) WITH ORDINALITY AS x(i, o) ORDER BY x.o),
                   ARRAY(SELECT p_items[x.i] FROM unnest(v_todo) WITH ORDINALITY AS x(i, o) ORDER BY x.o),
                   ARRAY(SELECT p_outcomes[x.i] FROM unnest(v_todo) WITH ORDINALITY AS x(i, o) ORDER BY x.o),
                   ARRAY(SELECT p_delays[x.i] FROM unnest(v_todo) WITH ORDINALITY AS x(i, o) ORDER BY x.o),
                   ARRAY(SELECT p_errors[x.i] FROM unnest(v_todo) WITH ORDINALITY AS x(i, o) ORDER BY x.o))
               WITH ORDINALITY AS f(job_id, run_lease, accepted, next_state, contended, ord);
        v_again := '{}';
        FOR k IN 1 .. cardinality(v_todo) LOOP
            v_accepted[v_todo[k]] := v_acc[k];
            v_next[v_todo[k]] := v_nx[k];
            IF v_contended[k] THEN
                v_again := v_again || v_todo[k];
            END IF;
        END LOOP;
        v_todo := v_again;
    END LOOP;

    RETURN QUERY
    SELECT p_job_ids[x.i], p_run_leases[x.i], v_accepted[x.i], v_next[x.i]
      FROM generate_series(1, v_n) AS x(i);
END
$fn$;
$awa_template$)
ON CONFLICT (name) DO UPDATE SET ord = EXCLUDED.ord, body = EXCLUDED.body;
INSERT INTO awa.substrate_functions (name, ord, body) VALUES ('ready_take', 1, $awa_template$-- {schema}.ready_take(queue, limit, cand_seq, cand_xid, aging): take up to
-- `limit` runnable jobs of a queue, and at most 8 MiB of args + metadata
-- (stored size; at least one job), in order, advancing the lane heads past
-- them. Called only from the execution plane's claim, in the same call
-- (transaction) that writes the claim batch.
--
-- Order: priority 1 first, 4 last (docs/adr/0012), after aging, then lane
-- position. Aging moves a waiting job one step towards 1 per aging
-- interval (the effective priority may go below 1). Within one lane the
-- effective priority is made non-decreasing (a running maximum: a newer
-- job never ranks ahead of an older one of its lane), so what is taken
-- from a lane is always a prefix of it and the head can move past exactly
-- what was taken.
--
-- Concurrent claimers skip each other: lanes are locked FOR UPDATE SKIP
-- LOCKED, so a lane being claimed by someone else is simply not offered;
-- the returned frontier is then 0 ("Busy lanes" below), so the caller
-- looks again soon.
--
-- Tombstoned entries (cancelled jobs, and the old copies relocation leaves
-- behind, one per move) are skipped by the scan itself, so they never use
-- up the limit: a call that takes fewer jobs than it was asked for, and
-- returns a non-zero frontier, has taken every runnable job up to the
-- frontier, and a worker relies on that to go idle until the next
-- notification. (Counting them once let a
-- backlog whose jobs had each been relocated a few times drain a quarter
-- of a claim per poll interval.) A lane found exhausted up to the
-- frontier has its head moved to the frontier, past any tombstoned tail:
-- nothing at or below the frontier can still appear in it (the lane is
-- locked, so no relocation or cancel of it runs meanwhile, and every
-- producer at or below the frontier has committed).
--
-- The frontier. A lane position is safe to pass only once no transaction
-- can still commit a row at or below it, otherwise a later producer's job
-- would overtake (and the head would strand) an earlier, still
-- uncommitted one. We read M = ready_seq.last_value, then take our own
-- transaction id X. Every position <= M was drawn by a producer whose xid
-- was assigned before (ready_append's rule), hence is older than X. So once
-- no transaction older than X is running (the xmin of a later snapshot is
-- at least X), everything <= M is final and visible to a later statement.
-- (A snapshot's xip alone is not enough: it omits running xids newer than
-- the newest completed one.) The caller passes the candidate (M, X) of its
-- previous call, which has usually settled by now, and gets this call's
-- candidate back (next_seq, next_xid) in every row; when no job is taken,
-- one row with job_id NULL still carries it.
--
-- Which slots. A lane's entries past its head can sit in any slot of the
-- queue ring (a producer that read the ledger before a rotation writes
-- the slot it read; relocation copies old entries into the current slot),
-- and a generic plan over ready_entries starts a scan of every partition,
-- which is most of the price of a claim of one job. So each lane carries
-- low_gen: every entry of the lane past its head is in a slot of
-- generation >= low_gen. When the call locks one lane whose low_gen is at
-- least the current generation - 1, it scans only the current slot and the
-- one before (`slot IN (..)` on two plain parameters: the executor prunes
-- the others when it starts), in a statement that also checks the ledger
-- has not moved since (a newer slot could hold positions below ones it
-- takes; if it moved, nothing is taken and the caller looks again at
-- once). Everything else takes the general statement over every slot.
-- low_gen only moves up, to ready_sealed.generation + 1, and only after a
-- statement that sees every entry those generations will ever hold (the
-- seal's promise) found none of the lane's past its head there; a new lane
-- starts at 0.
--
-- When neither candidate has settled (a long transaction is open
-- somewhere), a slow path reads pg_locks once: settled if no transaction
-- older than X holds this queue's producer lock (ready_append takes it
-- before drawing a position). Transactions that ended before that read are
-- visible to the statement that reads the rows, which starts after it. So
-- an unrelated long transaction, or a long producer of another queue, does
-- not hold this queue back. (Producers in prepared two-phase transactions
-- hold their locks without a backend and are not recognised: do not
-- enqueue inside PREPARE TRANSACTION.)
--
-- Plans that cannot degrade. Every read of ready_entries here asks for a
-- lane's entries past its head IN LANE ORDER with a LIMIT (`ORDER BY
-- e.lane_seq LIMIT n`), existence checks included: they ask for the
-- lane's first entry past its head, in a lateral subquery or as a scalar,
-- never as an `EXISTS`/`NOT EXISTS` directly over ready_entries, whose
-- LIMIT and ORDER BY the planner drops when it makes the check a semi- or
-- anti-join. Tombstones are probed per entry read, through their primary
-- key, by a scalar subquery (`(SELECT true FROM ready_tombstones t WHERE
-- <the entry's key>) IS NULL`), which the planner never turns into a
-- join: as a `NOT EXISTS` it became, once autovacuum had analyzed a slot
-- holding cancelled jobs, a hash anti-join over every tombstone of the
-- slot under a sort of the whole lane (2,121 pages to claim one job of a
-- backlog of 100,000 with one job in ten cancelled). (When the slots read
-- hold no tombstone at all, which one probe in the same statement, after
-- the lane lock, tells, no entry is probed.) With the ORDER BY and
-- nothing to join, the only plan that does not read the whole rest of the
-- lane before returning is the lane index walked from the head. Where the
-- lane spans slots (a merge of each slot's index), the probe sits in the
-- query above an `OFFSET 0` fence, which PostgreSQL never pushes a
-- condition through: pushed into each slot's scan, it made the merge find
-- each slot's first live entry before returning anything, stepping over
-- every tombstoned old copy relocation had left in a slot. Above the
-- fence the merged lane is read in order, and the probe and the LIMIT stop
-- it after what it takes. And the function runs with `enable_sort = off`:
-- a lane read from more than one slot is in lane order only as a merge of
-- the slots' index scans, and a generic plan, which cannot know how many
-- entries lie between the head and the frontier (it guesses a few
-- hundred), preferred appending the slots and sorting the result: every
-- waiting entry of the lane, sorted, to take one. Without the sort there
-- is no other way to produce lane order than the merge. (The sorts left,
-- of what a call already took, have no alternative and run regardless;
-- PostgreSQL 15 still charges each of them the disabled-node penalty of
-- 10^10, which would make every such plan pass jit_above_cost and compile
-- for 600 ms on each call in a session with JIT on, so the function also
-- runs with `jit = off`, as every session Awa opens does.)
-- So the
-- planner keeps to it whatever the statistics say: a generic plan
-- estimates `lane_seq > $head` at a third of the lane, and without the
-- ORDER BY it chose a bitmap scan (or a parallel sequential scan) of that
-- third for a one-row check, which made a claim's cost grow with the
-- backlog once the ring had been analyzed (issue 33: 49 ms per claim at a
-- backlog of 400,000). tests/maint/plan_bounds.rs holds every statement to
-- a buffer bound proportional to what it returns, after ANALYZE, over a
-- backlog of 100,000.
--
-- Bounds (SQLSTATE 22023): limit within awa_core::bounds::CLAIM_BATCH (1
-- to 1024); aging NULL (off) or within PRIORITY_AGING_STORED (1 ms to 30
-- days): a zero interval would divide by zero.
CREATE OR REPLACE FUNCTION {schema}.ready_take(
    p_queue     text,
    p_limit     integer,
    p_cand_seq  bigint,
    p_cand_xid  xid8,
    p_aging     interval
) RETURNS TABLE (
    job_id bigint, slot integer, lane_seq bigint, kind text, args jsonb,
    priority smallint, attempt integer, max_attempts integer, run_lease bigint,
    created_at timestamptz, ready_at timestamptz, unique_key text, metadata jsonb,
    frontier bigint, next_seq bigint, next_xid xid8, shard smallint
) LANGUAGE plpgsql SET plan_cache_mode = force_generic_plan SET enable_sort = off SET jit = off AS $fn$
#variable_conflict use_column
DECLARE
    v_seq      bigint;
    v_xid      xid8;
    v_frontier bigint;
    v_seen     bigint;    -- the frontier as returned (see "Busy lanes")
    v_lanes    bigint;    -- the queue's lanes, as counted before locking
    v_pass     integer;
    v_timeout  text;      -- the caller's lock_timeout
    v_prios    smallint[];
    v_shards   smallint[];
    v_heads    bigint[];
    v_lows     bigint[];
    v_gen      bigint;    -- the current queue-ring generation
    v_s1       integer;   -- its slot
    v_s2       integer;   -- the previous generation's slot (v_s1 when none)
    v_fast     boolean;   -- every lane of the queue scans v_s1 and v_s2 only
    v_taken    integer;
    v_sealed   bigint;
BEGIN
    IF p_limit IS NULL OR p_limit NOT BETWEEN 1 AND 1024 THEN
        RAISE EXCEPTION 'claim limit must be 1 to 1024 (got %)', coalesce(p_limit::text, 'NULL')
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'Claim at most a claim batch (awa_core::bounds::CLAIM_BATCH) per call.';
    END IF;
    IF p_aging NOT BETWEEN interval '1 millisecond' AND interval '30 days' THEN
        RAISE EXCEPTION 'priority aging must be 1ms to 30days, or NULL for none (got %)', p_aging
            USING ERRCODE = 'invalid_parameter_value',
                  HINT = 'A waiting job gains one priority step per this interval (awa queue configure --priority-aging).';
    END IF;
    SELECT s.last_value,
           (SELECT l.generation FROM {schema}.ring_ledger l
             WHERE l.ring = 'queue' ORDER BY l.generation DESC LIMIT 1),
           (SELECT l.slot FROM {schema}.ring_ledger l
             WHERE l.ring = 'queue' ORDER BY l.generation DESC LIMIT 1),
           (SELECT l.slot FROM {schema}.ring_ledger l
             WHERE l.ring = 'queue' ORDER BY l.generation DESC OFFSET 1 LIMIT 1)
      INTO v_seq, v_gen, v_s1, v_s2
      FROM {schema}.ready_seq s;
    v_s2 := coalesce(v_s2, v_s1);
    -- (The lanes counted here, before any is locked, tell the lock below
    -- whether it skipped one: "Busy lanes".)
    SELECT coalesce(bool_and(h.low_gen >= v_gen - 1), false), count(*) INTO v_fast, v_lanes
      FROM {schema}.lane_heads h WHERE h.queue = p_queue;
    -- Nothing visible past any lane head: return at once, keeping the old
    -- candidate. No xid is assigned, so an idle poll commits nothing (no
    -- WAL flush). With every lane fast, only the newest two slots are
    -- looked at, and anything this statement cannot vouch for counts as
    -- work: a ledger that moved since, or a lane that is not fast (new
    -- since).
    IF v_fast THEN
        IF NOT EXISTS (
                SELECT 1
                  FROM {schema}.lane_heads h
                 CROSS JOIN LATERAL (
                        SELECT 1 FROM {schema}.ready_entries e
                         WHERE e.slot IN (v_s1, v_s2)
                           AND e.queue = h.queue AND e.priority = h.priority AND e.shard = h.shard
                           AND e.lane_seq > h.head_seq
                         ORDER BY e.lane_seq LIMIT 1) w
                 WHERE h.queue = p_queue)
           AND NOT EXISTS (SELECT 1 FROM {schema}.lane_heads h
                            WHERE h.queue = p_queue AND h.low_gen < v_gen - 1)
           AND v_gen = (SELECT l.generation FROM {schema}.ring_ledger l
                         WHERE l.ring = 'queue' ORDER BY l.generation DESC LIMIT 1) THEN
            RETURN QUERY SELECT NULL::bigint, NULL::integer, NULL::bigint, NULL::text, NULL::jsonb,
                                NULL::smallint, NULL::integer, NULL::integer, NULL::bigint,
                                NULL::timestamptz, NULL::timestamptz, NULL::text, NULL::jsonb,
                                NULL::bigint, p_cand_seq, p_cand_xid, NULL::smallint;
            RETURN;
        END IF;
    ELSIF NOT EXISTS (
            SELECT 1
              FROM {schema}.lane_heads h
             CROSS JOIN LATERAL (
                    SELECT 1 FROM {schema}.ready_entries e
                     WHERE e.queue = h.queue AND e.priority = h.priority AND e.shard = h.shard
                       AND e.lane_seq > h.head_seq
                     ORDER BY e.lane_seq LIMIT 1) w
             WHERE h.queue = p_queue) THEN
        RETURN QUERY SELECT NULL::bigint, NULL::integer, NULL::bigint, NULL::text, NULL::jsonb,
                            NULL::smallint, NULL::integer, NULL::integer, NULL::bigint,
                            NULL::timestamptz, NULL::timestamptz, NULL::text, NULL::jsonb,
                            NULL::bigint, p_cand_seq, p_cand_xid, NULL::smallint;
        RETURN;
    END IF;
    v_xid := pg_current_xact_id();

    IF pg_snapshot_xmin(pg_current_snapshot()) >= v_xid THEN
        v_frontier := v_seq;
    ELSIF p_cand_xid IS NOT NULL AND pg_snapshot_xmin(pg_current_snapshot()) >= p_cand_xid THEN
        v_frontier := least(p_cand_seq, v_seq);
    ELSIF NOT EXISTS (
            SELECT 1
              FROM pg_locks a
              JOIN pg_locks t ON t.pid = a.pid
             WHERE a.locktype = 'advisory' AND a.classid = 6387554
               AND a.objid = hashtext(p_queue)::oid AND a.objsubid = 2 AND a.granted
               AND a.database = (SELECT d.oid FROM pg_database d WHERE d.datname = current_database())
               AND a.pid <> pg_backend_pid()
               AND t.locktype = 'transactionid' AND t.mode = 'ExclusiveLock' AND t.granted
               AND age(t.transactionid) > age(v_xid::xid)) THEN
        v_frontier := v_seq;
    ELSE
        v_frontier := 0;
    END IF;

    -- Lock the lanes in a statement of their own, BEFORE the statement that
    -- reads entries and tombstones. A canceller (ready_tombstone) holds the
    -- lane lock while it writes a tombstone, so every tombstone of a locked
    -- lane committed before we got the lock, and the next statement's
    -- snapshot sees it. Reading the tombstones in the locking statement
    -- itself used a snapshot older than the lock and handed out jobs that
    -- had just been cancelled (claimed and cancelled at once, their unique
    -- key released while they ran).
    FOR v_pass IN 1..2 LOOP
        SELECT coalesce(array_agg(l.priority), '{}'), coalesce(array_agg(l.shard), '{}'),
               coalesce(array_agg(l.head_seq), '{}'), coalesce(array_agg(l.low_gen), '{}')
          INTO v_prios, v_shards, v_heads, v_lows
          FROM (SELECT h.priority, h.shard, h.head_seq, h.low_gen
                  FROM {schema}.lane_heads h
                 WHERE h.queue = p_queue
                 ORDER BY h.priority, h.shard
                   FOR UPDATE SKIP LOCKED) l;
        EXIT WHEN cardinality(v_prios) > 0 OR v_lanes = 0 OR v_pass = 2;
        -- Every lane busy: almost always another worker's claim of this
        -- queue, which holds them all for its few milliseconds. Queue up
        -- behind it for the first lane (briefly: a lane can also be held
        -- by a cancel inside someone's long transaction), then lock what
        -- is free again. Claims of one queue then follow each other
        -- through the lock queue instead of coming back empty and trying
        -- again; with eight workers on a backlog, most claims did.
        BEGIN
            v_timeout := current_setting('lock_timeout');
            PERFORM set_config('lock_timeout', '50ms', true);
            PERFORM 1 FROM {schema}.lane_heads h
              WHERE h.queue = p_queue
              ORDER BY h.priority, h.shard LIMIT 1
                FOR UPDATE;
            PERFORM set_config('lock_timeout', v_timeout, true);
        EXCEPTION WHEN lock_not_available THEN
            -- Still held: reported busy below. (The subtransaction's
            -- rollback restored lock_timeout.)
            EXIT;
        END;
    END LOOP;
    -- Busy lanes: a lane another transaction holds (a concurrent claim,
    -- usually another worker's; a cancel or relocation of it) was skipped,
    -- so what this call takes says nothing about that lane: work may wait
    -- there the moment the holder commits. The frontier is then returned
    -- as 0, as when the ledger moved, so the caller looks again shortly
    -- instead of idling until a notification that a standing backlog never
    -- sends (with several workers on one queue, the loser of every
    -- overlapping claim idled a poll interval). v_frontier itself still
    -- bounds what is read and where heads move. (Lanes are never deleted;
    -- one made between the count and the lock can hide a busy lane from
    -- this comparison once, and the producer that made it notifies.)
    v_seen := CASE WHEN cardinality(v_prios) < v_lanes THEN 0 ELSE v_frontier END;

    IF cardinality(v_prios) = 1 AND v_lows[1] >= v_gen - 1 THEN
        -- One lane, all of it in the newest two slots. Its head read
        -- above is current (the lane is ours until commit). One lane has
        -- one priority, so aging changes nothing: lane order is the order.
        RETURN QUERY
        WITH fresh AS MATERIALIZED (
            -- The ledger as this statement sees it: no newer slot than v_s1.
            SELECT l.generation = v_gen AS ok
              FROM {schema}.ring_ledger l
             WHERE l.ring = 'queue' ORDER BY l.generation DESC LIMIT 1
        ),
        -- Whether the two slots hold any tombstone at all (one probe of
        -- their primary keys, read after the lane lock like the probes
        -- below): without one, no entry is probed (a probe per entry,
        -- partitions pruned at each, was a tenth of a claim).
        tombs AS MATERIALIZED (
            SELECT EXISTS (SELECT 1 FROM {schema}.ready_tombstones t
                            WHERE t.slot IN (v_s1, v_s2)) AS any
        ),
        cand AS MATERIALIZED (
            -- Live entries only (see "Tombstoned entries" above), probed
            -- one by one as the lane is read in order (see "Plans that
            -- cannot degrade": the probe sits above the OFFSET 0 fence).
            SELECT x.*
              FROM (SELECT e.slot, e.lane_seq, e.job_id, e.kind, e.args, e.priority, e.shard,
                           e.attempt, e.max_attempts, e.run_lease, e.created_at, e.ready_at,
                           e.unique_key, e.metadata
                      FROM {schema}.ready_entries e
                     WHERE e.slot IN (v_s1, v_s2)
                       AND e.queue = p_queue AND e.priority = v_prios[1] AND e.shard = v_shards[1]
                       AND e.lane_seq > v_heads[1] AND e.lane_seq <= v_frontier
                       AND (SELECT f.ok FROM fresh f)
                     ORDER BY e.lane_seq
                    OFFSET 0) x
             WHERE (NOT (SELECT b.any FROM tombs b)
                    OR (SELECT true FROM {schema}.ready_tombstones t
                         WHERE t.slot IN (v_s1, v_s2)
                           AND t.slot = x.slot AND t.job_id = x.job_id AND t.lane_seq = x.lane_seq) IS NULL)
             LIMIT p_limit
        ),
        ranked AS (
            SELECT c.*, row_number() OVER w AS rn,
                   sum(pg_column_size(c.args) + coalesce(pg_column_size(c.metadata), 0)) OVER w AS bytes
              FROM cand c
            WINDOW w AS (ORDER BY c.lane_seq ROWS UNBOUNDED PRECEDING)
        ),
        -- Bounded by count (the LIMIT) and bytes, as the general statement:
        -- what is taken is a prefix of the lane. The head moves past
        -- exactly it when something was left, to the frontier when the
        -- lane is exhausted (fewer live entries than the limit), and past
        -- the last entry read otherwise. Not when the ledger moved: then
        -- nothing was read.
        chosen AS (
            SELECT r.*, r.rn = 1 OR r.bytes <= 8388608 AS take FROM ranked r
        ),
        moved AS (
            UPDATE {schema}.lane_heads h
               SET head_seq = n.head
              FROM (SELECT CASE
                             WHEN EXISTS (SELECT 1 FROM chosen x WHERE NOT x.take)
                                 THEN (SELECT max(x.lane_seq) FROM chosen x WHERE x.take)
                             WHEN (SELECT count(*) FROM cand c) < p_limit THEN v_frontier
                             ELSE (SELECT max(c.lane_seq) FROM cand c)
                           END AS head) n
             WHERE h.queue = p_queue AND h.priority = v_prios[1] AND h.shard = v_shards[1]
               AND n.head > h.head_seq
               AND (SELECT f.ok FROM fresh f)
            RETURNING 1
        )
        SELECT r.job_id, r.slot, r.lane_seq, r.kind, r.args, r.priority, r.attempt,
               r.max_attempts, r.run_lease, r.created_at, r.ready_at, r.unique_key, r.metadata,
               v_seen, v_seq, v_xid, r.shard
          FROM chosen r
         WHERE r.take
         ORDER BY r.rn;
        GET DIAGNOSTICS v_taken = ROW_COUNT;
        IF v_taken = 0 AND v_gen <> (SELECT l.generation FROM {schema}.ring_ledger l
                                      WHERE l.ring = 'queue' ORDER BY l.generation DESC LIMIT 1) THEN
            -- The ledger moved: nothing was taken; look again at once.
            v_seen := 0;
        END IF;
    ELSE
    RETURN QUERY
    WITH frontier AS (
        SELECT v_frontier AS seq
    ),
    lanes AS MATERIALIZED (
        -- Ours until commit: head_seq read here is current.
        SELECT h.priority, h.shard, h.head_seq
          FROM {schema}.lane_heads h
          JOIN unnest(v_prios, v_shards) AS k(priority, shard)
            ON k.priority = h.priority AND k.shard = h.shard
         WHERE h.queue = p_queue
    ),
    tombs AS MATERIALIZED (
        -- Whether any tombstone exists (as in the one-lane statement:
        -- without one, no entry is probed).
        SELECT EXISTS (SELECT 1 FROM {schema}.ready_tombstones t) AS any
    ),
    cand AS MATERIALIZED (
        -- Live entries only, up to the limit per lane. A job moved by
        -- ready_relocate has two entries with one lane_seq, the tombstoned
        -- old copy and the live new one; only the live one is read.
        SELECT r.*
          FROM lanes l
         CROSS JOIN frontier f
         CROSS JOIN LATERAL (
                SELECT x.*
                  FROM (SELECT e.slot, e.lane_seq, e.job_id, e.kind, e.args, e.priority, e.shard,
                               e.attempt, e.max_attempts, e.run_lease, e.created_at, e.ready_at,
                               e.unique_key, e.metadata
                          FROM {schema}.ready_entries e
                         WHERE e.queue = p_queue AND e.priority = l.priority AND e.shard = l.shard
                           AND e.lane_seq > l.head_seq AND e.lane_seq <= f.seq
                         ORDER BY e.lane_seq
                        OFFSET 0) x
                 WHERE (NOT (SELECT b.any FROM tombs b)
                        OR (SELECT true FROM {schema}.ready_tombstones t
                             WHERE t.slot = x.slot AND t.job_id = x.job_id AND t.lane_seq = x.lane_seq) IS NULL)
                 LIMIT p_limit) r
    ),
    aged AS (
        SELECT c.*,
               max(c.priority - CASE WHEN p_aging IS NULL OR p_aging <= interval '0' THEN 0
                                     ELSE floor(extract(epoch FROM now() - c.ready_at)
                                                / extract(epoch FROM p_aging)) END)
                   OVER (PARTITION BY c.priority, c.shard ORDER BY c.lane_seq) AS effective
          FROM cand c
    ),
    ranked AS (
        SELECT a.*, row_number() OVER w AS rn,
               -- Bytes handed out so far, this job included (as stored).
               sum(pg_column_size(a.args) + coalesce(pg_column_size(a.metadata), 0)) OVER w AS bytes
          FROM aged a
        WINDOW w AS (ORDER BY a.effective, a.lane_seq ROWS UNBOUNDED PRECEDING)
    ),
    -- A batch is bounded by count and by bytes (8 MiB; the first job is
    -- always taken, whatever its size). Both bounds cut ranked order, so
    -- what is taken is still a prefix of it and, per lane, a prefix of the
    -- lane: the heads below move past exactly what is taken.
    chosen AS (
        SELECT r.*, r.rn <= p_limit AND (r.rn = 1 OR r.bytes <= 8388608) AS take
          FROM ranked r
    ),
    first_left AS (
        SELECT r.priority, r.shard, min(r.lane_seq) AS seq
          FROM chosen r WHERE NOT r.take
         GROUP BY r.priority, r.shard
    ),
    -- Per locked lane: past what was taken when something was left; to
    -- the frontier when the lane is exhausted (fewer live entries than the
    -- limit, none at all included); else past the last entry read.
    per_lane AS (
        SELECT l.priority, l.shard, count(c.lane_seq) AS n, max(c.lane_seq) AS last_seq,
               max(c.lane_seq) FILTER (WHERE fl.seq IS NOT NULL AND c.lane_seq < fl.seq) AS before_left,
               bool_or(fl.seq IS NOT NULL) AS cut
          FROM lanes l
          LEFT JOIN cand c ON c.priority = l.priority AND c.shard = l.shard
          LEFT JOIN first_left fl ON fl.priority = l.priority AND fl.shard = l.shard
         GROUP BY l.priority, l.shard
    ),
    new_heads AS (
        SELECT p.priority, p.shard,
               CASE WHEN p.cut THEN p.before_left
                    WHEN p.n < p_limit THEN v_frontier
                    ELSE p.last_seq END AS head
          FROM per_lane p
    ),
    moved AS (
        UPDATE {schema}.lane_heads h
           SET head_seq = n.head
          FROM new_heads n
         WHERE h.queue = p_queue AND h.priority = n.priority AND h.shard = n.shard
           AND n.head > h.head_seq
        RETURNING 1
    ),
    taken AS (
        SELECT r.job_id, r.slot, r.lane_seq, r.kind, r.args, r.priority, r.attempt,
               r.max_attempts, r.run_lease, r.created_at, r.ready_at, r.unique_key,
               r.metadata, r.rn, r.shard
          FROM chosen r WHERE r.take
    )
    SELECT t.job_id, t.slot, t.lane_seq, t.kind, t.args, t.priority, t.attempt,
           t.max_attempts, t.run_lease, t.created_at, t.ready_at, t.unique_key, t.metadata,
           v_seen, v_seq, v_xid, t.shard
      FROM taken t
     ORDER BY t.rn;
    -- (moved, a data-modifying CTE, runs to completion although unread.)
    GET DIAGNOSTICS v_taken = ROW_COUNT;
    END IF;

    -- Move low_gen up where ready_sealed allows, so the next claims of
    -- these lanes scan the newest two slots only. Worth it once per lane
    -- and rotation; cheap when nothing changed (no statement runs).
    IF v_gen > ANY (v_lows) THEN
        SELECT z.generation INTO v_sealed FROM {schema}.ready_sealed z;
        IF cardinality(v_prios) = 1 AND v_lows[1] = v_gen - 1 AND v_sealed = v_gen - 1 THEN
            -- The usual case after a rotation: the lane's entries past its
            -- head were all in the newest two slots; the older of them is
            -- sealed now. One slot to look at.
            UPDATE {schema}.lane_heads h
               SET low_gen = v_gen
             WHERE h.queue = p_queue AND h.priority = v_prios[1] AND h.shard = v_shards[1]
               AND h.low_gen = v_gen - 1
               AND (SELECT e.lane_seq FROM {schema}.ready_entries e
                     WHERE e.slot = v_s2
                       AND e.queue = h.queue AND e.priority = h.priority AND e.shard = h.shard
                       AND e.lane_seq > h.head_seq
                     ORDER BY e.lane_seq LIMIT 1) IS NULL;
        ELSIF v_taken < p_limit AND v_sealed >= (SELECT min(x) FROM unnest(v_lows) AS x) THEN
            -- A lane further behind (new, or after a backlog): look at
            -- every slot of the generations from its low_gen to the seal.
            -- The seal promises nothing more will be written there, and
            -- this statement sees everything that was (it runs after the
            -- seal was read). Tombstoned entries count as present.
            UPDATE {schema}.lane_heads h
               SET low_gen = v_sealed + 1
              FROM unnest(v_prios, v_shards) AS k(priority, shard)
             WHERE h.queue = p_queue AND h.priority = k.priority AND h.shard = k.shard
               AND h.low_gen <= v_sealed
               AND (SELECT e.lane_seq FROM {schema}.ready_entries e
                     WHERE e.queue = h.queue AND e.priority = h.priority AND e.shard = h.shard
                       AND e.lane_seq > h.head_seq
                       AND e.slot = ANY (ARRAY(
                             SELECT l.slot FROM {schema}.ring_ledger l
                              WHERE l.ring = 'queue'
                                AND l.generation BETWEEN h.low_gen AND v_sealed))
                     ORDER BY e.lane_seq LIMIT 1) IS NULL;
        END IF;
    END IF;

    IF v_taken = 0 THEN
        RETURN QUERY SELECT NULL::bigint, NULL::integer, NULL::bigint, NULL::text, NULL::jsonb,
                            NULL::smallint, NULL::integer, NULL::integer, NULL::bigint,
                            NULL::timestamptz, NULL::timestamptz, NULL::text, NULL::jsonb,
                            v_seen, v_seq, v_xid, NULL::smallint;
    END IF;
END
$fn$;
$awa_template$)
ON CONFLICT (name) DO UPDATE SET ord = EXCLUDED.ord, body = EXCLUDED.body;

-- Refresh every substrate after the step's changes (appended to each step by
-- `cargo xtask migration draft`): re-run the installer on each substrate
-- with its own shape, which creates the tables a changed installer added,
-- re-instantiates every runtime function template and revokes PUBLIC's
-- EXECUTE again; then give every role that was granted the runtime matrix
-- on a substrate (it holds USAGE there) the matrix as it is now, so new
-- tables and functions are covered without an operator step.
-- The installers' "already exists, skipping" notices are noise here.
SET LOCAL client_min_messages = warning;
DO $refresh$
DECLARE
    s record;
    r record;
BEGIN
    FOR s IN SELECT n.nspname AS schema_name
               FROM pg_catalog.pg_class c
               JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
              WHERE c.relname = 'substrate_info' AND c.relkind = 'r'
              ORDER BY n.nspname <> 'awa', n.nspname LOOP
        EXECUTE format('SELECT awa.install_queue_storage_substrate(%L, queue_slot_count, lease_slot_count, claim_slot_count) FROM %I.substrate_info',
                       s.schema_name, s.schema_name);
    END LOOP;
    FOR r IN SELECT DISTINCT ro.rolname AS role_name, n.nspname AS schema_name
               FROM pg_catalog.pg_namespace n
               CROSS JOIN LATERAL pg_catalog.aclexplode(n.nspacl) a
               JOIN pg_catalog.pg_roles ro ON ro.oid = a.grantee
              WHERE a.privilege_type = 'USAGE'
                AND a.grantee <> n.nspowner
                AND EXISTS (SELECT 1 FROM pg_catalog.pg_class c
                             WHERE c.relnamespace = n.oid AND c.relname = 'substrate_info' AND c.relkind = 'r')
              ORDER BY 1, 2 LOOP
        PERFORM awa.grant_runtime_role(r.role_name, r.schema_name);
    END LOOP;
END
$refresh$;
