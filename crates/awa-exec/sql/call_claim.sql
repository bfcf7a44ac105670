-- ExecPlane::claim. pg_snapshot travels as text: sqlx has no type for it.
SELECT job_id, run_lease, claim_slot, ready_slot, ready_seq, kind, args, priority,
       attempt, max_attempts, created_at, ready_at, metadata,
       next_seq, next_snap::text AS next_snap
  FROM {schema}.claim($1, $2, $3, $4::text::pg_snapshot, $5)
