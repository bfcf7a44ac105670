-- Every function of schema awa and of the substrate schemas, for
-- `cargo xtask migration draft`: schema, name, identity arguments (what
-- DROP FUNCTION needs) and the full definition as pg_get_functiondef
-- prints it (a CREATE OR REPLACE statement that reproduces the function
-- exactly, comments in its body included).
SELECT n.nspname::text AS schema_name,
       p.proname::text AS name,
       pg_catalog.pg_get_function_identity_arguments(p.oid) AS args,
       pg_catalog.pg_get_functiondef(p.oid) AS def
  FROM pg_catalog.pg_proc p
  JOIN pg_catalog.pg_namespace n ON n.oid = p.pronamespace
 WHERE p.prokind IN ('f', 'p')
   AND (n.nspname = 'awa'
        OR EXISTS (SELECT 1 FROM pg_catalog.pg_class c
                    WHERE c.relnamespace = n.oid AND c.relname = 'substrate_info' AND c.relkind = 'r'))
 ORDER BY 1, 2, 3
