-- uniques::prune: delete up to $1 key rows whose job finished and whose
-- key spec's window ended more than a minute ago (finished_at set,
-- hold_until plus the grace passed): they hold nothing any more, so this
-- only bounds the table. The grace is unique_held's: a producer begun
-- inside the window may still enqueue after it ended, and must find the
-- row (fn_unique_held.sql says why; unique_take refuses a key taken past
-- it). Database-wide, run by the leader.
-- Index: job_uniques_expiry_idx (hold_until) WHERE finished_at IS NOT NULL,
-- oldest first. Rows are locked FOR UPDATE SKIP LOCKED, so a producer
-- taking one over at the same moment is never waited for, and a row
-- locked here cannot change before it is deleted.
DELETE FROM awa.job_uniques u
 WHERE u.unique_key = ANY (ARRAY(
           SELECT x.unique_key FROM awa.job_uniques x
            WHERE x.finished_at IS NOT NULL AND x.hold_until <= now() - interval '1 minute'
            ORDER BY x.hold_until
            LIMIT $1
              FOR UPDATE SKIP LOCKED))
   AND u.finished_at IS NOT NULL AND u.hold_until <= now() - interval '1 minute'
