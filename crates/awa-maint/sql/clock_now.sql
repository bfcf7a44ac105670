-- The database's clock, which every leader fires cron ticks by.
SELECT clock_timestamp()
