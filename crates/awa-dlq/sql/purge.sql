-- DlqPlane::purge: one id, or all (optionally of one queue). Returns ids.
DELETE FROM {schema}.dlq_entries d
 WHERE ($3 OR d.job_id = $1) AND ($2::text IS NULL OR d.queue = $2)
RETURNING d.job_id
