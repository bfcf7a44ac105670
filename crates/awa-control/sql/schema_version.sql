-- Highest applied migration. Only run once schema_version_table.sql has
-- found the table: a fresh database has none.
SELECT max(version) FROM awa.schema_version
