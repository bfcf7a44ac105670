-- Reset of a custom substrate. {schema} is validated and quoted; the caller
-- has checked that it is a substrate, not awa, and not in use.
DROP SCHEMA {schema} CASCADE
