//! Writing the extreme values PostgreSQL accepts into every column of a
//! type, as a superuser could, so a test can show that readers cope with
//! whatever a table holds (issue 36). Knows nothing about Awa's schema:
//! the columns come from the catalog.

use sqlx::{Connection, PgConnection};

/// The extreme values of `timestamptz`: infinite, the latest and earliest
/// PostgreSQL accepts, and years past what chrono can hold.
pub const TIMESTAMPTZ: &[&str] = &[
    "infinity",
    "-infinity",
    "294276-12-31 23:59:59.999999+00",
    "4714-11-24 00:00:00+00 BC",
    "263000-06-01 00:00:00+00",
    "1969-12-31 23:59:59+00",
];

/// The extreme values of `interval` (PostgreSQL 15 has no infinite one).
pub const INTERVAL: &[&str] = &[
    "178000000 years",
    "-178000000 years",
    "2147483647 days 2562047788:00:54.775807",
];

/// Set every column of type `pg_type` (as `format_type` names it, e.g.
/// `timestamp with time zone`) of every ordinary or partitioned table of
/// `schemas` to `value` (a literal, cast to the type), in every row,
/// triggers off (`session_replication_role = replica`: the connection must
/// be a superuser's). With `unindexed_only`, columns that are part of an
/// index (keys, partition keys, what joins use) are left alone. Each column is written in a savepoint of its own; a
/// column whose constraints refuse the value is left as it was. Returns the
/// columns written (`schema.table.column`) and those refused, with why.
pub async fn write_every_column(
    conn: &mut PgConnection,
    schemas: &[&str],
    pg_type: &str,
    value: &str,
    unindexed_only: bool,
) -> Result<(Vec<String>, Vec<String>), sqlx::Error> {
    let columns: Vec<(String, String, String)> = sqlx::query_as(
        "SELECT n.nspname::text, c.relname::text, a.attname::text
           FROM pg_attribute a
           JOIN pg_class c ON c.oid = a.attrelid
           JOIN pg_namespace n ON n.oid = c.relnamespace
          WHERE n.nspname = ANY($1) AND c.relkind IN ('r', 'p') AND NOT c.relispartition
            AND a.attnum > 0 AND NOT a.attisdropped AND a.attgenerated = ''
            AND format_type(a.atttypid, NULL) = $2
            AND NOT ($3 AND EXISTS (SELECT 1 FROM pg_index i
                                     WHERE i.indrelid = c.oid AND a.attnum = ANY(i.indkey)))
          ORDER BY 1, 2, 3",
    )
    .bind(schemas)
    .bind(pg_type)
    .bind(unindexed_only)
    .fetch_all(&mut *conn)
    .await?;
    let (mut written, mut refused) = (Vec::new(), Vec::new());
    let mut tx = conn.begin().await?;
    sqlx::raw_sql("SET LOCAL session_replication_role = replica")
        .execute(&mut *tx)
        .await?;
    for (schema, table, column) in columns {
        let name = format!("{schema}.{table}.{column}");
        let sql = format!(
            "UPDATE {}.{} SET {} = $1::text::{pg_type}",
            crate::quote_ident(&schema),
            crate::quote_ident(&table),
            crate::quote_ident(&column),
        );
        let mut sp = tx.begin().await?;
        match sqlx::query(sqlx::AssertSqlSafe(sql))
            .bind(value)
            .execute(&mut *sp)
            .await
        {
            Ok(_) => {
                sp.commit().await?;
                written.push(name);
            }
            Err(err) => {
                sp.rollback().await?;
                refused.push(format!("{name}: {err}"));
            }
        }
    }
    tx.commit().await?;
    Ok((written, refused))
}
