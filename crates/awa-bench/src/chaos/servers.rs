//! The PostgreSQL servers of one run: the suite's own cluster, or, for the
//! failover scenario, a primary and a synchronous streaming standby of our
//! own, reached through one libpq host list; the failover itself (SIGKILL
//! of the primary's postmaster, `pg_ctl promote` of the standby, a new
//! standby on the dead primary's port so the host list stays whole).

use super::error::ChaosError;
use awa_harness::{ClusterOptions, PgServer, StandbyOptions};
use sqlx::Connection as _;
use std::time::Duration;

/// How long the primary stays dead before the standby is promoted: a
/// failover manager's detection time, short.
const DETECTION: Duration = Duration::from_secs(1);

#[derive(Debug)]
pub struct Servers {
    /// Where writes go now.
    pub primary: PgServer,
    /// A synchronous standby of the primary (the failover scenario).
    pub standby: Option<PgServer>,
    /// Primaries killed by a failover, kept until the run ends.
    pub dead: Vec<PgServer>,
    /// The new primary's clock right after each promotion.
    pub promoted_at: Vec<chrono::DateTime<chrono::Utc>>,
}

impl Servers {
    /// The suite's cluster alone.
    pub fn single(server: &PgServer) -> Self {
        Self {
            primary: server.clone(),
            standby: None,
            dead: Vec::new(),
            promoted_at: Vec::new(),
        }
    }

    /// A primary of our own and a synchronous standby of it: every commit
    /// the primary acknowledges is flushed on the standby first.
    pub async fn pair() -> Result<Self, ChaosError> {
        let primary = PgServer::start(
            ClusterOptions::for_tests()
                .setting("synchronous_commit", "on")
                // A base backup needs full-page images.
                .setting("full_page_writes", "on"),
        )
        .await?;
        let standby = primary
            .start_standby(StandbyOptions {
                port: None,
                synchronous: true,
            })
            .await?;
        Ok(Self {
            primary,
            standby: Some(standby),
            dead: Vec::new(),
            promoted_at: Vec::new(),
        })
    }

    /// The URL every process connects with: both servers' ports, in a
    /// libpq host list that accepts only a session taking writes. Ports
    /// never change (a new standby takes the dead primary's), so neither
    /// does the URL.
    pub fn host_list_url(&self) -> String {
        let ports: Vec<String> = std::iter::once(&self.primary)
            .chain(self.standby.as_ref())
            .filter_map(PgServer::port)
            .map(|p| format!("127.0.0.1:{p}"))
            .collect();
        format!(
            "postgres://postgres@{}/postgres?target_session_attrs=read-write",
            ports.join(",")
        )
    }

    /// SIGKILL of the primary's postmaster, then `pg_ctl promote` of the
    /// standby, then a new synchronous standby of the new primary on the
    /// dead one's port. `None` when there is no standby to promote.
    pub async fn fail_over(&mut self) -> Result<Option<()>, ChaosError> {
        let Some(standby) = self.standby.take() else {
            return Ok(None);
        };
        let port = self.primary.port();
        self.primary.kill()?;
        tokio::time::sleep(DETECTION).await;
        standby.promote().await?;
        let old = std::mem::replace(&mut self.primary, standby);
        self.dead.push(old);
        let mut conn = sqlx::PgConnection::connect(self.primary.url())
            .await
            .map_err(|e| ChaosError::db("connecting to the new primary", e))?;
        let now: chrono::DateTime<chrono::Utc> = sqlx::query_scalar("SELECT now()")
            .fetch_one(&mut conn)
            .await
            .map_err(|e| ChaosError::db("reading the new primary's clock", e))?;
        conn.close().await.ok();
        self.promoted_at.push(now);
        // Until this standby streams, commits are acknowledged by the new
        // primary alone (no failover is injected meanwhile).
        self.standby = Some(
            self.primary
                .start_standby(StandbyOptions {
                    port,
                    synchronous: true,
                })
                .await?,
        );
        Ok(Some(()))
    }
}
