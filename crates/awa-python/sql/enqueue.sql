-- The Python producer's one statement: awa.enqueue (the SQL producer
-- contract, docs/sql-producer.md) on the caller's own connection, so the
-- jobs commit or roll back with the caller's transaction.
--
-- Parameters are named (the psycopg placeholder style; the SQLAlchemy helper
-- rewrites them to its own), each a list with one element per job, every
-- element text or NULL: the casts below turn them into the function's
-- types, so any driver that sends a list as text[] can call it. `unique`
-- (the key specs, JSON text) is NULL as a whole when no job has one.
-- `traceparent` and `tracestate` (one per call, text or NULL): the W3C
-- trace context of the producer's current OpenTelemetry span, stored in
-- each job's metadata by awa.enqueue; NULL when there is none.
-- Always schema awa: awa.enqueue routes to the substrate that receives
-- writes.
SELECT job_id, inserted, scheduled
  FROM awa.enqueue(
        CAST(%(queues)s AS text[]),
        CAST(%(kinds)s AS text[]),
        CAST(CAST(%(args)s AS text[]) AS jsonb[]),
        CAST(CAST(%(priorities)s AS text[]) AS smallint[]),
        CAST(CAST(%(run_at)s AS text[]) AS timestamptz[]),
        CAST(CAST(%(max_attempts)s AS text[]) AS integer[]),
        CAST(%(unique_keys)s AS text[]),
        CAST(CAST(%(metadata)s AS text[]) AS jsonb[]),
        CAST(CAST(%(unique)s AS text[]) AS jsonb[]),
        CAST(%(traceparent)s AS text),
        CAST(%(tracestate)s AS text))
