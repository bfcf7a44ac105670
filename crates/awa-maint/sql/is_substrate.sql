-- Whether schema $1 holds a substrate (has its own substrate_info).
SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_class c
                 JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
                WHERE n.nspname = $1 AND c.relname = 'substrate_info')
