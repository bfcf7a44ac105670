-- routing::register_backends: runtime $1 uses substrates $2 (text[]) in
-- modes $3 (text[]: read_write for the write substrate, drain for the
-- others); rows for substrates it no longer uses are removed. Finalize
-- refuses while a live runtime has not registered the target.
WITH gone AS (
    DELETE FROM awa.runtime_storage_backends b
     WHERE b.instance_id = $1 AND NOT (b.schema_name = ANY ($2::text[]))
)
INSERT INTO awa.runtime_storage_backends AS b (instance_id, schema_name, mode)
SELECT $1, u.schema_name, u.mode
  FROM unnest($2::text[], $3::text[]) AS u(schema_name, mode)
    -- The runtime may have been garbage-collected meanwhile: then there is
    -- nothing to attach the rows to until it registers again.
 WHERE EXISTS (SELECT 1 FROM awa.runtimes r WHERE r.instance_id = $1)
ON CONFLICT (instance_id, schema_name) DO UPDATE
   SET mode = EXCLUDED.mode, updated_at = now()
