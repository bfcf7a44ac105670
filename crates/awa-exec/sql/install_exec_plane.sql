-- awa.install_exec_plane(schema, lease_slots, claim_slots)
--
-- Execution evidence, compact: a claim call writes one claim batch row for
-- all the jobs it hands out, and a finish call writes one closure link per
-- batch it touches, listing the items it closed. Both live in the claim
-- ring. Jobs that heartbeat, report progress or wait for a callback
-- additionally get a lease row in the lease ring and an attempt_state row;
-- short jobs never touch either.
--
-- An item of a batch is *open* while no link of its batch lists it. The
-- links of a batch are numbered 1, 2, 3, ... and a finisher inserts link
-- max+1 having read links 1..max under the same snapshot: the primary key
-- (slot, batch_id, link) lets exactly one of two racing finishers of a
-- batch insert it, and the loser reads again. So every item is listed by at
-- most one link: exactly one finisher per attempt (see fn_finish.sql).
CREATE OR REPLACE FUNCTION awa.install_exec_plane(
    p_schema text, p_lease_slots integer, p_claim_slots integer
) RETURNS void LANGUAGE plpgsql SECURITY INVOKER AS $fn$
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
$fn$;
