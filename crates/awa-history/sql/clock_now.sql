-- The database's clock: a bulk retry leaves alone what fails after it began.
SELECT now()
