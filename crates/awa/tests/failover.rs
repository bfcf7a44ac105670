//! A worker client connected through a libpq host list across a primary
//! failover (primary killed with SIGKILL, synchronous standby promoted):
//! it keeps producing and working without a restart, its LISTEN listener
//! and its maintenance leader come back on the new primary, and a builder
//! made from a connected client keeps following after that client is
//! dropped (the Python worker's way of starting).

use awa::{Client, JobContext, MaintSettings, Outcome};
use awa_harness::{ClusterOptions, HarnessError, PgServer, StandbyOptions};
use sqlx::{Connection as _, PgConnection};
use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize, awa::Job)]
#[awa(kind = "tick", queue = "failover")]
struct Tick {
    n: u32,
}

/// Hang guard for anything that waits on the failover.
const PATIENCE: Duration = Duration::from_secs(60);

async fn eventually(what: &str, mut done: impl AsyncFnMut() -> bool) {
    let deadline = Instant::now() + PATIENCE;
    while !done().await {
        assert!(Instant::now() < deadline, "gave up waiting for {what}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test]
async fn a_worker_on_a_host_list_keeps_working_after_the_standby_is_promoted() {
    let primary = match PgServer::start(
        ClusterOptions::for_tests()
            .setting("synchronous_commit", "on")
            .setting("full_page_writes", "on"),
    )
    .await
    {
        Ok(server) => server,
        Err(e @ HarnessError::NoServer { .. }) if std::env::var_os("DATABASE_URL").is_some() => {
            eprintln!("skipped: no local PostgreSQL binaries for a standby: {e}");
            return;
        }
        Err(e) => panic!("a primary: {e}"),
    };
    let standby = primary
        .start_standby(StandbyOptions {
            port: None,
            synchronous: true,
        })
        .await
        .expect("a synchronous standby");
    let url = format!(
        "postgres://postgres@127.0.0.1:{},127.0.0.1:{}/postgres?target_session_attrs=read-write",
        primary.port().unwrap(),
        standby.port().unwrap()
    );
    awa_maint::migrate(&url).await.expect("migrate");

    let done = Arc::new(Mutex::new(BTreeSet::new()));
    let base = Client::connect(&url, 8).await.expect("connect");
    let worker = base
        .to_builder()
        .queue("failover", 4)
        .maintenance(MaintSettings {
            promote_interval: Duration::from_millis(100),
            ..MaintSettings::default()
        })
        .register::<Tick>({
            let done = done.clone();
            move |tick: Tick, _ctx: JobContext| {
                let done = done.clone();
                async move {
                    done.lock().unwrap().insert(tick.n);
                    Ok(Outcome::Complete)
                }
            }
        })
        .start()
        .await
        .expect("start");
    // The worker holds the watch from here on.
    drop(base);

    let pool = worker.pool().clone();
    for n in 0..20 {
        worker.insert(&pool, &Tick { n }).await.expect("insert");
    }
    eventually("the first 20 jobs", async || {
        done.lock().unwrap().len() == 20
    })
    .await;

    primary.kill().expect("kill the primary");
    standby.promote().await.expect("promote");
    for n in 20..40 {
        // Enqueues fail until the pool has moved; an acknowledged one is
        // on the new primary (the standby confirmed it).
        eventually("an enqueue on the new primary", async || {
            worker.insert(&pool, &Tick { n }).await.is_ok()
        })
        .await;
    }
    eventually("all 40 jobs", async || done.lock().unwrap().len() == 40).await;

    // Notifications and maintenance live on the new primary now.
    let mut new_primary = PgConnection::connect(standby.url()).await.unwrap();
    eventually("LISTEN awa_ready on the new primary", async || {
        sqlx::query_scalar::<_, i64>(
            // PgListener's reconnect sends `LISTEN "awa_ready";`.
            "SELECT count(*) FROM pg_stat_activity WHERE query LIKE 'LISTEN \"awa_ready\"%'",
        )
        .fetch_one(&mut new_primary)
        .await
        .unwrap()
            > 0
    })
    .await;
    eventually("the leader lock on the new primary", async || {
        sqlx::query_scalar::<_, i64>(
            "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' \
             AND classid = 6387553 AND objid = 2 AND granted",
        )
        .fetch_one(&mut new_primary)
        .await
        .unwrap()
            == 1
    })
    .await;
    new_primary.close().await.ok();
    worker
        .shutdown(Duration::from_secs(5))
        .await
        .expect("shutdown");
}
