-- The shape and settings of one substrate. {schema} is a validated, quoted
-- identifier. parked_attempts: attempts moved out of the rings (long jobs).
SELECT queue_slot_count, lease_slot_count, claim_slot_count, installed_at,
       extract(epoch FROM history_retention)::double precision AS history_retention_secs,
       (SELECT count(*) FROM {schema}.parked_attempts) AS parked_attempts
  FROM {schema}.substrate_info
