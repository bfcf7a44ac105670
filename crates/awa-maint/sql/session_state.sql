-- What a session's server is, asked right after connecting: libpq's two
-- questions for target_session_attrs. `in_recovery`: the server is a
-- standby. `read_only`: new transactions are read-only by default (a
-- standby, or default_transaction_read_only = on). No parameters, no
-- table, no lock.
SELECT pg_is_in_recovery() AS in_recovery,
       current_setting('transaction_read_only')::boolean AS read_only
