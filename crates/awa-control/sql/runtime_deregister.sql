-- Runtimes::deregister: clean exit.
DELETE FROM awa.runtimes WHERE instance_id = $1
