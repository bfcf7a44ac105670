SELECT pg_advisory_unlock(6387553, 1)
