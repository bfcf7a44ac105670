-- DlqPlane::retry.
SELECT * FROM {schema}.dlq_retry($1, $2, $3)
