//! Connecting through a libpq host list (`awa_maint::connect`) against a
//! real primary and streaming standby made by the harness: the
//! `target_session_attrs` rules, a pool that moves to the promoted standby
//! without a restart (and drops its sessions on the old server), and a
//! maintenance leader that leads again on the new primary.

use async_trait::async_trait;
use awa_core::conninfo::connect_options;
use awa_harness::{ClusterOptions, HarnessError, PgServer, StandbyOptions};
use awa_maint::MaintError;
use awa_maint::connect::{self, ConnectError};
use awa_maint::leader::{self, LeaderConfig, Role};
use awa_maint::tasks::{MaintTask, TaskOutcome};
use sqlx::postgres::PgPoolOptions;
use sqlx::{Connection as _, PgConnection, PgPool};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};
use tokio::sync::watch;

/// Hang guard for anything that waits on a failover.
const PATIENCE: Duration = Duration::from_secs(60);

/// A primary (flushing commits, with full-page writes for the base
/// backup) and a streaming standby of it; `None` where the only server
/// is DATABASE_URL's (a standby needs a local cluster).
async fn pair(synchronous: bool) -> Option<(PgServer, PgServer)> {
    pair_with(synchronous, ClusterOptions::for_tests()).await
}

async fn pair_with(synchronous: bool, options: ClusterOptions) -> Option<(PgServer, PgServer)> {
    let options = options
        .setting("synchronous_commit", "on")
        .setting("full_page_writes", "on");
    let primary = match PgServer::start(options).await {
        Ok(server) => server,
        Err(e @ HarnessError::NoServer { .. }) if std::env::var_os("DATABASE_URL").is_some() => {
            eprintln!("skipped: no local PostgreSQL binaries for a standby: {e}");
            return None;
        }
        Err(e) => panic!("a primary: {e}"),
    };
    let standby = primary
        .start_standby(StandbyOptions {
            port: None,
            synchronous,
        })
        .await
        .expect("a standby");
    Some((primary, standby))
}

fn hosts_url(ports: &[u16], attrs: &str) -> String {
    let hosts: Vec<String> = ports.iter().map(|p| format!("127.0.0.1:{p}")).collect();
    format!(
        "postgres://postgres@{}/postgres?target_session_attrs={attrs}",
        hosts.join(",")
    )
}

async fn server_port(conn: &mut PgConnection) -> u16 {
    let port: i32 = sqlx::query_scalar("SELECT inet_server_port()")
        .fetch_one(conn)
        .await
        .expect("the server's port");
    u16::try_from(port).expect("a port")
}

/// A port nothing listens on: connecting is refused at once.
fn dead_port() -> u16 {
    let listener = std::net::TcpListener::bind(("127.0.0.1", 0)).expect("a free port");
    listener.local_addr().expect("its address").port()
}

#[tokio::test]
async fn connect_follows_target_session_attrs_over_the_host_list() {
    let Some((primary, standby)) = pair(false).await else {
        return;
    };
    let (p, s) = (primary.port().unwrap(), standby.port().unwrap());
    let dead = dead_port();
    // Standby first, so the order alone would pick it.
    for (hosts, attrs, lands_on) in [
        (vec![s, p], "any", s),
        (vec![s, p], "read-write", p),
        (vec![s, p], "primary", p),
        (vec![p, s], "read-only", s),
        (vec![p, s], "standby", s),
        (vec![p, s], "prefer-standby", s),
        // No standby listed: prefer-standby's second pass takes the primary.
        (vec![dead, p], "prefer-standby", p),
        // A host that refuses connections is skipped.
        (vec![dead, s, p], "read-write", p),
    ] {
        let url = hosts_url(&hosts, attrs);
        let info = connect_options(&url).expect("a host list");
        let mut conn = connect::connect(&info)
            .await
            .unwrap_or_else(|e| panic!("{url}: {e}"));
        assert_eq!(server_port(&mut conn).await, lands_on, "{url}");
        conn.close().await.ok();
    }

    // Nothing qualifies: every host is named with the reason.
    let info = connect_options(&hosts_url(&[dead, s], "read-write")).unwrap();
    let err = connect::connect(&info)
        .await
        .expect_err("no primary listed");
    let text = err.to_string();
    assert!(matches!(err, ConnectError::NoSession { .. }), "{text}");
    assert!(
        text.starts_with("no listed host gave a read-write session"),
        "{text}"
    );
    assert!(text.contains(&format!("127.0.0.1:{dead}: ")), "{text}");
    assert!(
        text.contains(&format!("127.0.0.1:{s}: the server is a standby")),
        "{text}"
    );

    // A failed login is not retried on the other hosts (as in libpq): the
    // error is that host's.
    let url = format!("postgres://nosuchrole@127.0.0.1:{p},127.0.0.1:{s}/postgres");
    let err = connect::connect(&connect_options(&url).unwrap())
        .await
        .expect_err("an unknown role");
    assert!(
        matches!(&err, ConnectError::Host { host, .. } if *host == format!("127.0.0.1:{p}")),
        "{err}"
    );
    assert!(err.to_string().contains("nosuchrole"), "{err}");

    // Migrations take the same path: through a standby-first list to the
    // primary.
    let report = awa_maint::migrate(&hosts_url(&[s, p], "read-write"))
        .await
        .expect("migrate through the host list");
    assert!(!report.applied.is_empty(), "{report:?}");
}

/// Counts a leader's task passes.
#[derive(Debug)]
struct Passes(Arc<AtomicUsize>);

#[async_trait]
impl MaintTask for Passes {
    fn name(&self) -> &'static str {
        "passes"
    }
    fn interval(&self) -> Duration {
        Duration::from_millis(50)
    }
    async fn run_once(&self, pool: &PgPool) -> Result<TaskOutcome, MaintError> {
        // A write, so a pass only counts where writes are taken.
        sqlx::query("INSERT INTO leader_passes DEFAULT VALUES")
            .execute(pool)
            .await?;
        self.0.fetch_add(1, Ordering::SeqCst);
        Ok(TaskOutcome::Idle)
    }
}

async fn wait_for(what: &str, mut ready: impl AsyncFnMut() -> bool) {
    let deadline = Instant::now() + PATIENCE;
    while !ready().await {
        assert!(Instant::now() < deadline, "gave up waiting: {what}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The primary's postmaster is killed and the standby promoted: the pool
/// built from the host list points at the new primary without a restart,
/// its sessions on the dead server are never handed out again (even
/// without a ping before acquire), and the maintenance leader steps down
/// and leads again there.
#[tokio::test]
async fn a_pool_and_its_leader_move_to_the_promoted_standby() {
    let Some((primary, standby)) = pair(true).await else {
        return;
    };
    let (p, s) = (primary.port().unwrap(), standby.port().unwrap());
    let url = hosts_url(&[p, s], "read-write");
    // The leader records itself in the control tables.
    awa_maint::migrate(&url).await.expect("migrate");
    let info = connect_options(&url).unwrap();
    let options = PgPoolOptions::new()
        .max_connections(4)
        .acquire_timeout(Duration::from_secs(5))
        .test_before_acquire(false);
    let (pool, watch_guard) = connect::pool(&info, options).await.expect("a pool");
    assert!(watch_guard.is_active());
    sqlx::query("CREATE TABLE leader_passes (at timestamptz NOT NULL DEFAULT now())")
        .execute(&pool)
        .await
        .unwrap();
    // Four idle sessions on the primary.
    let mut held = Vec::new();
    for _ in 0..4 {
        let mut conn = pool.acquire().await.unwrap();
        assert_eq!(server_port(&mut conn).await, p);
        held.push(conn);
    }
    drop(held);

    let passes = Arc::new(AtomicUsize::new(0));
    let (stop_tx, stop_rx) = watch::channel(false);
    let (role_tx, mut role) = watch::channel(Role::Candidate);
    let mut config = LeaderConfig::new();
    config.retry_interval = Duration::from_millis(200);
    config.check_interval = Duration::from_millis(200);
    let candidate = tokio::spawn(leader::run(
        config,
        pool.clone(),
        vec![Arc::new(Passes(passes.clone())) as Arc<dyn MaintTask>],
        stop_rx,
        Some(role_tx),
    ));
    tokio::time::timeout(PATIENCE, role.wait_for(|r| *r == Role::Leader))
        .await
        .expect("leads on the primary")
        .unwrap();

    primary.kill().expect("kill the primary");
    tokio::time::timeout(PATIENCE, role.wait_for(|r| *r == Role::Candidate))
        .await
        .expect("steps down when its server dies")
        .unwrap();
    standby.promote().await.expect("promote");
    let promoted_at = Instant::now();
    wait_for("the pool to point at the promoted standby", async || {
        pool.connect_options().get_port() == s
    })
    .await;
    // Every session handed out from now on is on the new primary: the four
    // idle ones on the dead server are dropped at acquire.
    for _ in 0..8 {
        let mut conn = pool.acquire().await.expect("a session after the failover");
        assert_eq!(server_port(&mut conn).await, s);
        let state = connect::session_state(&mut conn).await.unwrap();
        assert!(!state.read_only && !state.in_recovery, "{state:?}");
    }

    tokio::time::timeout(PATIENCE, role.wait_for(|r| *r == Role::Leader))
        .await
        .expect("leads again on the new primary")
        .unwrap();
    let before = passes.load(Ordering::SeqCst);
    wait_for("a maintenance pass on the new primary", async || {
        passes.load(Ordering::SeqCst) > before
    })
    .await;
    let mut on_new = PgConnection::connect(standby.url()).await.unwrap();
    let holder: Option<i32> = sqlx::query_scalar(
        "SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND classid = 6387553 \
         AND objid = 2 AND granted",
    )
    .fetch_optional(&mut on_new)
    .await
    .unwrap();
    assert!(
        holder.is_some(),
        "the leader lock is held on the new primary"
    );
    eprintln!(
        "leading again {:?} after the promotion",
        promoted_at.elapsed()
    );
    on_new.close().await.ok();

    stop_tx.send(true).unwrap();
    candidate.await.unwrap().unwrap();
    drop(watch_guard);
    pool.close().await;
}

/// The old server stays up but stops qualifying (its sessions turn
/// read-only) while another host is promoted: live, healthy sessions on
/// the old server are not handed out after the pool moved.
#[tokio::test]
async fn sessions_on_a_server_that_stopped_qualifying_are_not_handed_out() {
    let Some((primary, standby)) = pair(false).await else {
        return;
    };
    let (p, s) = (primary.port().unwrap(), standby.port().unwrap());
    let info = connect_options(&hosts_url(&[p, s], "read-write")).unwrap();
    // With the ping before acquire: it passes on a live server, so only
    // the pool's own rule can keep these sessions out.
    let (pool, _watch) = connect::pool(&info, PgPoolOptions::new().max_connections(4))
        .await
        .expect("a pool");
    let mut held = Vec::new();
    for _ in 0..4 {
        held.push(pool.acquire().await.unwrap());
    }
    drop(held);

    let mut admin = PgConnection::connect(primary.url()).await.unwrap();
    sqlx::query("ALTER SYSTEM SET default_transaction_read_only = on")
        .execute(&mut admin)
        .await
        .unwrap();
    sqlx::query("SELECT pg_reload_conf()")
        .execute(&mut admin)
        .await
        .unwrap();
    admin.close().await.ok();
    standby.promote().await.expect("promote");
    wait_for("the pool to point at the promoted standby", async || {
        pool.connect_options().get_port() == s
    })
    .await;
    for _ in 0..8 {
        let mut conn = pool.acquire().await.unwrap();
        assert_eq!(server_port(&mut conn).await, s);
        let state = connect::session_state(&mut conn).await.unwrap();
        assert!(!state.read_only, "a session that takes writes");
    }
    pool.close().await;
}

/// A leader candidate whose pool reaches only a standby never tries the
/// lock there (advisory locks work on a hot standby, where holding one
/// excludes nobody on the primary): the standby's statement log shows the
/// candidate asking what the server is, again and again, and never a lock
/// attempt.
#[tokio::test]
async fn a_candidate_on_a_standby_never_tries_the_leader_lock() {
    let Some((primary, standby)) = pair_with(
        false,
        ClusterOptions::for_tests().setting("log_statement", "all"),
    )
    .await
    else {
        return;
    };
    let url = format!(
        "postgres://postgres@127.0.0.1:{}/postgres",
        primary.port().unwrap()
    );
    awa_maint::migrate(&url).await.expect("migrate");
    // A plain pool on the standby alone (target_session_attrs=any).
    let pool = PgPoolOptions::new()
        .max_connections(2)
        .connect(standby.url())
        .await
        .expect("a pool on the standby");
    let (stop_tx, stop_rx) = watch::channel(false);
    let mut config = LeaderConfig::new();
    config.retry_interval = Duration::from_millis(100);
    let candidate = tokio::spawn(leader::run(config, pool.clone(), Vec::new(), stop_rx, None));
    let log = standby
        .log_path()
        .expect("a local cluster's log")
        .to_owned();
    let asked = "SELECT pg_is_in_recovery() AS in_recovery";
    wait_for("three tries of the candidate on the standby", async || {
        std::fs::read_to_string(&log).is_ok_and(|text| text.matches(asked).count() >= 3)
    })
    .await;
    stop_tx.send(true).unwrap();
    candidate.await.unwrap().unwrap();
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(
        !text.contains("pg_try_advisory_lock"),
        "the candidate tried the leader lock on a standby"
    );
    pool.close().await;
}
