-- limits::apply, after limits_configure.sql in the same transaction: a
-- queue's limit row with neither limit left is deleted, so its claims go
-- back to the unlimited path. $1 queue, $2 kind.
DELETE FROM awa.queue_limits
 WHERE queue = $1 AND kind = $2 AND rate_max IS NULL AND concurrency_max IS NULL
