-- transition::prepare: see awa.storage_prepare in fn_storage_transition.sql.
SELECT state, active_schema, target_schema, epoch FROM awa.storage_prepare($1)
