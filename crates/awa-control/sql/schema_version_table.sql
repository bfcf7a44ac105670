-- Whether migrations have ever run here.
SELECT to_regclass('awa.schema_version') IS NOT NULL
