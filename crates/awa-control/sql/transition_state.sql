-- storage_status: the transition state, with the substrates still draining.
SELECT t.state, t.active_schema, t.target_schema, t.epoch, t.mixed_since, t.updated_at,
       coalesce((SELECT array_agg(d.schema_name ORDER BY d.since, d.schema_name)
                   FROM awa.storage_draining d), '{}') AS draining
  FROM awa.storage_transition_state t
