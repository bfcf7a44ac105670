//! The plain insert of scenario `cost`: one row with the job's payload in a
//! table with nothing but a primary key, committed one per transaction at
//! the same rate as our one-job enqueues. Nothing runs the rows: it is the
//! floor one job's PostgreSQL CPU is compared with. SQL in
//! `crates/awa-bench/sql/plain/`.

use crate::BoxError;
use sqlx::PgConnection;

pub const SCHEMA: &str = "bench_plain";

const DDL: &[&str] = &[
    include_str!("../../sql/plain/create_schema.sql"),
    include_str!("../../sql/plain/create_table.sql"),
];
const INSERT: &str = include_str!("../../sql/plain/insert.sql");

/// Template key for the plain table's databases: changes with its DDL.
pub fn template_key() -> String {
    super::ddl::template_key("plain", DDL)
}

/// Creates the schema and the table (idempotent).
pub async fn install(url: &str) -> Result<(), BoxError> {
    super::ddl::install(url, DDL).await
}

/// One row per payload, one statement each.
pub async fn insert(conn: &mut PgConnection, args: &[serde_json::Value]) -> Result<(), BoxError> {
    for a in args {
        sqlx::query(INSERT).bind(a).execute(&mut *conn).await?;
    }
    Ok(())
}
