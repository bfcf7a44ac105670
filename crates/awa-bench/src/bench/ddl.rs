//! The bench's own comparison tables (the baseline queue, the plain
//! insert): a template database per DDL, keyed by a hash of its text, and
//! its idempotent install.

use crate::BoxError;
use sqlx::{Connection, PgConnection};

/// Template key for databases made with `ddl`: `awa-bench-{name}-` and an
/// FNV-1a hash of the statements, so it changes with them.
pub fn template_key(name: &str, ddl: &[&str]) -> String {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in ddl.concat().bytes() {
        hash = (hash ^ u64::from(byte)).wrapping_mul(0x0100_0000_01b3);
    }
    format!("awa-bench-{name}-{hash:016x}")
}

/// Runs `ddl` on a connection of its own (each statement idempotent).
pub async fn install(url: &str, ddl: &[&'static str]) -> Result<(), BoxError> {
    let mut conn = PgConnection::connect(url).await?;
    for statement in ddl {
        sqlx::query(*statement).execute(&mut conn).await?;
    }
    let _ = conn.close().await;
    Ok(())
}
