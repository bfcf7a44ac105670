-- PgHistoryPlane::publish_activity: this substrate's activity per queue and
-- minute, for the last three minutes (the current one included), into
-- awa.queue_minutes (the dashboard's charts). $1 is the substrate's schema
-- name. Run by the maintenance leader's health task after publish_health;
-- the job path writes nothing for it.
--
-- Terminal counts: count_deltas per queue, state and minute (one row per
-- finish call, slot, queue and state, stamped with its time). A minute's
-- deltas stay in the queue ring longer than three minutes and a late commit
-- only adds to them, so the larger of the stored and the recounted figure
-- is kept: a slot retired between two passes cannot lower a count.
-- Pickup latency: for the latest 200 claim batches of each minute (index
-- claim_batches_claimed_idx, a bounded read however busy the queues are),
-- claimed_at minus the ready_at of the batch's first item, found with one
-- probe of the lane index (ready_entries_lane_idx). A body already reclaimed
-- leaves its batch out; the larger sample of a minute wins.
-- Wait: how long the oldest available job of the queue had waited, as
-- publish_health just measured it (awa.queue_health); a minute keeps the
-- largest it saw.
WITH minutes AS (
    SELECT generate_series(date_trunc('minute', now()) - interval '2 minutes',
                           date_trunc('minute', now()), interval '1 minute') AS minute
), counts AS (
    SELECT d.queue, date_trunc('minute', d.at) AS minute,
           coalesce(sum(d.delta) FILTER (WHERE d.state = 'completed'), 0)::bigint AS completed,
           coalesce(sum(d.delta) FILTER (WHERE d.state = 'failed'), 0)::bigint AS failed,
           coalesce(sum(d.delta) FILTER (WHERE d.state = 'cancelled'), 0)::bigint AS cancelled,
           coalesce(sum(d.delta) FILTER (WHERE d.state = 'dead_lettered'), 0)::bigint AS dead_lettered
      FROM {schema}.count_deltas d
     WHERE d.at >= date_trunc('minute', now()) - interval '2 minutes'
     GROUP BY d.queue, date_trunc('minute', d.at)
), pickups AS (
    SELECT b.queue, m.minute, count(*)::integer AS claims_sampled,
           avg(extract(epoch FROM b.claimed_at - e.ready_at))::float8 AS pickup_avg_secs,
           max(extract(epoch FROM b.claimed_at - e.ready_at))::float8 AS pickup_max_secs
      FROM minutes m
     CROSS JOIN LATERAL (
           SELECT c.queue, c.claimed_at, c.ready_slots[1] AS ready_slot, c.ready_seqs[1] AS ready_seq,
                  c.priorities[1] AS priority, c.shards[1] AS shard
             FROM {schema}.claim_batches c
            WHERE c.claimed_at >= m.minute AND c.claimed_at < m.minute + interval '1 minute'
            ORDER BY c.claimed_at DESC
            LIMIT 200) b
     CROSS JOIN LATERAL (
           SELECT r.ready_at
             FROM {schema}.ready_entries r
            WHERE r.slot = b.ready_slot AND r.queue = b.queue AND r.priority = b.priority
              AND r.shard = b.shard AND r.lane_seq = b.ready_seq
            LIMIT 1) e
     GROUP BY b.queue, m.minute
), waits AS (
    SELECT h.queue, date_trunc('minute', now()) AS minute, h.oldest_available_secs AS wait_max_secs
      FROM awa.queue_health h
     WHERE h.schema_name = $1 AND h.oldest_available_secs IS NOT NULL
), keys AS (
    SELECT queue, minute FROM counts
    UNION SELECT queue, minute FROM pickups
    UNION SELECT queue, minute FROM waits
)
INSERT INTO awa.queue_minutes AS q
       (schema_name, queue, minute, completed, failed, cancelled, dead_lettered,
        claims_sampled, pickup_avg_secs, pickup_max_secs, wait_max_secs, measured_at)
SELECT $1, k.queue, k.minute,
       coalesce(c.completed, 0), coalesce(c.failed, 0), coalesce(c.cancelled, 0),
       coalesce(c.dead_lettered, 0),
       coalesce(p.claims_sampled, 0), p.pickup_avg_secs, p.pickup_max_secs, w.wait_max_secs, now()
  FROM keys k
  LEFT JOIN counts c USING (queue, minute)
  LEFT JOIN pickups p USING (queue, minute)
  LEFT JOIN waits w USING (queue, minute)
ON CONFLICT (schema_name, queue, minute) DO UPDATE
   SET completed = greatest(q.completed, EXCLUDED.completed),
       failed = greatest(q.failed, EXCLUDED.failed),
       cancelled = greatest(q.cancelled, EXCLUDED.cancelled),
       dead_lettered = greatest(q.dead_lettered, EXCLUDED.dead_lettered),
       claims_sampled = greatest(q.claims_sampled, EXCLUDED.claims_sampled),
       pickup_avg_secs = CASE WHEN EXCLUDED.claims_sampled >= q.claims_sampled
                              THEN EXCLUDED.pickup_avg_secs ELSE q.pickup_avg_secs END,
       pickup_max_secs = CASE WHEN EXCLUDED.claims_sampled >= q.claims_sampled
                              THEN EXCLUDED.pickup_max_secs ELSE q.pickup_max_secs END,
       wait_max_secs = greatest(q.wait_max_secs, EXCLUDED.wait_max_secs),
       measured_at = EXCLUDED.measured_at
