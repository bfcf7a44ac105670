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

/// A registered process as operators see it.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct RuntimeEntry {
    pub instance_id: uuid::Uuid,
    pub host: String,
    pub pid: i32,
    pub role: String,
    pub queues: Vec<String>,
    pub started_at: awa_core::DbTime,
    pub last_seen_at: awa_core::DbTime,
    /// Seconds since its last heartbeat, on the database's clock.
    pub seen_secs_ago: f64,
}

/// Every registered process, most recently seen first.
pub async fn list(conn: &mut PgConnection) -> Result<Vec<RuntimeEntry>, ControlError> {
    use sqlx::Row;
    let rows = sqlx::query(include_str!("../sql/runtime_list.sql"))
        .fetch_all(conn)
        .await?;
    Ok(rows
        .into_iter()
        .map(|r| RuntimeEntry {
            instance_id: r.get("instance_id"),
            host: r.get("host"),
            pid: r.get("pid"),
            role: r.get("role"),
            queues: r.get("queues"),
            started_at: r.get("started_at"),
            last_seen_at: r.get("last_seen_at"),
            seen_secs_ago: r.get("seen_secs_ago"),
        })
        .collect())
}

/// How often a registered process refreshes its entry. Entries not seen
/// for a while are removed by maintenance (`runtime_gc`).
pub const TOUCH_INTERVAL: Duration = Duration::from_secs(10);

/// A process's entry in the registry, kept fresh by a background task
/// until [`Registration::stop`] removes it. Dropping it without `stop`
/// stops the refreshes; maintenance removes the entry later.
#[derive(Debug)]
pub struct Registration {
    instance_id: uuid::Uuid,
    touch: tokio::task::JoinHandle<()>,
}

impl Registration {
    /// Register `info` now and refresh it every [`TOUCH_INTERVAL`].
    pub async fn start(pool: &sqlx::PgPool, info: &RuntimeInfo) -> Result<Self, ControlError> {
        let mut conn = pool.acquire().await?;
        register(&mut conn, info).await?;
        drop(conn);
        let pool = pool.clone();
        let instance_id = info.instance_id;
        let touch = tokio::spawn(async move {
            loop {
                tokio::time::sleep(TOUCH_INTERVAL).await;
                let touched = async {
                    let mut conn = pool.acquire().await?;
                    touch(&mut conn, instance_id).await
                }
                .await;
                if let Err(err) = touched {
                    tracing::warn!(error = %err, "could not refresh the runtime registry");
                }
            }
        });
        Ok(Self { instance_id, touch })
    }

    /// Stop refreshing and remove the entry (best effort: a failure is
    /// logged, and maintenance removes the entry once it is stale).
    pub async fn stop(self, pool: &sqlx::PgPool) {
        self.touch.abort();
        let removed = async {
            let mut conn = pool.acquire().await?;
            deregister(&mut conn, self.instance_id).await
        }
        .await;
        if let Err(err) = removed {
            tracing::warn!(error = %err, "could not remove this process from the runtime registry");
        }
    }
}

impl Drop for Registration {
    fn drop(&mut self) {
        self.touch.abort();
    }
}
