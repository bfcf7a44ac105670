-- ExecPlane::rescue_stale. Staleness travels as seconds.
SELECT {schema}.rescue_stale(make_interval(secs => $1), $2)
