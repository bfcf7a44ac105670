SELECT state, active_schema, target_schema, updated_at
  FROM awa.storage_transition_state
