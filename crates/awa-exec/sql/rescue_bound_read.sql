-- ExecPlane::rescue_bound: the rescue bound maintenance published for this
-- substrate, in seconds; no row when none has been published yet. Workers
-- read it at start and every second to set their heartbeat cadence.
SELECT extract(epoch FROM rescue_after)::float8 AS rescue_after_secs
  FROM {schema}.exec_settings
