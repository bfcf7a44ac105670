-- Plain insert: one table, one primary key, the job's payload. Models the
-- least an application does to record a job in its own transaction.
--
-- Fair as a floor: it stores the same args, in jsonb, with an identity and
-- a timestamp, and nothing else (no queue, lane, index beyond the key,
-- notification, claim, completion or history).
CREATE TABLE IF NOT EXISTS bench_plain.inserts (
    id         bigserial   PRIMARY KEY,
    args       jsonb       NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now()
)
