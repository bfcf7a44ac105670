//! The plain insert of scenario `cost`: one row with the job's payload in a
//! table with nothing but a primary key, committed one per transaction at
//! the same rate as our one-job enqueues. Nothing runs the rows: it is the
//! floor one job's PostgreSQL CPU is compared with. SQL in
//! `xtask/sql/plain/`.

use crate::BoxError;
use sqlx::{Connection, PgConnection};

pub const SCHEMA: &str = "bench_plain";

const DDL: &[&str] = &[
    include_str!("../../sql/plain/create_schema.sql"),
    include_str!("../../sql/plain/create_table.sql"),
];
const INSERT: &str = include_str!("../../sql/plain/insert.sql");

/// Template key for the plain table's databases: changes with its DDL.
pub fn template_key() -> String {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in DDL.concat().bytes() {
        hash = (hash ^ u64::from(byte)).wrapping_mul(0x0100_0000_01b3);
    }
    format!("awa-bench-plain-{hash:016x}")
}

/// Creates the schema and the table (idempotent).
pub async fn install(url: &str) -> Result<(), BoxError> {
    let mut conn = PgConnection::connect(url).await?;
    for ddl in DDL {
        sqlx::query(*ddl).execute(&mut conn).await?;
    }
    let _ = conn.close().await;
    Ok(())
}

/// One row per payload, one statement each.
pub async fn insert(conn: &mut PgConnection, args: &[serde_json::Value]) -> Result<(), BoxError> {
    for a in args {
        sqlx::query(INSERT).bind(a).execute(&mut *conn).await?;
    }
    Ok(())
}
