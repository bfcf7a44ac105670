-- Applied migrations with their descriptions and checksums; empty before
-- the first one. A fresh install is one row, description 'fresh install'.
SELECT version, description, checksum FROM awa.schema_version ORDER BY version
