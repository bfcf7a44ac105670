-- HistoryPlane::throughput: jobs that reached a terminal state per queue
-- and minute over the last $1 minutes, from the count deltas finish writes
-- (one row per call, slot, queue and state, stamped with its time). Deltas
-- of a retired slot are folded into rollups and leave this window, which
-- only matters for windows longer than the history retention.
SELECT queue, state,
       date_trunc('minute', at) AS minute,
       sum(delta)::bigint AS jobs
  FROM {schema}.count_deltas
 WHERE at > date_trunc('minute', now()) - make_interval(mins => $1)
   AND state IN ('completed', 'failed', 'cancelled')
 GROUP BY queue, state, date_trunc('minute', at)
 ORDER BY queue, minute
