-- transition::finalize: see awa.storage_finalize in fn_storage_transition.sql.
SELECT state, active_schema, target_schema, epoch FROM awa.storage_finalize()
