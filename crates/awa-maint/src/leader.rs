//! The maintenance leader: one per database, elected by a session advisory
//! lock held on a connection dedicated to it (never a pooled one, which
//! could go back to the pool still holding the lock).
//!
//! While leading, every task runs on its own tokio task. The lock
//! connection is checked every second; if it is lost, all tasks are
//! stopped before anything else is written, and the process goes back to
//! being a candidate. Another candidate takes the lock within about one
//! candidate retry interval once the old leader's session ends, then waits
//! two check intervals before starting its tasks, by which time the old
//! leader has stopped its own (so no task runs on two leaders at once).

use crate::MaintError;
use crate::tasks::{self, MaintTask};
use sqlx::{Connection, PgConnection};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;

#[derive(Clone)]
pub struct LeaderConfig {
    pub database_url: String,
    pub instance_id: uuid::Uuid,
    /// How often a candidate tries for the lock.
    pub retry_interval: Duration,
    /// How often the leader confirms it still holds the lock.
    pub check_interval: Duration,
    /// Most one task pass may take.
    pub pass_timeout: Duration,
}

/// Debug output never shows the password in `database_url`.
impl std::fmt::Debug for LeaderConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LeaderConfig")
            .field(
                "database_url",
                &awa_core::redact::redact_conninfo(&self.database_url),
            )
            .field("instance_id", &self.instance_id)
            .field("retry_interval", &self.retry_interval)
            .field("check_interval", &self.check_interval)
            .field("pass_timeout", &self.pass_timeout)
            .finish()
    }
}

impl LeaderConfig {
    pub fn new(database_url: impl Into<String>) -> Self {
        Self {
            database_url: database_url.into(),
            instance_id: uuid::Uuid::new_v4(),
            retry_interval: Duration::from_secs(1),
            check_interval: Duration::from_secs(1),
            pass_timeout: Duration::from_secs(30),
        }
    }
}

/// Status changes a caller can watch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    Candidate,
    Leader,
}

/// Run as a leader candidate until `shutdown` flips to true.
pub async fn run(
    config: LeaderConfig,
    pool: sqlx::PgPool,
    tasks: Vec<Arc<dyn MaintTask>>,
    mut shutdown: watch::Receiver<bool>,
    role: Option<watch::Sender<Role>>,
) -> Result<(), MaintError> {
    let host = hostname::get()
        .map(|h| h.to_string_lossy().into_owned())
        .unwrap_or_else(|_| "unknown".into());
    loop {
        if *shutdown.borrow() {
            return Ok(());
        }
        match lead_once(&config, &pool, &tasks, &mut shutdown, &host, role.as_ref()).await {
            Ok(()) => {}
            Err(err) => tracing::warn!(error = %err, "maintenance candidate error; retrying"),
        }
        if let Some(r) = &role {
            let _ = r.send(Role::Candidate);
        }
        tokio::select! {
            _ = tokio::time::sleep(config.retry_interval) => {}
            _ = shutdown.changed() => {}
        }
    }
}

/// Try for the lock once; if won, lead until the lock or shutdown is lost.
async fn lead_once(
    config: &LeaderConfig,
    pool: &sqlx::PgPool,
    tasks: &[Arc<dyn MaintTask>],
    shutdown: &mut watch::Receiver<bool>,
    host: &str,
    role: Option<&watch::Sender<Role>>,
) -> Result<(), MaintError> {
    let options = awa_core::conninfo::connect_options(&config.database_url)?;
    // Bounded, so an unreachable server shows up as a logged retry rather
    // than a candidate stuck forever in connect.
    let mut conn = tokio::time::timeout(
        Duration::from_secs(10),
        PgConnection::connect_with(&options),
    )
    .await
    .map_err(|_| MaintError::LeadershipLost("connecting for the leader lock timed out".into()))??;
    let won: bool = sqlx::query_scalar(include_str!("../sql/leader_try_lock.sql"))
        .fetch_one(&mut conn)
        .await?;
    if !won {
        let _ = conn.close().await;
        return Ok(());
    }
    sqlx::query(include_str!("../sql/leader_record.sql"))
        .bind(config.instance_id)
        .bind(host)
        .bind(std::process::id() as i32)
        .execute(&mut conn)
        .await?;
    tracing::info!(instance = %config.instance_id, "became maintenance leader");
    // Fencing by time: a previous leader whose connection died notices at
    // its next check (within one check interval, or two if the check
    // itself hangs until its timeout) and stops its tasks. Waiting that
    // long before starting ours means tasks never run on two leaders at
    // once.
    tokio::select! {
        _ = tokio::time::sleep(config.check_interval * 2) => {}
        _ = shutdown.changed() => {
            let _ = conn.close().await;
            return Ok(());
        }
    }
    if let Some(r) = role {
        let _ = r.send(Role::Leader);
    }

    let (stop_tx, stop_rx) = watch::channel(false);
    let handles: Vec<_> = tasks
        .iter()
        .map(|t| {
            tokio::spawn(tasks::run_loop(
                t.clone(),
                pool.clone(),
                stop_rx.clone(),
                config.pass_timeout,
            ))
        })
        .collect();

    let result = loop {
        tokio::select! {
            _ = tokio::time::sleep(config.check_interval) => {}
            _ = shutdown.changed() => break Ok(()),
        }
        if *shutdown.borrow() {
            break Ok(());
        }
        let alive = tokio::time::timeout(
            config.check_interval,
            sqlx::query_scalar::<_, bool>(include_str!("../sql/leader_alive.sql"))
                .fetch_one(&mut conn),
        )
        .await;
        match alive {
            Ok(Ok(true)) => {}
            Ok(Ok(false)) => {
                break Err(MaintError::LeadershipLost(
                    "the advisory lock is gone".into(),
                ));
            }
            Ok(Err(err)) => break Err(MaintError::LeadershipLost(err.to_string())),
            Err(_) => {
                break Err(MaintError::LeadershipLost(
                    "lock connection did not answer".into(),
                ));
            }
        }
    };
    // Stop every task first: abort, so no pass in progress writes after we
    // stopped leading.
    let _ = stop_tx.send(true);
    for h in &handles {
        h.abort();
    }
    for h in handles {
        let _ = h.await;
    }
    tracing::info!("stopped leading maintenance");
    let _ = conn.close().await;
    result
}

#[cfg(test)]
mod tests {
    #[test]
    fn debug_output_hides_the_password() {
        for url in [
            "postgres://u:s3cret@h/db",
            "postgres://h/db?password=s3cret",
            "host=h password=s3cret",
        ] {
            let shown = format!("{:?}", super::LeaderConfig::new(url));
            assert!(!shown.contains("s3cret"), "{shown}");
            assert!(shown.contains("***"), "{shown}");
        }
    }
}
