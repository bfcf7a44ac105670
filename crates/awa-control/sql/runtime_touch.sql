-- Runtimes::touch: the process is alive. One small HOT update per process
-- per interval, never per job.
UPDATE awa.runtimes SET last_seen_at = now() WHERE instance_id = $1
