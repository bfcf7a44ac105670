-- Everything a migration can change, one text line per fact, sorted: what
-- the upgrade test compares between a database brought up through every
-- numbered step and a fresh install of the current sources, and what
-- `cargo xtask migration draft` diffs to write the next step.
--
-- Covers schema awa and every substrate schema (any schema holding a
-- substrate_info table): the schemas and their grants; relations with
-- kind, persistence, partitioning, options and grants; columns in order
-- with type, nullability, default, identity and grants; constraints,
-- indexes, triggers, views, sequences, types, policies and comments; every
-- function's full definition and grants; the runtime function templates;
-- and each table's row count (seeded rows such as the routing state).
--
-- No OIDs, owners or timestamps: two databases made the same way by the
-- same role give the same lines. Dropped columns are skipped; column order
-- is compared because functions insert positionally (a new column goes at
-- the end of its CREATE TABLE, where ALTER TABLE ADD COLUMN puts it).
WITH ns AS (
    SELECT n.oid, n.nspname
      FROM pg_catalog.pg_namespace n
     WHERE n.nspname = 'awa'
        OR EXISTS (SELECT 1 FROM pg_catalog.pg_class c
                    WHERE c.relnamespace = n.oid AND c.relname = 'substrate_info' AND c.relkind = 'r')
),
rel AS (
    SELECT c.oid, ns.nspname, c.relname, c.relkind, c.relpersistence, c.relispartition,
           c.reloptions, c.relacl, c.relrowsecurity
      FROM pg_catalog.pg_class c JOIN ns ON ns.oid = c.relnamespace
),
facts AS (
    SELECT 'schema ' || ns.nspname || ' acl=' || coalesce(n.nspacl::text, '-')
      FROM ns JOIN pg_catalog.pg_namespace n ON n.oid = ns.oid
    UNION ALL
    SELECT format('relation %s.%s kind=%s persistence=%s partition=%s bound=%s key=%s options=%s rls=%s acl=%s',
                  r.nspname, r.relname, r.relkind, r.relpersistence, r.relispartition,
                  coalesce(pg_catalog.pg_get_expr(c.relpartbound, c.oid), '-'),
                  CASE WHEN r.relkind = 'p' THEN pg_catalog.pg_get_partkeydef(r.oid) ELSE '-' END,
                  coalesce(r.reloptions::text, '-'), r.relrowsecurity, coalesce(r.relacl::text, '-'))
      FROM rel r JOIN pg_catalog.pg_class c ON c.oid = r.oid
    UNION ALL
    SELECT format('column %s.%s #%s %s type=%s notnull=%s default=%s identity=%s generated=%s acl=%s',
                  r.nspname, r.relname,
                  row_number() OVER (PARTITION BY a.attrelid ORDER BY a.attnum),
                  a.attname, pg_catalog.format_type(a.atttypid, a.atttypmod), a.attnotnull,
                  coalesce(pg_catalog.pg_get_expr(d.adbin, d.adrelid), '-'),
                  nullif(a.attidentity, ''), nullif(a.attgenerated, ''), coalesce(a.attacl::text, '-'))
      FROM rel r
      JOIN pg_catalog.pg_attribute a ON a.attrelid = r.oid AND a.attnum > 0 AND NOT a.attisdropped
      LEFT JOIN pg_catalog.pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
     WHERE r.relkind IN ('r', 'p', 'v', 'm', 'f', 'c')
    UNION ALL
    SELECT format('constraint %s.%s %s %s deferrable=%s deferred=%s',
                  r.nspname, r.relname, co.conname, pg_catalog.pg_get_constraintdef(co.oid),
                  co.condeferrable, co.condeferred)
      FROM pg_catalog.pg_constraint co JOIN rel r ON r.oid = co.conrelid
    UNION ALL
    SELECT format('index %s', pg_catalog.pg_get_indexdef(i.indexrelid))
      FROM pg_catalog.pg_index i JOIN rel r ON r.oid = i.indrelid
    UNION ALL
    SELECT format('trigger %s enabled=%s', pg_catalog.pg_get_triggerdef(t.oid), t.tgenabled)
      FROM pg_catalog.pg_trigger t JOIN rel r ON r.oid = t.tgrelid
     WHERE NOT t.tgisinternal
    UNION ALL
    SELECT format('view %s.%s %s', r.nspname, r.relname, pg_catalog.pg_get_viewdef(r.oid))
      FROM rel r WHERE r.relkind IN ('v', 'm')
    UNION ALL
    SELECT format('sequence %s.%s type=%s start=%s inc=%s min=%s max=%s cache=%s cycle=%s',
                  r.nspname, r.relname, pg_catalog.format_type(s.seqtypid, NULL), s.seqstart,
                  s.seqincrement, s.seqmin, s.seqmax, s.seqcache, s.seqcycle)
      FROM pg_catalog.pg_sequence s JOIN rel r ON r.oid = s.seqrelid
    UNION ALL
    SELECT format('type %s.%s kind=%s', ns.nspname, t.typname, t.typtype)
      FROM pg_catalog.pg_type t JOIN ns ON ns.oid = t.typnamespace
     WHERE t.typtype IN ('e', 'd', 'r', 'm')
        OR (t.typtype = 'c' AND EXISTS (SELECT 1 FROM pg_catalog.pg_class c
                                         WHERE c.oid = t.typrelid AND c.relkind = 'c'))
    UNION ALL
    SELECT format('enum %s.%s %s', ns.nspname, t.typname,
                  (SELECT string_agg(e.enumlabel, ',' ORDER BY e.enumsortorder)
                     FROM pg_catalog.pg_enum e WHERE e.enumtypid = t.oid))
      FROM pg_catalog.pg_type t JOIN ns ON ns.oid = t.typnamespace
     WHERE t.typtype = 'e'
    UNION ALL
    SELECT format('policy %s.%s %s cmd=%s roles=%s using=%s check=%s',
                  r.nspname, r.relname, p.polname, p.polcmd, p.polroles::text,
                  coalesce(pg_catalog.pg_get_expr(p.polqual, p.polrelid), '-'),
                  coalesce(pg_catalog.pg_get_expr(p.polwithcheck, p.polrelid), '-'))
      FROM pg_catalog.pg_policy p JOIN rel r ON r.oid = p.polrelid
    UNION ALL
    SELECT format('comment %s.%s %s', r.nspname, r.relname, d.description)
      FROM pg_catalog.pg_description d JOIN rel r ON r.oid = d.objoid
     WHERE d.classoid = 'pg_catalog.pg_class'::regclass
    -- The whole definition text, so a step must carry the function exactly
    -- as the sources define it, comments included; shown as a digest to
    -- keep lines short.
    UNION ALL
    SELECT format('function %s.%s(%s) kind=%s definer=%s config=%s acl=%s def=%s',
                  ns.nspname, p.proname, pg_catalog.pg_get_function_identity_arguments(p.oid),
                  p.prokind, p.prosecdef, coalesce(p.proconfig::text, '-'),
                  coalesce(p.proacl::text, '-'),
                  CASE WHEN p.prokind IN ('f', 'p', 'w')
                       THEN md5(pg_catalog.pg_get_functiondef(p.oid)) ELSE '-' END)
      FROM pg_catalog.pg_proc p JOIN ns ON ns.oid = p.pronamespace
    -- Data that installs seed or that the installer executes.
    UNION ALL
    SELECT format('template %s ord=%s body=%s', f.name, f.ord, md5(f.body))
      FROM awa.substrate_functions f
    UNION ALL
    SELECT format('rows %s.%s %s', r.nspname, r.relname,
                  (xpath('/row/n/text()',
                         query_to_xml(format('SELECT count(*) AS n FROM %I.%I', r.nspname, r.relname),
                                      false, true, '')))[1]::text)
      FROM rel r
     WHERE r.relkind = 'r' AND NOT (r.nspname = 'awa' AND r.relname = 'schema_version')
)
SELECT f AS fact FROM facts AS t(f) ORDER BY 1
