-- Whether a schema takes part in routing: active, the target of a
-- transition, still draining, or still named by a registered runtime.
-- Such a schema must not be reset or dropped.
SELECT EXISTS (SELECT 1 FROM awa.storage_transition_state
                WHERE active_schema = $1 OR target_schema = $1)
    OR EXISTS (SELECT 1 FROM awa.storage_draining WHERE schema_name = $1)
    OR EXISTS (SELECT 1 FROM awa.runtime_storage_backends WHERE schema_name = $1)
