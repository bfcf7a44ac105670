-- The shape of one substrate. {schema} is a validated, quoted identifier.
SELECT queue_slot_count, lease_slot_count, claim_slot_count, installed_at
  FROM {schema}.substrate_info
