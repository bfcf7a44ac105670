-- Chaos diagnosis: what holds the queue ring. Rows per slot (and how many
-- of them wait past their lane head), the current slot, and the latest
-- rotate/prune outcome of the queue ring, as one line.
SELECT concat_ws('; ',
    'current slot ' || (SELECT l.slot FROM awa.ring_ledger l WHERE l.ring = 'queue'
                         ORDER BY l.generation DESC LIMIT 1),
    'rows per slot ' || (SELECT string_agg(x.slot || ':' || x.n || '/' || x.waiting, ' ' ORDER BY x.slot)
                           FROM (SELECT e.slot, count(*) AS n,
                                        count(*) FILTER (WHERE e.lane_seq > h.head_seq) AS waiting
                                   FROM awa.ready_entries e
                                   JOIN awa.lane_heads h
                                     ON h.queue = e.queue AND h.priority = e.priority AND h.shard = e.shard
                                  GROUP BY e.slot) x),
    (SELECT string_agg(o.task || ': ' || o.outcome || ' ' || coalesce(o.detail, ''), '; ')
       FROM awa.ring_outcomes o WHERE o.ring = 'queue'))
