-- ExecPlane::claim. The frontier's xid8 travels as text: sqlx has no type for it.
-- The columns are read by position (PgExecPlane::claim_rows): keep the order.
-- $6: this statement is its own transaction (PgExecPlane::
-- claim_committing_async): it commits without waiting for the WAL flush
-- (set_config(.., true) lasts until the commit of the transaction it runs
-- in, the statement's own here).
SELECT c.job_id, c.run_lease, c.claim_slot, c.batch_id, c.item, c.ready_slot, c.ready_seq, c.kind,
       c.args, c.priority, c.attempt, c.max_attempts, c.created_at, c.ready_at, c.metadata,
       c.next_seq, c.next_xid::text AS next_xid, c.waiting
  FROM {schema}.claim($1, $2, $3, $4::text::xid8, $5) c
 CROSS JOIN (SELECT CASE WHEN $6::boolean THEN set_config('synchronous_commit', 'off', true) END) a
