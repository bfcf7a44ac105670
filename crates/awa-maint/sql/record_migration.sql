-- $1 version, $2 description, $3 checksum (sha256 of the migration text)
INSERT INTO awa.schema_version (version, description, checksum) VALUES ($1, $2, $3)
