-- QueueConfig::apply: create or change one queue's settings; NULL keeps
-- the current value (or the default for a new queue). Bounds are the
-- table's CHECK constraints. An aging interval of 0 (or less) means off and
-- is stored as NULL: a zero interval would divide by zero in every claim.
INSERT INTO awa.queue_meta AS m (queue, dlq_enabled, max_attempts, shard_count,
                                 priority_aging_interval, dlq_retention, paused)
VALUES ($1, coalesce($2, false), coalesce($3, 25), coalesce($4, 1),
        CASE WHEN $5 > 0 THEN make_interval(secs => $5) END, coalesce(make_interval(secs => $6), interval '14 days'), coalesce($7, false))
ON CONFLICT (queue) DO UPDATE
   SET dlq_enabled             = coalesce($2, m.dlq_enabled),
       max_attempts            = coalesce($3, m.max_attempts),
       shard_count             = coalesce($4, m.shard_count),
       priority_aging_interval = CASE WHEN $5 IS NULL THEN m.priority_aging_interval
                                      WHEN $5 <= 0 THEN NULL
                                      ELSE make_interval(secs => $5) END,
       dlq_retention           = coalesce(make_interval(secs => $6), m.dlq_retention),
       paused                  = coalesce($7, m.paused),
       updated_at              = now()
RETURNING queue, dlq_enabled, max_attempts, shard_count,
          extract(epoch FROM priority_aging_interval)::float8 AS aging_secs,
          extract(epoch FROM dlq_retention)::float8 AS dlq_retention_secs, paused
