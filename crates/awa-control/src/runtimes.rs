//! The registry of live processes (`awa.runtimes`).

use crate::ControlError;
use sqlx::PgConnection;
use std::time::Duration;

/// What a process says about itself.
#[derive(Debug, Clone)]
pub struct RuntimeInfo {
    pub instance_id: uuid::Uuid,
    pub role: &'static str,
    pub queues: Vec<String>,
}

pub async fn register(conn: &mut PgConnection, info: &RuntimeInfo) -> Result<(), ControlError> {
    let host = hostname::get()
        .map(|h| h.to_string_lossy().into_owned())
        .unwrap_or_else(|_| "unknown".into());
    sqlx::query(include_str!("../sql/runtime_register.sql"))
        .bind(info.instance_id)
        .bind(host)
        .bind(std::process::id() as i32)
        .bind(info.role)
        .bind(&info.queues)
        .execute(conn)
        .await?;
    Ok(())
}

pub async fn touch(conn: &mut PgConnection, instance_id: uuid::Uuid) -> Result<(), ControlError> {
    sqlx::query(include_str!("../sql/runtime_touch.sql"))
        .bind(instance_id)
        .execute(conn)
        .await?;
    Ok(())
}

pub async fn deregister(
    conn: &mut PgConnection,
    instance_id: uuid::Uuid,
) -> Result<(), ControlError> {
    sqlx::query(include_str!("../sql/runtime_deregister.sql"))
        .bind(instance_id)
        .execute(conn)
        .await?;
    Ok(())
}

/// Remove entries not seen for `older_than`; how many.
pub async fn gc(conn: &mut PgConnection, older_than: Duration) -> Result<u64, ControlError> {
    let done = sqlx::query(include_str!("../sql/runtime_gc.sql"))
        .bind(older_than.as_secs_f64())
        .execute(conn)
        .await?;
    Ok(done.rows_affected())
}
