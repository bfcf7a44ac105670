-- awa.install_control_plane(schema, queue_slots, lease_slots, claim_slots)
--
-- Substrate-local control state: the substrate's own description, the ring
-- ledgers, lane heads and uniqueness keys. Called only by
-- awa.install_queue_storage_substrate, which has already validated the
-- arguments and holds the per-schema lock. Every statement is IF NOT EXISTS
-- so a re-run completes a partial install and changes nothing otherwise.
CREATE OR REPLACE FUNCTION awa.install_control_plane(
    p_schema text, p_queue_slots integer, p_lease_slots integer, p_claim_slots integer
) RETURNS void LANGUAGE plpgsql SECURITY INVOKER AS $fn$
BEGIN
    -- The substrate describes itself, so discovery needs no registry outside
    -- the schema and installing stays activation-neutral.
    EXECUTE format($ddl$
        CREATE TABLE IF NOT EXISTS %1$I.substrate_info (
            singleton          boolean     PRIMARY KEY DEFAULT true CHECK (singleton),
            queue_slot_count   integer     NOT NULL,
            lease_slot_count   integer     NOT NULL,
            claim_slot_count   integer     NOT NULL,
            installed_at       timestamptz NOT NULL DEFAULT now(),
            -- Minimum time a queue-ring slot's terminal history is kept
            -- after the slot is sealed; NULL: (queue slots - 2) x the
            -- leader's rotate interval (see ring_prune).
            history_retention  interval    CHECK (history_retention BETWEEN interval '0' AND interval '3650 days'),
            -- Largest job enqueue accepts: bytes of args + metadata as JSON
            -- text (jsonb::text). Workers hold a claimed job in memory, so
            -- this bounds a worker per job. Change with
            -- UPDATE <schema>.substrate_info SET max_job_bytes = n (migrator).
            max_job_bytes      integer     NOT NULL DEFAULT 1048576
                               CHECK (max_job_bytes BETWEEN 1024 AND 268435456),
            -- How long a failed or cancelled job stays readable (and
            -- retryable) in failure_entries, whatever the ring does; the
            -- leader's failure_retention task deletes older ones. The
            -- range is awa_core::bounds::FAILURE_RETENTION.
            failure_retention  interval    NOT NULL DEFAULT interval '7 days'
                CONSTRAINT substrate_info_failure_retention_in_range
                CHECK (failure_retention BETWEEN interval '1 second' AND interval '3650 days')
        )$ddl$, p_schema);

    -- Append-only ring cursors: the newest generation of a ring is its
    -- current slot. Rotation inserts generation + 1; the primary key makes
    -- two racing rotators a compare-and-swap where only one row lands.
    EXECUTE format($ddl$
        CREATE TABLE IF NOT EXISTS %1$I.ring_ledger (
            ring       text        NOT NULL CHECK (ring IN ('queue', 'lease', 'claim')),
            generation bigint      NOT NULL CHECK (generation >= 0),
            slot       integer     NOT NULL CHECK (slot >= 0),
            rotated_at timestamptz NOT NULL DEFAULT now(),
            rotated_by text        NOT NULL DEFAULT 'install',
            PRIMARY KEY (ring, generation)
        )$ddl$, p_schema);
    EXECUTE format($ddl$
        INSERT INTO %1$I.ring_ledger (ring, generation, slot)
        VALUES ('queue', 0, 0), ('lease', 0, 0), ('claim', 0, 0)
        ON CONFLICT DO NOTHING$ddl$, p_schema);
    -- The ledger is one chain: generation g + 1 writes the slot after
    -- generation g's. The runtime role may append (rotation needs INSERT),
    -- so every appended row is checked here rather than trusted to
    -- ring_rotate: it must be a row ring_rotate itself would write. The
    -- next link of the chain (a bogus slot would make every writer pick a
    -- wrong one); dated now(), the transaction's time (rotated_at decides
    -- when the slot it seals may lose its history, ring_slot_sealed_at,
    -- and what the new slot counts as fresh: a row dated 1970 would end a
    -- slot's history retention at once); off a slot worth sealing
    -- (ring_slot_fresh) onto one that is empty and not awaiting truncation
    -- (ring_slot_empty, ring_retirements: a rotation onto live rows would
    -- mix them into the write slot). A generation already taken is left
    -- to the primary key (ring_rotate's ON CONFLICT DO NOTHING reports a
    -- lost race; any other insert fails). (A trigger's function needs no
    -- EXECUTE grant to fire, and the runtime role, not owning the table,
    -- cannot disable it.)
    --
    -- Racing rotators: under READ COMMITTED each statement below reads a
    -- newer snapshot. A rival that commits this very generation after the
    -- first "taken?" question makes the later ones fail (its row makes the
    -- old current slot look stale, "nothing new to seal"). So a refusal is
    -- raised only after asking "taken?" again: a refusal seen after the
    -- rival's commit is followed by a question that sees it, and the row
    -- goes on to the primary key, which settles the race.
    EXECUTE format($ddl$
        CREATE OR REPLACE FUNCTION %1$I.ring_ledger_chain_check() RETURNS trigger
        LANGUAGE plpgsql AS $trg$
        DECLARE
            v_prev    integer;
            v_slots   integer;
            v_refusal text;
        BEGIN
            IF EXISTS (SELECT 1 FROM %1$I.ring_ledger l
                        WHERE l.ring = NEW.ring AND l.generation = NEW.generation) THEN
                RETURN NEW;
            END IF;
            SELECT l.slot INTO v_prev FROM %1$I.ring_ledger l
             WHERE l.ring = NEW.ring AND l.generation = NEW.generation - 1;
            SELECT CASE NEW.ring WHEN 'queue' THEN i.queue_slot_count
                                 WHEN 'lease' THEN i.lease_slot_count
                                 ELSE i.claim_slot_count END
              INTO v_slots FROM %1$I.substrate_info i;
            IF v_prev IS NULL OR v_slots IS NULL OR NEW.slot <> (v_prev + 1) %% v_slots THEN
                v_refusal := format('%%s generation %%s must follow generation %%s in the next slot',
                                    NEW.ring, NEW.generation, NEW.generation - 1);
            ELSIF NEW.rotated_at IS DISTINCT FROM now() THEN
                v_refusal := format('%%s generation %%s must be dated now (%%s), not %%s',
                                    NEW.ring, NEW.generation, now(), NEW.rotated_at);
            ELSIF NOT %1$I.ring_slot_fresh(NEW.ring, v_prev) THEN
                v_refusal := format('%%s slot %%s holds nothing new to seal', NEW.ring, v_prev);
            ELSIF NOT %1$I.ring_slot_empty(NEW.ring, NEW.slot)
               OR EXISTS (SELECT 1 FROM %1$I.ring_retirements x
                           WHERE x.ring = NEW.ring AND x.slot = NEW.slot) THEN
                v_refusal := format('%%s slot %%s still holds rows or awaits truncation',
                                    NEW.ring, NEW.slot);
            END IF;
            IF v_refusal IS NULL OR EXISTS (SELECT 1 FROM %1$I.ring_ledger l
                                             WHERE l.ring = NEW.ring AND l.generation = NEW.generation) THEN
                RETURN NEW;
            END IF;
            RAISE EXCEPTION 'ring_ledger: %%', v_refusal
                  USING ERRCODE = 'check_violation',
                        HINT = 'Rings move only through ring_rotate.';
        END
        $trg$$ddl$, p_schema);
    EXECUTE format($ddl$
        CREATE OR REPLACE TRIGGER ring_ledger_chain BEFORE INSERT ON %1$I.ring_ledger
        FOR EACH ROW WHEN (NEW.generation > 0)
        EXECUTE FUNCTION %1$I.ring_ledger_chain_check()$ddl$, p_schema);

    -- Slots proven dead and logically removed, waiting to be truncated. A
    -- snapshot taken after the marker committed no longer shows the slot's
    -- rows in the read views; the slot is truncated only once every older
    -- snapshot has ended (TRUNCATE is not MVCC-safe; this marker is).
    EXECUTE format($ddl$
        CREATE TABLE IF NOT EXISTS %1$I.ring_retirements (
            ring        text        NOT NULL CHECK (ring IN ('queue', 'lease', 'claim')),
            slot        integer     NOT NULL,
            retired_xid xid8        NOT NULL,
            retired_at  timestamptz NOT NULL DEFAULT now(),
            PRIMARY KEY (ring, slot)
        )$ddl$, p_schema);

    -- Outcome of the latest rotate/prune attempt per ring and slot, for
    -- operators; overwritten in place, a few rows per ring.
    EXECUTE format($ddl$
        CREATE TABLE IF NOT EXISTS %1$I.ring_outcomes (
            ring       text        NOT NULL,
            task       text        NOT NULL CHECK (task IN ('rotate', 'prune')),
            outcome    text        NOT NULL,
            detail     text,
            at         timestamptz NOT NULL DEFAULT now(),
            PRIMARY KEY (ring, task)
        )$ddl$, p_schema);

    -- One row per lane (queue, priority, shard): everything in the lane at or
    -- below head_seq has been claimed or tombstoned, and every entry of the
    -- lane past head_seq lives in a queue-ring slot of generation >= low_gen
    -- (ready_take: a claim scans only those slots when they are the newest
    -- two, and moves low_gen up once ready_sealed allows it). Updated once
    -- per claim batch, never per job. The fillfactor keeps those updates HOT
    -- and sets when a page is pruned: PostgreSQL prunes a page on access once
    -- its free space falls below the fillfactor's reserve, so at 10 a lane's
    -- page is pruned every dozen or so versions (at 50 it took about 70),
    -- and a steady queue leaves about a dozen dead versions, not a hundred.
    -- The price: about a dozen lanes per page instead of a hundred.
    EXECUTE format($ddl$
        CREATE TABLE IF NOT EXISTS %1$I.lane_heads (
            queue    text     NOT NULL,
            priority smallint NOT NULL,
            shard    smallint NOT NULL,
            head_seq bigint   NOT NULL DEFAULT 0,
            low_gen  bigint   NOT NULL DEFAULT 0,
            PRIMARY KEY (queue, priority, shard)
        ) WITH (fillfactor = 10)$ddl$, p_schema);

    -- Unique keys and job ids are database-wide, not per substrate: see
    -- awa.job_uniques and awa.job_id_seq in control_schema.sql.
END
$fn$;

-- awa.prefer_lz4(table, columns): store these columns of the table (a ring
-- family's parent) and of each of its partitions compressed with lz4, when
-- the server was built with it (else pglz stays, as before).
--
-- Why: a claim batch of 512 items is ~18 KB of arrays, past the heap row,
-- so PostgreSQL compresses its arrays on every insert, and pglz cost about
-- a millisecond per batch row, 1.5 us of every claimed job (done_batches
-- the same on the finish side). lz4 is a fifth of that and decompresses
-- at least as fast. Only what differs is altered, so a refresh of an
-- installed substrate takes no lock it does not need; the rows written
-- before keep their method (a value says how it was compressed).
CREATE OR REPLACE FUNCTION awa.prefer_lz4(p_table regclass, p_columns text[])
RETURNS void LANGUAGE plpgsql SECURITY INVOKER AS $fn$
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
$fn$;
