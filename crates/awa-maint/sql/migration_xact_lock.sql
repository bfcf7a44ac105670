-- The migration lock (migration_lock.sql's key), for one transaction: a
-- drop of a substrate never interleaves with a migration or a transition
-- step.
SELECT pg_advisory_xact_lock(6387553, 1)
