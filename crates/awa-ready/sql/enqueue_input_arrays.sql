-- The input of call_enqueue_append.sql for ReadyPlane::enqueue: the batch
-- as parallel arrays, one element per job, in input order ($1 is the
-- append's own routed flag):
--   $2 queues text[], $3 kinds text[], $4 args jsonb[],
--   $5 priorities smallint[], $6 max_attempts integer[] (NULL: the
--   queue's default), $7 metadata jsonb[].
-- Yields (ord, queue, kind, args, priority, max_attempts, metadata).
SELECT u.ord, u.queue, u.kind, u.args, u.priority, u.max_attempts, u.metadata
  FROM unnest($2::text[], $3::text[], $4::jsonb[], $5::smallint[], $6::integer[], $7::jsonb[])
       WITH ORDINALITY AS u(queue, kind, args, priority, max_attempts, metadata, ord)
