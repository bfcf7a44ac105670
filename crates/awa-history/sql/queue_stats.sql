-- HistoryPlane::queue_stats. Live states are counted where they live
-- (live_job_states: O(lanes + live jobs), no body read); terminal totals
-- come from the folded rollups plus unfolded deltas, so they stay exact
-- after the ring has reclaimed the rows themselves. The deltas are one row
-- per finish call, queue slot, queue and state, folded when their slot is
-- retired: a read of them costs a row per finish call retained (about one
-- per hundred jobs under load), not a row per job.
WITH live AS (
    SELECT queue, state, count(*) AS n
      FROM {schema}.live_job_states
     WHERE ($1::text IS NULL OR queue = $1)
     GROUP BY queue, state
    UNION ALL
    SELECT queue, 'dead_lettered', count(*)
      FROM {schema}.dlq_entries
     WHERE ($1::text IS NULL OR queue = $1)
     GROUP BY queue
),
terminal AS (
    SELECT queue, state, sum(n)::bigint AS n FROM (
        SELECT queue, state, total AS n FROM {schema}.count_rollups
        UNION ALL
        SELECT queue, state, delta FROM {schema}.count_deltas
    ) t
     WHERE state IN ('completed', 'failed', 'cancelled') AND ($1::text IS NULL OR queue = $1)
     GROUP BY queue, state
)
SELECT queue, state, n::bigint AS n FROM live
UNION ALL
SELECT queue, state, n FROM terminal
ORDER BY queue, state
