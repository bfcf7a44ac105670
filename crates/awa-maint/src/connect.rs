//! Connecting to the right server of a libpq host list
//! (`postgres://h1:p1,h2:p2/db?target_session_attrs=read-write`), for every
//! pool and dedicated connection Awa opens from a URL.
//!
//! sqlx 0.9 connects a pool to one host and has no hook to replace how a
//! connection is made (`PgConnectOptions` is a concrete type; the pool's
//! only hooks run after a connection is made). So this layer is built from
//! what sqlx does offer (why: `docs/adr/0009-multi-host-failover.md`):
//!
//! * [`connect`]: one connection, trying the hosts in order as libpq does;
//!   a host that refuses the connection, does not answer within its
//!   `connect_timeout`, or whose session `target_session_attrs` does not
//!   accept is skipped; an authentication failure ends the search (libpq
//!   does not try the other hosts then either).
//! * [`pool`]: a sqlx pool on the host [`connect`] found, with
//!   `after_connect` checking every new session (one that landed on the
//!   wrong kind of server is replaced by one from [`connect`]) and, for a
//!   host list, a *watch*: one extra connection that asks its server what
//!   it is every second. When it breaks or its server stops qualifying (the
//!   primary died, a standby was promoted elsewhere), the watch finds the
//!   new host with [`connect`] and points the pool's connect options at it
//!   (`Pool::set_connect_options`); idle connections made before the switch
//!   are dropped at their next acquire (`before_acquire`). Connections in
//!   use on the dead server fail as they would anyway and are replaced on
//!   the new one, so no process restarts.
//!
//! A single host without `target_session_attrs` is sqlx's plain pool,
//! nothing added.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use awa_core::conninfo::{Conninfo, SessionState, TargetSession, host_label};
use awa_core::db_error::Described;
use sqlx::postgres::PgPoolOptions;
use sqlx::{Connection as _, PgConnection, PgPool};
use tokio::sync::Notify;

/// How long one host may take to connect when the URL sets no
/// `connect_timeout`.
pub const HOST_TIMEOUT: Duration = Duration::from_secs(10);
/// How often the watch asks its server what it is.
pub const WATCH_INTERVAL: Duration = Duration::from_secs(1);
/// An answer slower than this counts as a lost server.
const WATCH_TIMEOUT: Duration = Duration::from_secs(5);
/// Longest pause between searches while no host qualifies.
const SEARCH_BACKOFF_MAX: Duration = Duration::from_secs(2);

/// Why no connection was made. Never holds a password (host labels and
/// driver errors, which the callers scrub against their URL).
#[derive(Debug, thiserror::Error)]
pub enum ConnectError {
    /// The only host (or the one whose login failed) said no.
    #[error("{host}: {}", Described(source))]
    Host {
        host: String,
        #[source]
        source: sqlx::Error,
    },
    /// The only host did not answer in time.
    #[error("{host}: no answer within {} s", after.as_secs())]
    Timeout { host: String, after: Duration },
    /// Every host was tried and none gave the session wanted.
    #[error("{}", no_session(*target, tried))]
    NoSession {
        target: TargetSession,
        /// One line per host tried: `host: why`.
        tried: Vec<String>,
    },
}

fn no_session(target: TargetSession, tried: &[String]) -> String {
    let wanted = match target {
        TargetSession::Any => "could not connect to any listed host".to_owned(),
        _ => format!("no listed host gave a {target} session (target_session_attrs)"),
    };
    format!("{wanted}: {}", tried.join("; "))
}

impl ConnectError {
    /// The driver's error, when one host's failure is the whole story.
    pub fn driver_error(&self) -> Option<&sqlx::Error> {
        match self {
            Self::Host { source, .. } => Some(source),
            _ => None,
        }
    }
}

/// What the session's server is (`sql/session_state.sql`).
pub async fn session_state(conn: &mut PgConnection) -> Result<SessionState, sqlx::Error> {
    let (in_recovery, read_only): (bool, bool) =
        sqlx::query_as(include_str!("../sql/session_state.sql"))
            .fetch_one(conn)
            .await?;
    Ok(SessionState {
        in_recovery,
        read_only,
    })
}

/// One connection to the first host, in the URL's order, that answers and
/// gives a session the URL's `target_session_attrs` accepts.
pub async fn connect(info: &Conninfo) -> Result<PgConnection, ConnectError> {
    Ok(connect_indexed(info).await?.0)
}

/// [`connect`], and which host it reached.
async fn connect_indexed(info: &Conninfo) -> Result<(PgConnection, usize), ConnectError> {
    let timeout = info.connect_timeout().unwrap_or(HOST_TIMEOUT);
    let target = info.target();
    let mut tried = Vec::new();
    let mut only: Option<ConnectError> = None;
    for pass in 0..target.passes() {
        for (i, host) in info.hosts().iter().enumerate() {
            let label = host_label(host);
            let mut conn =
                match tokio::time::timeout(timeout, PgConnection::connect_with(host)).await {
                    Err(_) => {
                        tried.push(format!("{label}: no answer within {} s", timeout.as_secs()));
                        only = Some(ConnectError::Timeout {
                            host: label,
                            after: timeout,
                        });
                        continue;
                    }
                    Ok(Err(err)) => {
                        if is_login_refused(&err) {
                            return Err(ConnectError::Host {
                                host: label,
                                source: err,
                            });
                        }
                        tried.push(format!("{label}: {}", Described(&err)));
                        only = Some(ConnectError::Host {
                            host: label,
                            source: err,
                        });
                        continue;
                    }
                    Ok(Ok(conn)) => conn,
                };
            if !target.checks() {
                return Ok((conn, i));
            }
            match session_state(&mut conn).await {
                Ok(state) if target.accepts(state, pass) => return Ok((conn, i)),
                Ok(state) => {
                    tried.push(format!("{label}: {}", target.refusal(state)));
                    only = None;
                }
                Err(err) => {
                    tried.push(format!("{label}: {}", Described(&err)));
                    only = None;
                }
            }
            let _ = conn.close().await;
        }
    }
    // One host that simply failed: its own error, as a plain connect would
    // give (the CLI reads TLS failures out of it).
    match only {
        Some(err) if info.hosts().len() == 1 => Err(err),
        _ => Err(ConnectError::NoSession { target, tried }),
    }
}

/// libpq stops at a failed login rather than trying the other hosts (the
/// same credentials go to every host); so do we. SQLSTATE class 28.
fn is_login_refused(err: &sqlx::Error) -> bool {
    err.as_database_error()
        .and_then(|e| e.code())
        .is_some_and(|code| code.starts_with("28"))
}

/// A pool on `info` from `options` (whose `after_connect` and
/// `before_acquire` hooks this sets), and the [`Watch`] that moves it to
/// another host of the list when its server fails. Keep the watch as long
/// as the pool is used, or call [`Watch::until_closed`].
pub async fn pool(
    info: &Conninfo,
    options: PgPoolOptions,
) -> Result<(PgPool, Watch), ConnectError> {
    if !info.fails_over() && !info.target().checks() {
        let host = info.first().clone();
        let pool = options
            .connect_with(host)
            .await
            .map_err(|source| ConnectError::Host {
                host: host_label(info.first()),
                source,
            })?;
        return Ok((pool, Watch(None)));
    }
    let (conn, current) = connect_indexed(info).await?;
    let shared = Arc::new(Shared {
        info: info.clone(),
        switched_at: Mutex::new(None),
        wake: Notify::new(),
    });
    let check = shared.clone();
    let mut options = options.after_connect(move |conn, _meta| {
        let shared = check.clone();
        Box::pin(async move { shared.keep_or_replace(conn).await })
    });
    if info.fails_over() {
        let stale = shared.clone();
        options = options.before_acquire(move |_conn, meta| {
            // Made before the pool moved: on the old server (dead, or no
            // longer the kind wanted). Dropped, and another is taken.
            let keep = !stale.switched_within(meta.age);
            Box::pin(async move { Ok(keep) })
        });
    }
    let chosen = info.hosts()[current].clone();
    let pool = match options.connect_with(chosen.clone()).await {
        Ok(pool) => pool,
        Err(source) => {
            let _ = conn.close().await;
            return Err(ConnectError::Host {
                host: host_label(&chosen),
                source,
            });
        }
    };
    if !info.fails_over() {
        let _ = conn.close().await;
        return Ok((pool, Watch(None)));
    }
    let handle = tokio::spawn(watch(pool.clone(), shared, conn, current));
    Ok((pool, Watch(Some(handle))))
}

/// The task that keeps a pool on a qualifying host. Dropping this stops
/// it (the pool keeps its current host); so does closing the pool.
#[derive(Debug)]
#[must_use = "dropping the watch stops the pool from following a failover"]
pub struct Watch(Option<tokio::task::JoinHandle<()>>);

impl Watch {
    /// Let the watch run until the pool is closed, for a pool that lives
    /// as long as its process (the CLI's).
    pub fn until_closed(mut self) {
        self.0.take();
    }

    /// Whether there is anything to watch (a host list).
    pub fn is_active(&self) -> bool {
        self.0.is_some()
    }
}

impl Drop for Watch {
    fn drop(&mut self) {
        if let Some(handle) = self.0.take() {
            handle.abort();
        }
    }
}

/// What the pool's hooks and its watch share.
struct Shared {
    info: Conninfo,
    /// When the pool last moved to another host.
    switched_at: Mutex<Option<Instant>>,
    /// Pokes the watch: a new session landed on the wrong server.
    wake: Notify,
}

impl Shared {
    /// `after_connect`: keep a session the URL accepts; replace one that
    /// landed on the wrong kind of server by a connection from the host
    /// list (and have the watch look again).
    async fn keep_or_replace(&self, conn: &mut PgConnection) -> Result<(), sqlx::Error> {
        let target = self.info.target();
        if !target.checks() {
            return Ok(());
        }
        let state = session_state(conn).await?;
        // The watch chose the host with libpq's passes; any kind the last
        // pass accepts is fine here.
        if target.accepts(state, target.passes() - 1) {
            return Ok(());
        }
        self.wake.notify_one();
        match connect(&self.info).await {
            Ok(replacement) => {
                let wrong = std::mem::replace(conn, replacement);
                let _ = wrong.close().await;
                Ok(())
            }
            Err(err) => Err(sqlx::Error::Configuration(Box::new(err))),
        }
    }

    fn switched_within(&self, age: Duration) -> bool {
        self.switched_at
            .lock()
            .expect("switch time")
            .is_some_and(|at| at.elapsed() < age)
    }
}

/// Asks the server of `conn` what it is every [`WATCH_INTERVAL`] (sooner
/// when poked); when the answer is wrong or missing, finds a host with
/// [`connect`] and moves the pool there. Ends when the pool closes.
async fn watch(pool: PgPool, shared: Arc<Shared>, mut conn: PgConnection, mut current: usize) {
    let info = &shared.info;
    let target = info.target();
    let closed = pool.close_event();
    tokio::pin!(closed);
    loop {
        tokio::select! {
            _ = &mut closed => {
                let _ = conn.close().await;
                return;
            }
            _ = tokio::time::sleep(WATCH_INTERVAL) => {}
            _ = shared.wake.notified() => {}
        }
        let why = match tokio::time::timeout(WATCH_TIMEOUT, session_state(&mut conn)).await {
            Ok(Ok(state)) if target.accepts(state, target.passes() - 1) => continue,
            Ok(Ok(state)) => target.refusal(state).to_owned(),
            Ok(Err(err)) => Described(&err).to_string(),
            Err(_) => format!("no answer within {} s", WATCH_TIMEOUT.as_secs()),
        };
        let from = host_label(&info.hosts()[current]);
        tracing::warn!(host = %from, reason = %why, "database host lost; looking for another in the URL's host list");
        let mut pause = Duration::from_millis(100);
        let mut said = false;
        conn = loop {
            let found = tokio::select! {
                _ = &mut closed => return,
                found = connect_indexed(info) => found,
            };
            match found {
                Ok((found, at)) => {
                    if at != current {
                        pool.set_connect_options(info.hosts()[at].clone());
                        *shared.switched_at.lock().expect("switch time") = Some(Instant::now());
                        tracing::warn!(from = %from, to = %host_label(&info.hosts()[at]),
                            "new database connections now go to another host");
                        current = at;
                    } else {
                        tracing::info!(host = %from, "the database host is back");
                    }
                    break found;
                }
                Err(err) => {
                    if !said {
                        tracing::warn!(error = %err, "no database host qualifies yet; still looking");
                        said = true;
                    }
                    tokio::select! {
                        _ = &mut closed => return,
                        _ = tokio::time::sleep(pause) => {}
                    }
                    pause = (pause * 2).min(SEARCH_BACKOFF_MAX);
                }
            }
        };
    }
}
