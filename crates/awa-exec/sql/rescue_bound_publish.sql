-- ExecPlane::publish_rescue_bound: the leader's rescue task records the
-- bound it rescues with, so workers heartbeat within it. Writes only when
-- the value changes; a row comes back only then, with the previous value
-- (NULL on the first publish), so the caller knows when workers may still
-- be heartbeating for the old bound. The table's CHECK refuses values
-- outside awa_core::bounds::RESCUE_AFTER.
WITH previous AS (
    SELECT rescue_after FROM {schema}.exec_settings
)
INSERT INTO {schema}.exec_settings AS s (singleton, rescue_after, changed_at)
VALUES (true, make_interval(secs => $1), now())
ON CONFLICT (singleton) DO UPDATE
   SET rescue_after = EXCLUDED.rescue_after, changed_at = now()
 WHERE s.rescue_after IS DISTINCT FROM EXCLUDED.rescue_after
RETURNING (SELECT extract(epoch FROM p.rescue_after)::float8 FROM previous p) AS previous_secs
