-- transition::enter_mixed: see awa.storage_enter_mixed in fn_storage_transition.sql.
SELECT state, active_schema, target_schema, epoch FROM awa.storage_enter_mixed()
