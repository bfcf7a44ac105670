-- HistoryPlane::publish_health, second half: queues with no live work
-- left drop to zero rather than keep their last figures.
UPDATE awa.queue_health
   SET available = 0, running = 0, deferred = 0, oldest_available_secs = NULL, measured_at = now()
 WHERE schema_name = $1 AND measured_at < now() AND (available, running, deferred) <> (0, 0, 0)
