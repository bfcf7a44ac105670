-- transition::abort: see awa.storage_abort in fn_storage_transition.sql.
SELECT state, active_schema, target_schema, epoch FROM awa.storage_abort()
