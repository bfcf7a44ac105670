-- Every installed substrate in this database. A substrate is recognised by
-- its own substrate_info table, so nothing outside the schema has to be
-- written when one is prepared.
SELECT n.nspname::text AS schema_name
  FROM pg_catalog.pg_class c
  JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
 WHERE c.relname = 'substrate_info' AND c.relkind = 'r'
 ORDER BY n.nspname <> 'awa', n.nspname
