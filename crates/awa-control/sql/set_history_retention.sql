-- Rings::set_history_retention: $1 interval, NULL for automatic
-- ((queue slots - 2) x the leader's rotate interval). The column's CHECK
-- bounds it; ring_prune reads it on every queue-ring retirement.
UPDATE {schema}.substrate_info SET history_retention = $1
