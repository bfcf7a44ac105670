-- Runtimes::gc: forget processes not seen for $1 seconds (they died
-- without deregistering). Their attempts are rescued separately.
DELETE FROM awa.runtimes WHERE last_seen_at < now() - make_interval(secs => $1)
