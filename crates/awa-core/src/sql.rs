//! Rendering statement templates for one substrate.
//!
//! Plane statements are written against `{schema}`; the schema is a
//! validated `SchemaName`, inserted quoted. Nothing else is ever spliced
//! into SQL text: values travel as bind parameters.

use crate::SchemaName;

/// Substitute the quoted schema for every `{schema}` in `template`.
pub fn render(template: &str, schema: &SchemaName) -> String {
    template.replace("{schema}", &schema.quoted())
}

/// A statement rendered for a validated schema, ready for sqlx.
///
/// sqlx 0.9 wants proof that dynamic SQL is safe; this is the one place
/// that gives it, because the only dynamic part is a validated, quoted
/// identifier.
pub fn statement(template: &str, schema: &SchemaName) -> sqlx::AssertSqlSafe<String> {
    sqlx::AssertSqlSafe(render(template, schema))
}
