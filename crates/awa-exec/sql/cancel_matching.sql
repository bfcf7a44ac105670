-- awa_exec::cancel_matching: cancel up to $6 unfinished jobs matching a
-- filter, highest id first, each through cancel_job (a running one through
-- the guarded finish). $1 queue, $2 state (NULL: any unfinished state), $3
-- kind, $4 args containment (jsonb @>), each NULL: any; $5 only ids below
-- this (the previous batch's lowest; NULL: from the highest), $6 batch
-- size. Reads live_jobs, bounded by live work. Jobs enqueued after the
-- first batch have higher ids and are not reached. cancelled_from is NULL
-- for a job that finished between the read and its cancel.
SELECT s.id, {schema}.cancel_job(s.id) AS cancelled_from
  FROM (SELECT id
          FROM {schema}.live_jobs
         WHERE queue = $1
           AND ($2::text IS NULL OR state = $2)
           AND ($3::text IS NULL OR kind = $3)
           AND ($4::jsonb IS NULL OR args @> $4::jsonb)
           AND ($5::bigint IS NULL OR id < $5)
         ORDER BY id DESC
         LIMIT $6) s
 ORDER BY s.id DESC
