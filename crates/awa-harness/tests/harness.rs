//! Against a real PostgreSQL: whatever `PgServer::shared` finds here
//! (DATABASE_URL, local binaries, or Docker).

use std::collections::HashSet;
use std::io::{BufRead as _, BufReader};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use awa_harness::{
    ClusterOptions, HarnessError, PgServer, ServerKind, StandbyOptions, TestDb, template_name,
};
use sqlx::Connection as _;
use sqlx::postgres::PgConnection;

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// Template keys unique to this run, so a template left on a long-lived
/// DATABASE_URL server by an earlier run cannot make `init` look skipped.
fn unique_key(label: &str) -> String {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    format!("harness-test {label} {} {nanos}", std::process::id())
}

async fn create_widgets(url: String) -> Result<(), BoxError> {
    let mut conn = PgConnection::connect(&url).await?;
    sqlx::query("create table widgets (id int primary key, name text not null)")
        .execute(&mut conn)
        .await?;
    sqlx::query("insert into widgets values (1, 'from init')")
        .execute(&mut conn)
        .await?;
    conn.close().await?;
    Ok(())
}

async fn database_exists(server: &PgServer, name: &str) -> bool {
    let mut conn = PgConnection::connect(&server.url_for("postgres"))
        .await
        .expect("admin connection");
    let exists: bool =
        sqlx::query_scalar("select exists(select 1 from pg_database where datname = $1)")
            .bind(name)
            .fetch_one(&mut conn)
            .await
            .expect("pg_database lookup");
    conn.close().await.ok();
    exists
}

#[tokio::test]
async fn shared_server_answers_select_1() {
    let server = PgServer::shared().await.expect("a PostgreSQL server");
    let mut conn = PgConnection::connect(server.url()).await.expect("connect");
    let one: i32 = sqlx::query_scalar("select 1")
        .fetch_one(&mut conn)
        .await
        .expect("select 1");
    assert_eq!(one, 1);

    if server.kind() == ServerKind::LocalCluster {
        assert!(
            server
                .bin_dir()
                .is_some_and(|d| d.join("postgres").exists())
        );
        assert!(
            server
                .settings()
                .contains(&("fsync".to_owned(), "off".to_owned()))
        );
        let fsync: String = sqlx::query_scalar("show fsync")
            .fetch_one(&mut conn)
            .await
            .expect("show fsync");
        assert_eq!(fsync, "off");
    }
    conn.close().await.ok();

    let again = PgServer::shared().await.expect("shared again");
    assert_eq!(again.url(), server.url(), "one shared server per process");
}

#[tokio::test]
async fn two_databases_from_one_template_are_distinct_and_initialised() {
    let key = unique_key("distinct");
    let a = TestDb::new(&key, create_widgets).await.expect("first db");
    let b = TestDb::new(&key, create_widgets).await.expect("second db");
    assert_ne!(a.name(), b.name());
    assert_ne!(a.url(), b.url());
    assert!(a.name().starts_with("awa_test_"));

    let pool_a = a.pool().await.expect("pool a");
    let pool_b = b.pool().await.expect("pool b");
    for pool in [&pool_a, &pool_b] {
        let name: String = sqlx::query_scalar("select name from widgets where id = 1")
            .fetch_one(pool)
            .await
            .expect("init's table and row are there");
        assert_eq!(name, "from init");
    }

    sqlx::query("insert into widgets values (2, 'only in a')")
        .execute(&pool_a)
        .await
        .expect("insert");
    let count_b: i64 = sqlx::query_scalar("select count(*) from widgets")
        .fetch_one(&pool_b)
        .await
        .expect("count");
    assert_eq!(count_b, 1, "databases must not share data");

    pool_a.close().await;
    pool_b.close().await;
    let server = a.server().clone();
    drop((a, b));
    server.drop_template(&key).await.expect("drop template");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_new_runs_init_once() {
    let key = unique_key("concurrent");
    let init_calls = Arc::new(AtomicUsize::new(0));

    let mut tasks = Vec::new();
    for _ in 0..8 {
        let key = key.clone();
        let init_calls = Arc::clone(&init_calls);
        tasks.push(tokio::spawn(async move {
            TestDb::new(&key, move |url| async move {
                init_calls.fetch_add(1, Ordering::SeqCst);
                // Widen the window in which the other tasks pile up.
                tokio::time::sleep(Duration::from_millis(200)).await;
                create_widgets(url).await
            })
            .await
        }));
    }
    let mut dbs = Vec::new();
    for task in tasks {
        dbs.push(task.await.expect("task").expect("TestDb::new"));
    }

    assert_eq!(init_calls.load(Ordering::SeqCst), 1);
    let names: HashSet<&str> = dbs.iter().map(TestDb::name).collect();
    assert_eq!(names.len(), 8);

    let server = dbs[0].server().clone();
    drop(dbs);
    server.drop_template(&key).await.expect("drop template");
}

#[tokio::test]
async fn template_cannot_be_connected_to() {
    let key = unique_key("locked");
    let db = TestDb::new(&key, create_widgets).await.expect("db");
    let server = db.server().clone();
    let template = template_name(&key);
    assert!(template.starts_with("awa_tpl_") && template.len() == "awa_tpl_".len() + 16);

    let err = PgConnection::connect(&server.url_for(&template))
        .await
        .expect_err("the template must refuse connections");
    assert!(
        err.to_string()
            .contains("not currently accepting connections"),
        "unexpected error: {err}"
    );

    let mut conn = PgConnection::connect(&server.url_for("postgres"))
        .await
        .expect("admin connection");
    let (is_template, allow_conn): (bool, bool) =
        sqlx::query_as("select datistemplate, datallowconn from pg_database where datname = $1")
            .bind(&template)
            .fetch_one(&mut conn)
            .await
            .expect("template row");
    assert!(is_template);
    assert!(!allow_conn);
    conn.close().await.ok();

    drop(db);
    server.drop_template(&key).await.expect("drop template");
    assert!(!database_exists(&server, &template).await);
}

#[tokio::test]
async fn drop_removes_the_database_even_with_open_connections() {
    let db = TestDb::empty().await.expect("empty db");
    let server = db.server().clone();
    let name = db.name().to_owned();
    assert!(database_exists(&server, &name).await);

    let pool = db.pool().await.expect("pool");
    let tables: i64 = sqlx::query_scalar(
        "select count(*) from information_schema.tables where table_schema = 'public'",
    )
    .fetch_one(&pool)
    .await
    .expect("query");
    assert_eq!(tables, 0, "an empty database has no tables");

    // The pool stays open across the drop: WITH (FORCE) must cope.
    drop(db);
    assert!(!database_exists(&server, &name).await);
    pool.close().await;
}

#[test]
fn drop_works_outside_any_runtime() {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let db = runtime.block_on(TestDb::empty()).expect("empty db");
    let server = db.server().clone();
    let name = db.name().to_owned();
    drop(runtime);

    drop(db);

    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    assert!(!runtime.block_on(database_exists(&server, &name)));
}

#[tokio::test]
async fn failed_init_leaves_nothing_behind_and_can_be_retried() {
    let key = unique_key("failing");
    let template = template_name(&key);
    let err = TestDb::new(&key, |_url| async { Err::<(), BoxError>("boom".into()) })
        .await
        .expect_err("init failed");
    assert!(
        matches!(&err, HarnessError::TemplateInit { template: t, .. } if *t == template),
        "unexpected error: {err}"
    );
    assert!(err.to_string().contains("boom"), "{err}");

    let server = PgServer::shared().await.expect("server");
    assert!(!database_exists(&server, &template).await);
    assert!(!database_exists(&server, &format!("{template}_building")).await);

    let db = TestDb::new(&key, create_widgets)
        .await
        .expect("a later, working init");
    drop(db);
    server.drop_template(&key).await.expect("drop template");
}

#[tokio::test]
async fn private_cluster_uses_its_own_settings_and_goes_away() {
    let Some(server) =
        start_private(ClusterOptions::postgres_defaults().setting("autovacuum", "off")).await
    else {
        return;
    };
    assert_ne!(server.kind(), ServerKind::External);
    assert_eq!(
        server.settings(),
        &[("autovacuum".to_owned(), "off".to_owned())]
    );
    let shared = PgServer::shared().await.expect("shared");
    assert_ne!(server.url(), shared.url());

    let mut conn = PgConnection::connect(server.url()).await.expect("connect");
    let autovacuum: String = sqlx::query_scalar("show autovacuum")
        .fetch_one(&mut conn)
        .await
        .expect("show");
    assert_eq!(autovacuum, "off");
    let fsync: String = sqlx::query_scalar("show fsync")
        .fetch_one(&mut conn)
        .await
        .expect("show");
    assert_eq!(fsync, "on", "PostgreSQL defaults, not the test settings");
    conn.close().await.ok();

    let db = TestDb::empty_on(&server)
        .await
        .expect("db on the private cluster");
    let url = server.url().to_owned();
    drop(server);
    // The TestDb still holds the cluster.
    let conn = PgConnection::connect(db.url()).await.expect("still up");
    conn.close().await.ok();
    drop(db);

    assert!(
        PgConnection::connect(&url).await.is_err(),
        "the cluster stops when its last handle drops"
    );
}

#[tokio::test]
async fn an_immediate_restart_keeps_committed_data_and_the_port() {
    let Some(server) =
        start_private(ClusterOptions::for_tests().setting("synchronous_commit", "on")).await
    else {
        return;
    };
    if !server.can_restart() {
        eprintln!("skipped: a {:?} server cannot be restarted", server.kind());
        return;
    }
    let mut conn = PgConnection::connect(server.url()).await.expect("connect");
    sqlx::raw_sql("CREATE TABLE survivors (n int); INSERT INTO survivors VALUES (1), (2)")
        .execute(&mut conn)
        .await
        .expect("committed before the crash");
    let pid_before: i32 = sqlx::query_scalar("SELECT pg_backend_pid()")
        .fetch_one(&mut conn)
        .await
        .expect("pid");

    server.restart_immediate().await.expect("restart");

    assert!(
        sqlx::query("SELECT 1").execute(&mut conn).await.is_err(),
        "connections from before the restart are broken"
    );
    let mut conn = PgConnection::connect(server.url()).await.expect("same URL");
    let n: i64 = sqlx::query_scalar("SELECT count(*) FROM survivors")
        .fetch_one(&mut conn)
        .await
        .expect("the table survived crash recovery");
    assert_eq!(n, 2);
    let pid_after: i32 = sqlx::query_scalar("SELECT pg_backend_pid()")
        .fetch_one(&mut conn)
        .await
        .expect("pid");
    assert_ne!(pid_before, pid_after);
    conn.close().await.ok();
}

#[tokio::test]
async fn only_a_local_cluster_can_be_restarted() {
    let shared = PgServer::shared().await.expect("shared");
    if shared.kind() == ServerKind::LocalCluster {
        assert!(shared.can_restart());
        return;
    }
    let err = shared.restart_immediate().await.unwrap_err();
    assert!(matches!(err, HarnessError::NotRestartable(_)), "{err}");
    assert!(err.to_string().contains("cannot restart"), "{err}");
}

/// A primary and a synchronous streaming standby: the standby refuses
/// writes, every commit the primary acknowledged is on it after the
/// primary's postmaster is killed and it is promoted, it then takes
/// writes, and a new standby of it can take the dead primary's port.
#[tokio::test]
async fn a_promoted_synchronous_standby_has_every_acknowledged_commit() {
    let Some(primary) = start_private(
        ClusterOptions::for_tests()
            .setting("synchronous_commit", "on")
            .setting("full_page_writes", "on"),
    )
    .await
    else {
        return;
    };
    let standby = primary
        .start_standby(StandbyOptions {
            port: None,
            synchronous: true,
        })
        .await
        .expect("a synchronous standby");
    assert_ne!(standby.port(), primary.port());

    let mut conn = PgConnection::connect(primary.url()).await.expect("primary");
    sqlx::query("CREATE TABLE acked (n int PRIMARY KEY)")
        .execute(&mut conn)
        .await
        .expect("create");
    for n in 0..200 {
        sqlx::query("INSERT INTO acked VALUES ($1)")
            .bind(n)
            .execute(&mut conn)
            .await
            .expect("each insert acknowledged");
    }
    let mut on_standby = PgConnection::connect(standby.url()).await.expect("standby");
    let in_recovery: bool = sqlx::query_scalar("SELECT pg_is_in_recovery()")
        .fetch_one(&mut on_standby)
        .await
        .expect("ask the standby");
    assert!(in_recovery);
    let refused = sqlx::query("INSERT INTO acked VALUES (-1)")
        .execute(&mut on_standby)
        .await
        .expect_err("a standby takes no writes");
    assert_eq!(
        refused
            .as_database_error()
            .and_then(|e| e.code())
            .as_deref(),
        Some("25006"),
        "{refused}"
    );
    on_standby.close().await.ok();

    primary.kill().expect("kill the primary");
    assert!(
        sqlx::query("SELECT 1").execute(&mut conn).await.is_err(),
        "sessions on the killed primary are broken"
    );
    assert!(
        PgConnection::connect(primary.url()).await.is_err(),
        "the killed primary stays down"
    );

    standby.promote().await.expect("promote");
    let mut conn = PgConnection::connect(standby.url())
        .await
        .expect("new primary");
    let (count, max): (i64, Option<i32>) = sqlx::query_as("SELECT count(*), max(n) FROM acked")
        .fetch_one(&mut conn)
        .await
        .expect("count");
    assert_eq!((count, max), (200, Some(199)), "every acknowledged commit");
    sqlx::query("INSERT INTO acked VALUES (200)")
        .execute(&mut conn)
        .await
        .expect("the promoted standby takes writes");

    // The next standby, of the new primary, on the dead primary's port: a
    // URL listing both ports still names both servers.
    let next = standby
        .start_standby(StandbyOptions {
            port: primary.port(),
            synchronous: true,
        })
        .await
        .expect("a standby on the dead primary's port");
    assert_eq!(next.url(), primary.url());
    sqlx::query("INSERT INTO acked VALUES (201)")
        .execute(&mut conn)
        .await
        .expect("a commit confirmed by the new standby");
    conn.close().await.ok();
    let mut on_next = PgConnection::connect(next.url())
        .await
        .expect("next standby");
    let in_recovery: bool = sqlx::query_scalar("SELECT pg_is_in_recovery()")
        .fetch_one(&mut on_next)
        .await
        .expect("ask");
    assert!(in_recovery);
    on_next.close().await.ok();
}

#[tokio::test]
async fn a_standby_needs_full_page_writes_and_a_local_primary() {
    let shared = PgServer::shared().await.expect("shared");
    if shared.kind() != ServerKind::LocalCluster {
        let err = shared
            .start_standby(StandbyOptions::default())
            .await
            .unwrap_err();
        assert!(matches!(err, HarnessError::NotLocal { .. }), "{err}");
        assert!(shared.promote().await.is_err());
        assert!(shared.kill().is_err());
        return;
    }
    // The shared cluster runs the test settings (full_page_writes=off).
    let err = shared
        .start_standby(StandbyOptions::default())
        .await
        .unwrap_err();
    assert!(err.to_string().contains("full_page_writes=on"), "{err}");
}

#[test]
fn no_server_message_names_the_three_fixes() {
    let err = HarnessError::NoServer {
        attempts: vec![
            "DATABASE_URL: not set".to_owned(),
            "local server binaries: none found".to_owned(),
            "docker: the `docker` feature of awa-harness is not enabled".to_owned(),
        ],
    };
    let msg = err.to_string();
    assert!(msg.contains("set DATABASE_URL"), "{msg}");
    assert!(msg.contains("apt-get install postgresql"), "{msg}");
    assert!(msg.contains("`docker` cargo feature"), "{msg}");
    assert!(msg.contains("Docker engine"), "{msg}");
    assert!(
        msg.contains("  - local server binaries: none found"),
        "{msg}"
    );
}

/// A private cluster, or `None` (test skipped) where the only server is the
/// DATABASE_URL one, which a private cluster never uses.
async fn start_private(opts: ClusterOptions) -> Option<PgServer> {
    match PgServer::start(opts).await {
        Ok(server) => Some(server),
        Err(e @ HarnessError::NoServer { .. }) if std::env::var_os("DATABASE_URL").is_some() => {
            eprintln!("skipped: no local binaries or Docker for a private cluster: {e}");
            None
        }
        Err(e) => panic!("a private cluster: {e}"),
    }
}

const CHILD_ENV: &str = "AWA_HARNESS_TEST_CHILD";

/// Run by `cluster_dies_with_its_process` in a child process; does nothing
/// when run directly.
#[test]
#[ignore = "helper for cluster_dies_with_its_process"]
fn child_process_holding_a_cluster() {
    if std::env::var_os(CHILD_ENV).is_none() {
        return;
    }
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    let Some(server) = runtime.block_on(start_private(ClusterOptions::for_tests())) else {
        println!("NO_CLUSTER");
        return;
    };
    let log = server.log_path().expect("a local cluster has a log");
    println!("CLUSTER_DIR={}", log.parent().expect("log dir").display());
    println!("CLUSTER_URL={}", server.url());
    std::thread::sleep(Duration::from_secs(120));
}

#[cfg(target_os = "linux")]
#[tokio::test]
async fn cluster_dies_with_its_process() {
    let exe = std::env::current_exe().expect("test binary");
    let mut child = Command::new(exe)
        .args([
            "--exact",
            "child_process_holding_a_cluster",
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD_ENV, "1")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn child");
    let stdout = child.stdout.take().expect("stdout");
    // libtest prints the test's name on the same line as the first output.
    let lines = tokio::task::spawn_blocking(move || {
        let mut lines = Vec::new();
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            let done = line.contains("CLUSTER_URL=") || line.contains("NO_CLUSTER");
            lines.push(line);
            if done {
                break;
            }
        }
        lines
    })
    .await
    .expect("reader");
    if lines.iter().any(|l| l.contains("NO_CLUSTER")) {
        child.wait().ok();
        return;
    }
    let value_of = |key: &str| {
        lines
            .iter()
            .find_map(|l| l.split_once(key).map(|(_, v)| v.trim().to_owned()))
    };
    let url = value_of("CLUSTER_URL=").expect("the child printed its cluster URL");
    let dir = PathBuf::from(value_of("CLUSTER_DIR=").expect("the child printed its directory"));
    assert!(dir.exists());

    let conn = PgConnection::connect(&url)
        .await
        .expect("child's cluster is up");
    conn.close().await.ok();

    child.kill().expect("SIGKILL the child");
    child.wait().expect("reap the child");

    // No destructor ran; only the parent-death signal can stop the server.
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        if PgConnection::connect(&url).await.is_err() {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the cluster outlived its process"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    // Refusing connections is not the same as gone: the postmaster may
    // still be exiting (slowly on a loaded machine), and the sweep rightly
    // keeps the directory of a live server. Wait for the process itself.
    let postmaster: Option<i32> = std::fs::read_to_string(dir.join("data").join("postmaster.pid"))
        .ok()
        .and_then(|t| t.lines().next().and_then(|l| l.trim().parse().ok()));
    if let Some(pid) = postmaster {
        while std::path::Path::new(&format!("/proc/{pid}")).exists() {
            assert!(
                Instant::now() < deadline,
                "the postmaster {pid} outlived its process"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    // Its directory is left behind; the next cluster start sweeps it away
    // (another test of this binary starting a cluster meanwhile may already
    // have: that start is a next start too).
    let server = start_private(ClusterOptions::postgres_defaults())
        .await
        .expect("a local cluster, as the child got one");
    assert!(!dir.exists(), "stale {} was not swept", dir.display());
    drop(server);
}

const KEY_ENV: &str = "AWA_HARNESS_TEST_TEMPLATE_KEY";
const MARKER_ENV: &str = "AWA_HARNESS_TEST_INIT_MARKER";

/// Run by `processes_sharing_a_server_build_a_template_once` in several
/// child processes at once; does nothing when run directly.
#[test]
#[ignore = "helper for processes_sharing_a_server_build_a_template_once"]
fn child_process_building_a_template() {
    let (Some(key), Some(marker)) = (std::env::var_os(KEY_ENV), std::env::var_os(MARKER_ENV))
    else {
        return;
    };
    let key = key.into_string().expect("utf-8 key");
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    runtime.block_on(async move {
        let db = TestDb::new(&key, move |url| async move {
            use std::io::Write as _;
            let mut file = std::fs::OpenOptions::new()
                .append(true)
                .create(true)
                .open(marker)?;
            writeln!(file, "init ran in {}", std::process::id())?;
            tokio::time::sleep(Duration::from_millis(300)).await;
            create_widgets(url).await
        })
        .await
        .expect("TestDb::new in a child");
        assert_eq!(db.server().kind(), ServerKind::External);
        let pool = db.pool().await.expect("pool");
        let rows: i64 = sqlx::query_scalar("select count(*) from widgets")
            .fetch_one(&pool)
            .await
            .expect("widgets");
        assert_eq!(rows, 1);
        pool.close().await;
    });
    println!("CHILD_OK");
}

#[tokio::test]
async fn processes_sharing_a_server_build_a_template_once() {
    // The children reach the server through DATABASE_URL, as processes
    // sharing a CI database would.
    let server = match start_private(ClusterOptions::for_tests()).await {
        Some(server) => server,
        None => PgServer::shared().await.expect("server"),
    };
    let key = unique_key("cross-process");
    let scratch = tempfile::tempdir().expect("scratch dir");
    let marker = scratch.path().join("init-calls");
    let exe = std::env::current_exe().expect("test binary");

    let children: Vec<_> = (0..3)
        .map(|_| {
            Command::new(&exe)
                .args([
                    "--exact",
                    "child_process_building_a_template",
                    "--ignored",
                    "--nocapture",
                    "--test-threads=1",
                ])
                .env("DATABASE_URL", server.url())
                .env(KEY_ENV, &key)
                .env(MARKER_ENV, &marker)
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .expect("spawn child")
        })
        .collect();
    for child in children {
        let output = tokio::task::spawn_blocking(move || child.wait_with_output())
            .await
            .expect("join")
            .expect("child output");
        let stdout = String::from_utf8_lossy(&output.stdout);
        assert!(
            output.status.success() && stdout.contains("CHILD_OK"),
            "child failed: {stdout}\n{}",
            String::from_utf8_lossy(&output.stderr)
        );
    }

    let calls = std::fs::read_to_string(&marker).expect("marker");
    assert_eq!(
        calls.lines().count(),
        1,
        "init ran more than once:\n{calls}"
    );
    server.drop_template(&key).await.expect("drop template");
}

#[tokio::test]
async fn a_half_built_template_from_a_dead_process_is_replaced() {
    let server = PgServer::shared().await.expect("server");
    let key = unique_key("half-built");
    let building = format!("{}_building", template_name(&key));
    // What a process killed between marking and renaming would leave.
    let mut conn = PgConnection::connect(&server.url_for("postgres"))
        .await
        .expect("admin connection");
    sqlx::query(sqlx::AssertSqlSafe(format!(
        "create database {} template template0 is_template true",
        awa_harness::quote_ident(&building)
    )))
    .execute(&mut conn)
    .await
    .expect("create the leftover");
    conn.close().await.ok();

    let db = TestDb::new(&key, create_widgets).await.expect("db");
    let pool = db.pool().await.expect("pool");
    let rows: i64 = sqlx::query_scalar("select count(*) from widgets")
        .fetch_one(&pool)
        .await
        .expect("widgets");
    assert_eq!(rows, 1);
    pool.close().await;
    assert!(!database_exists(&server, &building).await);

    drop(db);
    server.drop_template(&key).await.expect("drop template");
}
