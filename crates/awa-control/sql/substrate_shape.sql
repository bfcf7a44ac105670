-- The shape and settings of one substrate. {schema} is a validated, quoted
-- identifier. parked_attempts: attempts moved out of the rings (long jobs).
-- failures_kept: failed and cancelled jobs retained, from the statistics
-- collector (an estimate; a count would scan days of failures).
SELECT queue_slot_count, lease_slot_count, claim_slot_count, installed_at,
       extract(epoch FROM history_retention)::double precision AS history_retention_secs,
       extract(epoch FROM failure_retention)::double precision AS failure_retention_secs,
       (SELECT count(*) FROM {schema}.parked_attempts) AS parked_attempts,
       coalesce((SELECT s.n_live_tup FROM pg_stat_user_tables s
                  WHERE s.relid = '{schema}.failure_entries'::regclass), 0)::bigint AS failures_kept
  FROM {schema}.substrate_info
