//! The derivable part of the next numbered step (`cargo xtask migration
//! draft`), from two databases: one brought up through the existing steps
//! and one fresh install of the current sources, each with the same custom
//! substrate prepared.
//!
//! What it derives: every function of schema `awa` that is not a runtime
//! template (control functions, plane installers, the substrate helper,
//! the grant) whose definition changed, appeared or went away; the
//! templates in `awa.substrate_functions`; and the refresh that re-runs the
//! installer on every substrate and re-grants the runtime roles
//! (`sql/migration_refresh.sql`). What it cannot derive, altering tables
//! that already hold data, comes from the hand-written files given to it
//! and goes first. The caller then applies the draft and compares
//! snapshots: whatever still differs is for the developer to write.

use crate::MaintError;
use sqlx::PgConnection;
use std::collections::{BTreeMap, BTreeSet};

type FunctionKey = (String, String, String);

async fn functions(conn: &mut PgConnection) -> Result<BTreeMap<FunctionKey, String>, MaintError> {
    let rows: Vec<(String, String, String, String)> =
        sqlx::query_as(include_str!("../../sql/migration_functions.sql"))
            .fetch_all(conn)
            .await?;
    Ok(rows
        .into_iter()
        .map(|(schema, name, args, def)| ((schema, name, args), def))
        .collect())
}

async fn templates(conn: &mut PgConnection) -> Result<BTreeMap<String, (i32, String)>, MaintError> {
    let rows: Vec<(String, i32, String)> =
        sqlx::query_as(include_str!("../../sql/migration_templates.sql"))
            .fetch_all(conn)
            .await?;
    Ok(rows
        .into_iter()
        .map(|(name, ord, body)| (name, (ord, body)))
        .collect())
}

/// Prepare what the comparison covers besides the migration itself: the
/// custom substrate `upgraded` (32/16/8) and the runtime role
/// `awa_upgrade_probe` granted on it and on `awa`.
pub async fn probe(conn: &mut PgConnection) -> Result<(), MaintError> {
    sqlx::raw_sql(include_str!("../../sql/migration_probe.sql"))
        .execute(conn)
        .await?;
    Ok(())
}

/// The statements refreshing every substrate, appended to every step.
pub const REFRESH_SQL: &str = include_str!("../../sql/migration_refresh.sql");

/// The body of the next step: `hand_written` (file name, text) first, then
/// the derived statements, then the refresh.
pub async fn draft(
    upgraded: &mut PgConnection,
    fresh: &mut PgConnection,
    hand_written: &[(String, String)],
) -> Result<String, MaintError> {
    let (old, new) = (functions(upgraded).await?, functions(fresh).await?);
    // A function that exists in a substrate schema other than awa comes
    // from a template: the refresh re-creates it everywhere.
    let templated: BTreeSet<&str> = old
        .keys()
        .chain(new.keys())
        .filter(|(schema, _, _)| schema != "awa")
        .map(|(_, name, _)| name.as_str())
        .collect();
    let mut out = String::new();
    for (name, text) in hand_written {
        out.push_str(&format!("-- Hand-written: {name}\n{}\n\n", text.trim_end()));
    }

    let mut control = String::new();
    for ((schema, name, args), def) in &new {
        if schema == "awa" && !templated.contains(name.as_str()) {
            let key = (schema.clone(), name.clone(), args.clone());
            if old.get(&key) != Some(def) {
                control.push_str(def.trim_end());
                control.push_str(";\n\n");
            }
        }
    }
    for (schema, name, args) in old.keys() {
        let key = (schema.clone(), name.clone(), args.clone());
        if schema == "awa" && !templated.contains(name.as_str()) && !new.contains_key(&key) {
            control.push_str(&format!("DROP FUNCTION awa.{name}({args});\n\n"));
        }
    }
    if !control.is_empty() {
        out.push_str("-- Control functions, installers and helpers, as the sources define them.\n");
        out.push_str(&control);
    }

    // Template functions that no template defines any more are dropped in
    // every substrate (the refresh only creates).
    let gone: BTreeSet<(&str, &str)> = old
        .keys()
        .filter(|(schema, name, args)| {
            schema != "awa" && !new.keys().any(|(_, n, a)| n == name && a == args)
        })
        .map(|(_, name, args)| (name.as_str(), args.as_str()))
        .collect();
    for (name, args) in gone {
        out.push_str(&format!(
            "DO $drop$\nDECLARE s record;\nBEGIN\n    FOR s IN SELECT n.nspname FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace\n              WHERE c.relname = 'substrate_info' AND c.relkind = 'r' LOOP\n        EXECUTE format('DROP FUNCTION IF EXISTS %I.{name}({args})', s.nspname);\n    END LOOP;\nEND\n$drop$;\n\n"
        ));
    }

    let (old_t, new_t) = (templates(upgraded).await?, templates(fresh).await?);
    let mut tpl = String::new();
    const QUOTE: &str = "$awa_template$";
    for (name, (ord, body)) in &new_t {
        if old_t.get(name) != Some(&(*ord, body.clone())) {
            tpl.push_str(&format!(
                "INSERT INTO awa.substrate_functions (name, ord, body) VALUES ('{name}', {ord}, {QUOTE}{body}{QUOTE})\n\
                 ON CONFLICT (name) DO UPDATE SET ord = EXCLUDED.ord, body = EXCLUDED.body;\n"
            ));
        }
    }
    for name in old_t.keys().filter(|n| !new_t.contains_key(*n)) {
        tpl.push_str(&format!(
            "DELETE FROM awa.substrate_functions WHERE name = '{name}';\n"
        ));
    }
    if !tpl.is_empty() {
        out.push_str("-- Runtime function templates, as the sources define them.\n");
        out.push_str(&tpl);
        out.push('\n');
    }
    out.push_str(REFRESH_SQL);
    Ok(out)
}
