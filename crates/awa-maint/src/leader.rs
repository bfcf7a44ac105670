//! The maintenance leader: one per database, elected by a session advisory
//! lock held on a connection dedicated to it (never a pooled one, which
//! could go back to the pool still holding the lock). That connection is
//! opened with the pool's own connect options (same server, role and TLS
//! settings), so a candidate needs nothing but the pool; a pool made by
//! [`crate::connect::pool`] from a host list has its options moved to the
//! new primary after a failover, and the candidate follows at its next try.
//! A session on a standby is never a candidate: advisory locks work on a
//! hot standby, where they exclude nobody on the primary, so the lock is
//! only tried on a server that takes writes.
//!
//! Across a failover the lock does not move: advisory locks are not
//! replicated, so the old leader's lock dies with its server, its check
//! fails within a check interval and its tasks stop; a candidate then
//! takes the lock on the new primary and waits the usual two check
//! intervals before leading.
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

#[derive(Debug, Clone)]
pub struct LeaderConfig {
    pub instance_id: uuid::Uuid,
    /// How often a candidate tries for the lock.
    pub retry_interval: Duration,
    /// How often the leader confirms it still holds the lock.
    pub check_interval: Duration,
    /// Most one task pass may take.
    pub pass_timeout: Duration,
}

impl Default for LeaderConfig {
    fn default() -> Self {
        Self::new()
    }
}

impl LeaderConfig {
    pub fn new() -> Self {
        Self {
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

/// What a leader runs.
#[derive(Debug, Clone)]
enum TaskSet {
    /// These tasks, always (a leader pinned to one substrate, tests).
    Fixed(Vec<Arc<dyn MaintTask>>),
    /// The database-wide tasks, plus every substrate task for each
    /// substrate the routing reads, following the routing: re-read at
    /// every lock check (so within [`LeaderConfig::check_interval`] of a
    /// transition step), tasks started for a substrate that joins and
    /// stopped for one that leaves.
    Routed(tasks::MaintSettings),
}

/// Run as a leader candidate until `shutdown` flips to true, running
/// `tasks` while leading.
pub async fn run(
    config: LeaderConfig,
    pool: sqlx::PgPool,
    tasks: Vec<Arc<dyn MaintTask>>,
    shutdown: watch::Receiver<bool>,
    role: Option<watch::Sender<Role>>,
) -> Result<(), MaintError> {
    run_set(config, pool, TaskSet::Fixed(tasks), shutdown, role).await
}

/// Run as a leader candidate until `shutdown` flips to true, maintaining
/// every substrate the storage routing reads: the database-wide tasks
/// once, and each substrate's tasks for every substrate the routing reads,
/// re-read at every lock check (so within
/// [`LeaderConfig::check_interval`] of a transition step).
pub async fn run_routed(
    config: LeaderConfig,
    pool: sqlx::PgPool,
    settings: tasks::MaintSettings,
    shutdown: watch::Receiver<bool>,
    role: Option<watch::Sender<Role>>,
) -> Result<(), MaintError> {
    run_set(config, pool, TaskSet::Routed(settings), shutdown, role).await
}

async fn run_set(
    config: LeaderConfig,
    pool: sqlx::PgPool,
    tasks: TaskSet,
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
        // lead_once may have seen the shutdown already (`stopped` waits
        // for the value, not for a change).
        tokio::select! {
            _ = tokio::time::sleep(config.retry_interval) => {}
            _ = crate::shutdown::stopped(&mut shutdown) => {}
        }
    }
}

/// Try for the lock once; if won, lead until the lock or shutdown is lost.
async fn lead_once(
    config: &LeaderConfig,
    pool: &sqlx::PgPool,
    tasks: &TaskSet,
    shutdown: &mut watch::Receiver<bool>,
    host: &str,
    role: Option<&watch::Sender<Role>>,
) -> Result<(), MaintError> {
    // Bounded, so an unreachable server shows up as a logged retry rather
    // than a candidate stuck forever in connect.
    let mut conn = tokio::time::timeout(
        Duration::from_secs(10),
        PgConnection::connect_with(&pool.connect_options()),
    )
    .await
    .map_err(|_| MaintError::LeadershipLost("connecting for the leader lock timed out".into()))??;
    if crate::connect::session_state(&mut conn).await?.read_only {
        let _ = conn.close().await;
        return Err(MaintError::LeadershipLost(
            "the server is read-only (a standby?); maintenance runs only on a server that takes \
             writes: list the primary in the URL, or every host with \
             target_session_attrs=read-write"
                .into(),
        ));
    }
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
        _ = crate::shutdown::stopped(shutdown) => {
            let _ = conn.close().await;
            return Ok(());
        }
    }
    if let Some(r) = role {
        let _ = r.send(Role::Leader);
    }

    let (stop_tx, stop_rx) = watch::channel(false);
    let spawn = |t: &Arc<dyn MaintTask>, stop: watch::Receiver<bool>| {
        tokio::spawn(tasks::run_loop(
            t.clone(),
            pool.clone(),
            stop,
            config.pass_timeout,
        ))
    };
    let mut handles: Vec<tokio::task::JoinHandle<()>> = Vec::new();
    // Routed: each substrate's tasks, keyed by (schema, written), with a
    // stop channel of their own.
    let mut per_substrate: Vec<SubstrateTasks> = Vec::new();
    match tasks {
        TaskSet::Fixed(list) => {
            handles.extend(list.iter().map(|t| spawn(t, stop_rx.clone())));
        }
        TaskSet::Routed(settings) => {
            handles.extend(
                tasks::database_tasks(settings)
                    .iter()
                    .map(|t| spawn(t, stop_rx.clone())),
            );
        }
    }
    let instance = config.instance_id.to_string();
    let follow = |per_substrate: &mut Vec<SubstrateTasks>, routing: &awa_core::Routing| {
        let TaskSet::Routed(settings) = tasks else {
            return;
        };
        let wanted: Vec<(awa_core::SchemaName, bool)> = routing
            .reads()
            .into_iter()
            .map(|s| {
                let written = &s == routing.write();
                (s, written)
            })
            .collect();
        per_substrate.retain(|p| {
            let keep = wanted.contains(&(p.schema.clone(), p.written));
            if !keep {
                tracing::info!(schema = %p.schema, "maintenance of substrate stopped");
                let _ = p.stop.send(true);
                for h in &p.handles {
                    h.abort();
                }
            }
            keep
        });
        for (schema, written) in wanted {
            if per_substrate
                .iter()
                .any(|p| p.schema == schema && p.written == written)
            {
                continue;
            }
            tracing::info!(schema = %schema, written, "maintaining substrate");
            let (stop, rx) = watch::channel(false);
            let handles = tasks::substrate_tasks(&schema, settings, &instance, written)
                .iter()
                .map(|t| spawn(t, rx.clone()))
                .collect();
            per_substrate.push(SubstrateTasks {
                schema,
                written,
                stop,
                handles,
            });
        }
    };
    if matches!(tasks, TaskSet::Routed(_)) {
        let routing = read_routing(pool).await?;
        follow(&mut per_substrate, &routing);
    }

    let result = loop {
        tokio::select! {
            _ = tokio::time::sleep(config.check_interval) => {}
            _ = crate::shutdown::stopped(shutdown) => break Ok(()),
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
        if matches!(tasks, TaskSet::Routed(_)) {
            match tokio::time::timeout(config.check_interval, read_routing(pool)).await {
                Ok(Ok(routing)) => follow(&mut per_substrate, &routing),
                Ok(Err(err)) => tracing::warn!(error = %err,
                    "could not read the storage routing; keeping the substrates maintained now"),
                Err(_) => tracing::warn!("reading the storage routing timed out"),
            }
        }
    };
    // Stop every task first: abort, so no pass in progress writes after we
    // stopped leading.
    let _ = stop_tx.send(true);
    for p in &per_substrate {
        let _ = p.stop.send(true);
    }
    handles.extend(per_substrate.into_iter().flat_map(|p| p.handles));
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

/// The tasks of one substrate while leading (routed).
struct SubstrateTasks {
    schema: awa_core::SchemaName,
    written: bool,
    stop: watch::Sender<bool>,
    handles: Vec<tokio::task::JoinHandle<()>>,
}

async fn read_routing(pool: &sqlx::PgPool) -> Result<awa_core::Routing, MaintError> {
    let mut conn = pool.acquire().await?;
    Ok(awa_control::routing::read(&mut conn).await?)
}
