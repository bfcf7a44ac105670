-- ExecPlane::claim. The frontier's xid8 travels as text: sqlx has no type for it.
SELECT job_id, run_lease, claim_slot, batch_id, item, ready_slot, ready_seq, kind, args, priority,
       attempt, max_attempts, created_at, ready_at, metadata,
       next_seq, next_xid::text AS next_xid, waiting
  FROM {schema}.claim($1, $2, $3, $4::text::xid8, $5)
