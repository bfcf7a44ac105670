-- routing::read: the routing as the transition state has it (see
-- awa_core::Routing for each phase's rule), with the substrates still
-- draining, oldest first.
SELECT t.epoch, t.state, t.active_schema, t.target_schema,
       coalesce((SELECT array_agg(d.schema_name ORDER BY d.since, d.schema_name)
                   FROM awa.storage_draining d), '{}') AS draining
  FROM awa.storage_transition_state t
