-- Applied migrations with their checksums; empty before the first one.
SELECT version, checksum FROM awa.schema_version ORDER BY version
