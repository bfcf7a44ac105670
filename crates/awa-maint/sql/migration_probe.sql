-- What an operator does to a database besides migrating, so that the
-- upgrade comparison covers it: a custom substrate (32/16/8, schema
-- "upgraded") and the runtime role awa_upgrade_probe granted on both
-- substrates. Run on both the upgraded and the fresh database; the role is
-- cluster-wide, created once (a racing creator is fine).
DO $probe$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_roles WHERE rolname = 'awa_upgrade_probe') THEN
        CREATE ROLE awa_upgrade_probe NOLOGIN;
    END IF;
EXCEPTION WHEN duplicate_object OR unique_violation THEN
    NULL;
END
$probe$;
SELECT awa.install_queue_storage_substrate('upgraded', 32, 16, 8);
SELECT awa.grant_runtime_role('awa_upgrade_probe', 'awa');
SELECT awa.grant_runtime_role('awa_upgrade_probe', 'upgraded');
