-- Leader election: a session advisory lock on a connection dedicated to it.
-- Class 0x617761 ("awa"), key 2 = "maintenance leader".
SELECT pg_try_advisory_lock(6387553, 2)
