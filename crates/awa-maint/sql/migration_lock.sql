-- Session lock serializing migrators across processes. Same class id as
-- the substrate lock (0x617761, "awa"); key 1 is "migrations".
SELECT pg_advisory_lock(6387553, 1)
