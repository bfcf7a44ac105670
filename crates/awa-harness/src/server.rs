use std::collections::HashSet;
use std::fmt;
use std::path::Path;
use std::sync::{Arc, Weak};

use sqlx::postgres::PgConnection;

use crate::error::sqlstate;
use crate::local::LocalCluster;
use crate::sql::{self, CONNECT_TIMEOUT};
use crate::{HarnessError, docker};

/// Settings a shared test cluster runs with: durability off (the data is
/// thrown away anyway) and room for many parallel tests' pools.
pub const TEST_SETTINGS: &[(&str, &str)] = &[
    ("fsync", "off"),
    ("synchronous_commit", "off"),
    ("full_page_writes", "off"),
    ("max_connections", "400"),
    ("shared_buffers", "128MB"),
];

/// Where a [`PgServer`] came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ServerKind {
    /// Named by `DATABASE_URL`; someone else runs it and we never stop it.
    External,
    /// A temporary cluster we started from local server binaries.
    LocalCluster,
    /// A container started through testcontainers (`docker` feature).
    Docker,
}

/// How to start a temporary cluster.
///
/// `Default` is [`ClusterOptions::for_tests`]. A benchmark that wants to
/// measure something closer to production uses
/// [`ClusterOptions::postgres_defaults`] plus its own
/// [`setting`](ClusterOptions::setting)s, and starts its own cluster with
/// [`PgServer::start`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClusterOptions {
    /// Passed to the server as `-c name=value`, in order; later entries win.
    pub settings: Vec<(String, String)>,
    /// Let [`PgServer::start`] return the `DATABASE_URL` server, when set,
    /// instead of starting a cluster. The settings are then not applied.
    pub use_database_url: bool,
}

impl Default for ClusterOptions {
    fn default() -> Self {
        Self::for_tests()
    }
}

impl ClusterOptions {
    /// [`TEST_SETTINGS`]: fast and not durable.
    pub fn for_tests() -> Self {
        Self {
            settings: TEST_SETTINGS
                .iter()
                .map(|&(k, v)| (k.to_owned(), v.to_owned()))
                .collect(),
            use_database_url: false,
        }
    }

    /// PostgreSQL's own defaults, nothing changed.
    pub fn postgres_defaults() -> Self {
        Self {
            settings: Vec::new(),
            use_database_url: false,
        }
    }

    /// Sets `name` to `value`, replacing an earlier value for the same name.
    pub fn setting(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        let name = name.into();
        self.settings.retain(|(n, _)| *n != name);
        self.settings.push((name, value.into()));
        self
    }

    pub fn use_database_url(mut self, yes: bool) -> Self {
        self.use_database_url = yes;
        self
    }

    /// Settings with duplicates resolved (last one wins), in first-seen order.
    pub(crate) fn effective_settings(&self) -> Vec<(String, String)> {
        let mut out: Vec<(String, String)> = Vec::new();
        for (name, value) in &self.settings {
            match out.iter_mut().find(|(n, _)| n == name) {
                Some(slot) => slot.1.clone_from(value),
                None => out.push((name.clone(), value.clone())),
            }
        }
        out
    }
}

/// How [`PgServer::start_standby`] makes a standby.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StandbyOptions {
    /// Listen on this port (say, a dead primary's, so a URL's host list
    /// still names every server); a free one when `None`.
    pub port: Option<u16>,
    /// Make the primary wait for this standby at every commit
    /// (`synchronous_standby_names` names it; with `synchronous_commit=on`
    /// a commit is acknowledged only once the standby has flushed it). The
    /// standby's own copy of the setting stays empty, so after a promotion
    /// it does not wait for a standby it does not have.
    pub synchronous: bool,
}

/// A running PostgreSQL server. Cheap to clone; a temporary cluster or
/// container is stopped and removed when the last clone (including those
/// held by [`crate::TestDb`]s) drops.
#[derive(Clone)]
pub struct PgServer {
    pub(crate) inner: Arc<ServerInner>,
}

impl fmt::Debug for PgServer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.inner.fmt(f)
    }
}

pub(crate) struct ServerInner {
    kind: ServerKind,
    url: String,
    admin_url: String,
    settings: Vec<(String, String)>,
    bin_dir: Option<std::path::PathBuf>,
    /// Templates known to be complete on this server. Also the lock that
    /// serialises template builds within this process.
    pub(crate) templates: tokio::sync::Mutex<HashSet<String>>,
    // Dropped last among the fields that matter: stopping the server is
    // what this field's destructor does.
    backend: Backend,
}

enum Backend {
    External,
    Local(LocalCluster),
    // Held only so that its destructor removes the container.
    #[allow(dead_code)]
    Docker(docker::DockerPg),
}

impl fmt::Debug for ServerInner {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut d = f.debug_struct("PgServer");
        d.field("kind", &self.kind)
            .field("url", &sql::redact(&self.url))
            .field("settings", &self.settings)
            .field("bin_dir", &self.bin_dir);
        if let Backend::Local(cluster) = &self.backend {
            d.field("cluster", cluster);
        }
        d.finish_non_exhaustive()
    }
}

// Concurrent callers of `shared()` must get the same server, and one that
// nobody holds any more must go away, hence a Weak behind an async lock held
// across startup (so a second caller waits instead of starting a second
// cluster). tokio's Mutex is not tied to a runtime, which matters because
// every #[tokio::test] has its own.
static SHARED: tokio::sync::Mutex<Weak<ServerInner>> = tokio::sync::Mutex::const_new(Weak::new());

impl PgServer {
    /// The process-wide server: `DATABASE_URL` if set, else a temporary
    /// cluster with [`TEST_SETTINGS`], else Docker (`docker` feature).
    /// Concurrent and overlapping callers share one server.
    pub async fn shared() -> Result<PgServer, HarnessError> {
        let mut slot = SHARED.lock().await;
        if let Some(inner) = slot.upgrade() {
            return Ok(PgServer { inner });
        }
        let server = discover(&ClusterOptions::for_tests().use_database_url(true)).await?;
        *slot = Arc::downgrade(&server.inner);
        Ok(server)
    }

    /// A private server nobody else gets: a new temporary cluster (or
    /// container) started with `opts`. Ignores `DATABASE_URL` unless
    /// `opts.use_database_url` is set.
    pub async fn start(opts: ClusterOptions) -> Result<PgServer, HarnessError> {
        discover(&opts).await
    }

    /// URL of the server's default database: `DATABASE_URL` as given for an
    /// external server, the `postgres` database otherwise.
    pub fn url(&self) -> &str {
        &self.inner.url
    }

    /// URL of another database on the same server.
    pub fn url_for(&self, database: &str) -> String {
        sql::replace_database(&self.inner.url, database)
    }

    pub fn kind(&self) -> ServerKind {
        self.inner.kind
    }

    /// The settings the server was started with (empty for an external
    /// server, whose settings are not ours).
    pub fn settings(&self) -> &[(String, String)] {
        &self.inner.settings
    }

    /// Directory of the server binaries of a local cluster, for tools such as
    /// `pg_test_fsync` or `pgbench`.
    pub fn bin_dir(&self) -> Option<&Path> {
        self.inner.bin_dir.as_deref()
    }

    /// The server log of a local cluster. It lives in the cluster's
    /// temporary directory and goes away with it.
    pub fn log_path(&self) -> Option<&Path> {
        match &self.inner.backend {
            Backend::Local(cluster) => Some(cluster.log_path()),
            _ => None,
        }
    }

    /// Whether [`PgServer::restart_immediate`] can restart this server: only
    /// a temporary local cluster, never `DATABASE_URL`'s or a container.
    pub fn can_restart(&self) -> bool {
        matches!(self.inner.backend, Backend::Local(_))
    }

    /// Crashes and restarts a temporary local cluster the way
    /// `pg_ctl restart -m immediate` does: every backend dies at once
    /// without a checkpoint, a new postmaster on the same port runs crash
    /// recovery, and this returns once it accepts connections. Clients see
    /// their connections break and must reconnect.
    ///
    /// Meant for a cluster the caller owns ([`PgServer::start`]): restarting
    /// the [`shared`](PgServer::shared) one breaks every test using it.
    /// Transactions survive only if they were flushed: start the cluster with
    /// `synchronous_commit=on` (not [`TEST_SETTINGS`]' `off`) when the test
    /// counts committed work across the restart.
    pub async fn restart_immediate(&self) -> Result<(), HarnessError> {
        match &self.inner.backend {
            Backend::Local(cluster) => cluster.restart_immediate(&self.inner.settings).await,
            _ => Err(HarnessError::NotRestartable(self.inner.kind)),
        }
    }

    /// The port of a temporary local cluster.
    pub fn port(&self) -> Option<u16> {
        match &self.inner.backend {
            Backend::Local(cluster) => Some(cluster.port()),
            _ => None,
        }
    }

    /// A streaming standby of this temporary local cluster, made with
    /// `pg_basebackup -R` and run with the same settings (see
    /// [`StandbyOptions`]). Returns once the standby accepts read-only
    /// connections and streams from this server (and, when
    /// `synchronous`, once this server waits for it at every commit).
    ///
    /// The primary must run with `full_page_writes=on` (not
    /// [`TEST_SETTINGS`]' `off`): a base backup taken without full-page
    /// images cannot be recovered.
    pub async fn start_standby(&self, opts: StandbyOptions) -> Result<PgServer, HarnessError> {
        let Backend::Local(primary) = &self.inner.backend else {
            return Err(HarnessError::NotLocal {
                kind: self.inner.kind,
                action: "make a standby of",
            });
        };
        if self
            .inner
            .settings
            .iter()
            .any(|(k, v)| k == "full_page_writes" && v == "off")
        {
            return Err(HarnessError::ClusterStart(
                "a standby needs its primary to run with full_page_writes=on \
                 (ClusterOptions::setting(\"full_page_writes\", \"on\"))"
                    .into(),
            ));
        }
        // The standby's walreceiver reports `cluster_name` as its
        // application name, which names it in synchronous_standby_names.
        let name = match opts.port {
            Some(port) => format!("awa_standby_{port}"),
            None => format!("awa_standby_{}", rand::random::<u32>()),
        };
        let mut settings = self.inner.settings.clone();
        settings.retain(|(k, _)| k != "cluster_name");
        settings.push(("cluster_name".into(), name.clone()));
        let cluster = LocalCluster::start_standby(primary, &settings, opts.port).await?;
        let url = cluster.url();
        let standby = PgServer::from_parts(
            ServerKind::LocalCluster,
            url.clone(),
            url,
            settings,
            self.inner.bin_dir.clone(),
            Backend::Local(cluster),
        );
        probe(&standby).await?;

        let mut conn = self.admin_connect().await?;
        let result = async {
            if opts.synchronous {
                // ALTER SYSTEM takes no parameters; the name is ours
                // (letters, digits, underscore).
                // Two statements: ALTER SYSTEM refuses to run in the
                // implicit transaction of a multi-statement string.
                sqlx::raw_sql(sqlx::AssertSqlSafe(format!(
                    "ALTER SYSTEM SET synchronous_standby_names = '\"{name}\"'"
                )))
                .execute(&mut conn)
                .await
                .map_err(|e| HarnessError::db("requiring the standby to confirm commits", e))?;
                sqlx::query("SELECT pg_reload_conf()")
                    .execute(&mut conn)
                    .await
                    .map_err(|e| HarnessError::db("reloading the configuration", e))?;
            }
            let want = if opts.synchronous { "sync" } else { "async" };
            let deadline = std::time::Instant::now() + CONNECT_TIMEOUT;
            loop {
                let state: Option<String> = sqlx::query_scalar(
                    "SELECT sync_state FROM pg_stat_replication \
                     WHERE application_name = $1 AND state = 'streaming'",
                )
                .bind(&name)
                .fetch_optional(&mut conn)
                .await
                .map_err(|e| HarnessError::db("reading pg_stat_replication", e))?;
                if state.as_deref() == Some(want) {
                    return Ok(());
                }
                if std::time::Instant::now() >= deadline {
                    return Err(HarnessError::ClusterStart(format!(
                        "the standby on port {:?} did not stream as {want} within {} s \
                         (pg_stat_replication says {state:?})",
                        standby.port(),
                        CONNECT_TIMEOUT.as_secs()
                    )));
                }
                tokio::time::sleep(std::time::Duration::from_millis(50)).await;
            }
        }
        .await;
        crate::testdb::close_quietly(conn).await;
        result.map(|()| standby)
    }

    /// SIGKILL of this temporary local cluster's postmaster: it stays down
    /// (no restart, no shutdown checkpoint), as when its machine dies.
    /// Clients see their connections break; connecting is refused.
    pub fn kill(&self) -> Result<(), HarnessError> {
        match &self.inner.backend {
            Backend::Local(cluster) => {
                cluster.kill();
                Ok(())
            }
            _ => Err(HarnessError::NotLocal {
                kind: self.inner.kind,
                action: "kill",
            }),
        }
    }

    /// `pg_ctl promote` of a standby made by [`PgServer::start_standby`]:
    /// returns once it is out of recovery and accepts writes. Whatever the
    /// old primary committed and the standby had not received is gone.
    pub async fn promote(&self) -> Result<(), HarnessError> {
        let Backend::Local(cluster) = &self.inner.backend else {
            return Err(HarnessError::NotLocal {
                kind: self.inner.kind,
                action: "promote",
            });
        };
        cluster.promote().await?;
        let mut conn = self.admin_connect().await?;
        let in_recovery: Result<bool, _> = sqlx::query_scalar("SELECT pg_is_in_recovery()")
            .fetch_one(&mut conn)
            .await;
        crate::testdb::close_quietly(conn).await;
        match in_recovery {
            Ok(false) => Ok(()),
            Ok(true) => Err(HarnessError::ClusterStart(
                "pg_ctl promote returned but the server is still in recovery".into(),
            )),
            Err(e) => Err(HarnessError::db("checking the promotion", e)),
        }
    }

    /// Drops the template database made for `template_key`, e.g. after a
    /// test on a long-lived external server. Nobody may be cloning from it at
    /// the same time.
    pub async fn drop_template(&self, template_key: &str) -> Result<(), HarnessError> {
        let name = crate::template_name(template_key);
        let mut ready = self.inner.templates.lock().await;
        let mut conn = self.admin_connect().await?;
        let result = crate::testdb::drop_any_database(&mut conn, &name).await;
        ready.remove(&name);
        crate::testdb::close_quietly(conn).await;
        result
    }

    /// A connection to the admin database, where databases are created and
    /// template builds are serialised with advisory locks.
    pub(crate) async fn admin_connect(&self) -> Result<PgConnection, HarnessError> {
        sql::connect(&self.inner.admin_url, CONNECT_TIMEOUT)
            .await
            .map_err(|e| {
                HarnessError::db(
                    format!(
                        "connecting to the admin database at {}",
                        sql::redact(&self.inner.admin_url)
                    ),
                    e,
                )
            })
    }

    fn from_parts(
        kind: ServerKind,
        url: String,
        admin_url: String,
        settings: Vec<(String, String)>,
        bin_dir: Option<std::path::PathBuf>,
        backend: Backend,
    ) -> Self {
        PgServer {
            inner: Arc::new(ServerInner {
                kind,
                url,
                admin_url,
                settings,
                bin_dir,
                templates: tokio::sync::Mutex::new(HashSet::new()),
                backend,
            }),
        }
    }
}

async fn discover(opts: &ClusterOptions) -> Result<PgServer, HarnessError> {
    let mut attempts = Vec::new();

    if opts.use_database_url {
        match std::env::var("DATABASE_URL") {
            Ok(url) if !url.trim().is_empty() => return external(url.trim().to_owned()).await,
            _ => attempts.push("DATABASE_URL: not set".to_owned()),
        }
    } else {
        attempts.push("DATABASE_URL: not consulted (a private cluster was requested)".to_owned());
    }

    let settings = opts.effective_settings();
    let found = tokio::task::spawn_blocking(crate::bins::find_bin_dir)
        .await
        .unwrap_or_else(|e| Err(format!("the search panicked: {e}")));
    match found {
        // Binaries that are there but fail to start a cluster are a real
        // problem to report, not a reason to quietly try Docker.
        Ok(bin_dir) => return local(bin_dir, settings).await,
        Err(why) => attempts.push(format!("local server binaries: {why}")),
    }

    match docker::start(&settings).await {
        Ok(Some(pg)) => {
            let url = pg.url.clone();
            let server = PgServer::from_parts(
                ServerKind::Docker,
                url.clone(),
                url,
                settings,
                None,
                Backend::Docker(pg),
            );
            probe(&server).await?;
            return Ok(server);
        }
        Ok(None) => {
            attempts.push("docker: the `docker` feature of awa-harness is not enabled".into())
        }
        Err(why) => attempts.push(format!("docker: {why}")),
    }

    Err(HarnessError::NoServer { attempts })
}

async fn external(url: String) -> Result<PgServer, HarnessError> {
    // Advisory locks are per database, so every process sharing the server
    // must take them in the same one: `postgres`, unless it does not exist.
    let postgres_url = sql::replace_database(&url, "postgres");
    let admin_url = match sql::connect(&postgres_url, CONNECT_TIMEOUT).await {
        Ok(conn) => {
            crate::testdb::close_quietly(conn).await;
            postgres_url
        }
        Err(e) if sqlstate(&e).as_deref() == Some("3D000") => url.clone(),
        Err(e) => {
            return Err(HarnessError::db(
                format!("connecting to DATABASE_URL ({})", sql::redact(&url)),
                e,
            ));
        }
    };
    tracing::debug!(url = %sql::redact(&url), "using the external PostgreSQL server from DATABASE_URL");
    let server = PgServer::from_parts(
        ServerKind::External,
        url,
        admin_url,
        Vec::new(),
        None,
        Backend::External,
    );
    probe(&server).await?;
    Ok(server)
}

async fn local(
    bin_dir: std::path::PathBuf,
    settings: Vec<(String, String)>,
) -> Result<PgServer, HarnessError> {
    let cluster = LocalCluster::start(&bin_dir, &settings).await?;
    let url = cluster.url();
    let server = PgServer::from_parts(
        ServerKind::LocalCluster,
        url.clone(),
        url,
        settings,
        Some(bin_dir),
        Backend::Local(cluster),
    );
    probe(&server).await?;
    Ok(server)
}

async fn probe(server: &PgServer) -> Result<(), HarnessError> {
    let mut conn = server.admin_connect().await?;
    let result = sql::check_version(&mut conn, &server.inner.admin_url).await;
    crate::testdb::close_quietly(conn).await;
    result
}
