-- routing::transfer: move deferred and dead-lettered jobs of substrate $1
-- (one that only drains) into {schema}, the write substrate; at most $2 of
-- each. See fn_storage_transfer.sql.
SELECT {schema}.storage_transfer_in($1, $2) AS moved
