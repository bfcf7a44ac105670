-- The chaos suite's ledger: observers on the test database, never read by
-- Awa. Row triggers copy every terminal fact and dead letter, and the
-- first ready entry of every job, into tables no ring reclaims, so the
-- suite can count completions per job however fast history is pruned.
-- Closures (how each attempt ended: complete, retry, snooze, rescue, ...)
-- are copied too. A copy is written by the same transaction as the row it
-- copies: it exists exactly when that row was committed.
CREATE SCHEMA chaos;

CREATE TABLE chaos.enqueued (
    job_id bigint PRIMARY KEY,
    queue  text   NOT NULL,
    kind   text   NOT NULL,
    n      bigint
);

CREATE TABLE chaos.facts (
    job_id    bigint      NOT NULL,
    run_lease bigint      NOT NULL,
    state     text        NOT NULL,
    at        timestamptz NOT NULL DEFAULT clock_timestamp()
);

CREATE TABLE chaos.closures (
    job_id    bigint NOT NULL,
    run_lease bigint NOT NULL,
    outcome   text   NOT NULL
);

-- A closure link lists items of a claim batch: one copy per item.
CREATE FUNCTION chaos.note_closure() RETURNS trigger LANGUAGE plpgsql AS $fn$
BEGIN
    INSERT INTO chaos.closures (job_id, run_lease, outcome)
    SELECT b.job_ids[i.item], b.run_leases[i.item], coalesce(NEW.outcomes[i.ord], NEW.outcome)
      FROM awa.claim_batches b, unnest(NEW.items) WITH ORDINALITY AS i(item, ord)
     WHERE b.slot = NEW.slot AND b.batch_id = NEW.batch_id;
    RETURN NULL;
END
$fn$;

CREATE FUNCTION chaos.note_ready() RETURNS trigger LANGUAGE plpgsql AS $fn$
BEGIN
    INSERT INTO chaos.enqueued (job_id, queue, kind, n)
    VALUES (NEW.job_id, NEW.queue, NEW.kind, (NEW.args ->> 'n')::bigint)
    ON CONFLICT (job_id) DO NOTHING;
    RETURN NULL;
END
$fn$;

CREATE FUNCTION chaos.note_done() RETURNS trigger LANGUAGE plpgsql AS $fn$
BEGIN
    INSERT INTO chaos.facts (job_id, run_lease, state) VALUES (NEW.job_id, NEW.run_lease, NEW.state);
    RETURN NULL;
END
$fn$;

-- A done batch lists completed jobs: one copy per job.
CREATE FUNCTION chaos.note_done_batch() RETURNS trigger LANGUAGE plpgsql AS $fn$
BEGIN
    INSERT INTO chaos.facts (job_id, run_lease, state)
    SELECT u.job_id, u.run_lease, 'completed' FROM unnest(NEW.job_ids, NEW.run_leases) AS u(job_id, run_lease);
    RETURN NULL;
END
$fn$;

CREATE FUNCTION chaos.note_dead() RETURNS trigger LANGUAGE plpgsql AS $fn$
BEGIN
    INSERT INTO chaos.facts (job_id, run_lease, state) VALUES (NEW.job_id, NEW.run_lease, 'dead_lettered');
    RETURN NULL;
END
$fn$;

CREATE TRIGGER chaos_ready AFTER INSERT ON awa.ready_entries
    FOR EACH ROW EXECUTE FUNCTION chaos.note_ready();
CREATE TRIGGER chaos_done AFTER INSERT ON awa.done_entries
    FOR EACH ROW EXECUTE FUNCTION chaos.note_done();
-- Failed and cancelled jobs are kept outside the rings (ADR 11).
CREATE TRIGGER chaos_failure AFTER INSERT ON awa.failure_entries
    FOR EACH ROW EXECUTE FUNCTION chaos.note_done();
CREATE TRIGGER chaos_done_batch AFTER INSERT ON awa.done_batches
    FOR EACH ROW EXECUTE FUNCTION chaos.note_done_batch();
CREATE TRIGGER chaos_closure AFTER INSERT ON awa.claim_closures
    FOR EACH ROW EXECUTE FUNCTION chaos.note_closure();
CREATE TRIGGER chaos_dead AFTER INSERT ON awa.dlq_entries
    FOR EACH ROW EXECUTE FUNCTION chaos.note_dead();
