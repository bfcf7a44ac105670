-- $1 schema, $2 queue slots, $3 lease slots, $4 claim slots.
-- Validation, locking and idempotence are the helper's.
SELECT awa.install_queue_storage_substrate($1, $2, $3, $4)
