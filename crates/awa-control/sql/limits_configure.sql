-- limits::apply: set or clear one queue's (or one kind's in it) rate limit
-- and global concurrency (docs/adr/0015). $1 queue, $2 kind ('' = the
-- whole queue); $3 whether to change the rate limit, then $4 jobs, $5
-- period in seconds, $6 partition path (NULL: none; $4 NULL clears it);
-- $7 whether to change the global concurrency, then $8 jobs, $9 partition
-- path ($8 NULL clears it). What is not changed is kept. The ranges are
-- the table's CHECK constraints (awa_core::bounds). A row left with no
-- limit is deleted by limits_prune.sql in the same transaction.
INSERT INTO awa.queue_limits AS l (queue, kind, rate_max, rate_period, rate_by,
                                   concurrency_max, concurrency_by)
VALUES ($1, $2,
        CASE WHEN $3 THEN $4 END,
        CASE WHEN $3 AND $4 IS NOT NULL THEN make_interval(secs => $5) END,
        CASE WHEN $3 AND $4 IS NOT NULL THEN $6::text[] END,
        CASE WHEN $7 THEN $8 END,
        CASE WHEN $7 AND $8 IS NOT NULL THEN $9::text[] END)
ON CONFLICT (queue, kind) DO UPDATE
   SET rate_max        = CASE WHEN $3 THEN excluded.rate_max ELSE l.rate_max END,
       rate_period     = CASE WHEN $3 THEN excluded.rate_period ELSE l.rate_period END,
       rate_by         = CASE WHEN $3 THEN excluded.rate_by ELSE l.rate_by END,
       concurrency_max = CASE WHEN $7 THEN excluded.concurrency_max ELSE l.concurrency_max END,
       concurrency_by  = CASE WHEN $7 THEN excluded.concurrency_by ELSE l.concurrency_by END,
       updated_at      = now()
