-- limits::list: every configured limit, or one queue's ($1, NULL: all).
SELECT queue, kind, rate_max, extract(epoch FROM rate_period)::float8 AS rate_period_secs,
       rate_by, concurrency_max, concurrency_by
  FROM awa.queue_limits
 WHERE $1::text IS NULL OR queue = $1
 ORDER BY queue, kind
