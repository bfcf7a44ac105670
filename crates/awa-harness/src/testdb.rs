//! Per-test databases cloned from once-built templates.

use std::future::Future;
use std::time::Duration;

use sha2::{Digest as _, Sha256};
use sqlx::Connection as _;
use sqlx::postgres::{PgConnection, PgPool, PgPoolOptions};

use crate::error::HarnessError;
use crate::sql::quote_ident;
use crate::{PgServer, sql};

/// SQLSTATE object_in_use: someone is still connected to a database we need
/// to rename, or to a template we clone from.
const OBJECT_IN_USE: &str = "55006";

/// Name of the template database built for `template_key`.
pub fn template_name(template_key: &str) -> String {
    format!(
        "awa_tpl_{}",
        &hex(&Sha256::digest(template_key.as_bytes()))[..16]
    )
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// A database of its own for one test, dropped when this value drops.
///
/// Holds its [`PgServer`], so a temporary cluster outlives every test
/// database on it. Set `AWA_KEEP_TEST_DB=1` to keep the database for
/// inspection; its URL is printed instead.
#[derive(Debug)]
pub struct TestDb {
    server: PgServer,
    name: String,
    url: String,
}

impl TestDb {
    /// A fresh database for one test, cloned from a template database that
    /// `init` has prepared once.
    ///
    /// `init` gets the URL of the template-to-be and should run the schema
    /// migrations there; it runs at most once per template key and server,
    /// even across processes sharing a `DATABASE_URL` server. Put a schema
    /// version or digest in `template_key` so a changed schema gets a new
    /// template.
    pub async fn new<F, Fut>(template_key: &str, init: F) -> Result<TestDb, HarnessError>
    where
        F: FnOnce(String) -> Fut,
        Fut: Future<Output = Result<(), Box<dyn std::error::Error + Send + Sync>>>,
    {
        let server = PgServer::shared().await?;
        Self::new_on(&server, template_key, init).await
    }

    /// Like [`TestDb::new`], on a given server (e.g. a benchmark's private
    /// cluster from [`PgServer::start`]).
    pub async fn new_on<F, Fut>(
        server: &PgServer,
        template_key: &str,
        init: F,
    ) -> Result<TestDb, HarnessError>
    where
        F: FnOnce(String) -> Fut,
        Fut: Future<Output = Result<(), Box<dyn std::error::Error + Send + Sync>>>,
    {
        let template = ensure_template(server, template_key, init).await?;
        Self::create(server, Some(&template)).await
    }

    /// A fresh, empty database (cloned from `template0`).
    pub async fn empty() -> Result<TestDb, HarnessError> {
        let server = PgServer::shared().await?;
        Self::empty_on(&server).await
    }

    /// Like [`TestDb::empty`], on a given server.
    pub async fn empty_on(server: &PgServer) -> Result<TestDb, HarnessError> {
        Self::create(server, None).await
    }

    pub fn url(&self) -> &str {
        &self.url
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn server(&self) -> &PgServer {
        &self.server
    }

    /// A pool on this database with at most 10 connections.
    pub async fn pool(&self) -> Result<PgPool, HarnessError> {
        PgPoolOptions::new()
            .max_connections(10)
            .acquire_timeout(sql::CONNECT_TIMEOUT)
            .connect(&self.url)
            .await
            .map_err(|e| HarnessError::db(format!("connecting to test database {}", self.name), e))
    }

    async fn create(server: &PgServer, template: Option<&str>) -> Result<TestDb, HarnessError> {
        let name = format!("awa_test_{:032x}", rand::random::<u128>());
        let template = template.unwrap_or("template0");
        let statement = format!(
            "create database {} template {}",
            quote_ident(&name),
            quote_ident(template)
        );
        let mut conn = server.admin_connect().await?;
        // Cloning fails while anyone is connected to the template. Templates
        // refuse connections, but a build or a drop in another process may
        // briefly be connected, so wait that out.
        let mut delay = Duration::from_millis(20);
        let mut attempts = 0;
        let result = loop {
            match exec(&mut conn, statement.clone(), "creating a test database").await {
                Err(e) if e.sqlstate().as_deref() == Some(OBJECT_IN_USE) && attempts < 10 => {
                    attempts += 1;
                    tokio::time::sleep(delay).await;
                    delay = (delay * 2).min(Duration::from_millis(500));
                }
                other => break other,
            }
        };
        // Every session on a test database runs with `jit = off`, as every
        // session Awa opens itself does (`awa_core::conninfo`). With JIT on,
        // PostgreSQL JIT-compiles reads of the read views over
        // never-analyzed ring partitions: seconds of server CPU per read of
        // `jobs`, even on an empty database (measured: one page of
        // `/api/jobs`, 8.9 s with JIT, milliseconds without). Tests stand in
        // for Awa's sessions with their own (the admin server on a test
        // pool, checks reading `jobs`); with JIT they were the suite's
        // slowest and starved their neighbours, and a `DROP DATABASE ..
        // WITH (FORCE)` waited for backends deep in LLVM. (A database's
        // settings are not copied from its template, hence here.)
        let result = match result {
            Ok(()) => {
                exec(
                    &mut conn,
                    format!("alter database {} set jit = off", quote_ident(&name)),
                    "configuring a test database",
                )
                .await
            }
            err => err,
        };
        close_quietly(conn).await;
        result?;
        let url = server.url_for(&name);
        tracing::debug!(database = %name, template, "created a test database");
        Ok(TestDb {
            server: server.clone(),
            name,
            url,
        })
    }
}

impl Drop for TestDb {
    fn drop(&mut self) {
        if std::env::var("AWA_KEEP_TEST_DB").is_ok_and(|v| v == "1") {
            eprintln!(
                "AWA_KEEP_TEST_DB=1: keeping test database {}",
                crate::sql::redact(&self.url)
            );
            if self.server.kind() == crate::ServerKind::LocalCluster {
                eprintln!(
                    "  (it is on a temporary cluster that goes away with this process; \
                     point DATABASE_URL at a lasting server to inspect it afterwards)"
                );
            }
            return;
        }
        // Drop may run inside a runtime (where we may not block on one) or
        // outside any (where there is none to use): a thread of our own with
        // its own runtime works in both. Joining it keeps the drop finished
        // before the test moves on, or the process exits.
        let server = self.server.clone();
        let name = self.name.clone();
        let spawned = std::thread::Builder::new()
            .name("awa-testdb-drop".into())
            .spawn(move || {
                let runtime = match tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                {
                    Ok(rt) => rt,
                    Err(e) => {
                        tracing::error!(database = %name, error = %e, "cannot build a runtime to drop the test database");
                        return;
                    }
                };
                if let Err(e) = runtime.block_on(drop_database(&server, &name)) {
                    tracing::error!(database = %name, error = %e, "could not drop the test database");
                }
            });
        match spawned {
            Ok(handle) => {
                if handle.join().is_err() {
                    tracing::error!(database = %self.name, "dropping the test database panicked");
                }
            }
            Err(e) => {
                tracing::error!(database = %self.name, error = %e, "cannot start a thread to drop the test database");
            }
        }
    }
}

async fn drop_database(server: &PgServer, name: &str) -> Result<(), HarnessError> {
    let mut conn = server.admin_connect().await?;
    let result = sqlx::query(sqlx::AssertSqlSafe(format!(
        "drop database if exists {} with (force)",
        quote_ident(name)
    )))
    .execute(&mut conn)
    .await
    .map(drop)
    .map_err(|e| HarnessError::db(format!("dropping {name}"), e));
    close_quietly(conn).await;
    result
}

/// Builds the template for `template_key` unless it exists; returns its name.
async fn ensure_template<F, Fut>(
    server: &PgServer,
    template_key: &str,
    init: F,
) -> Result<String, HarnessError>
where
    F: FnOnce(String) -> Fut,
    Fut: Future<Output = Result<(), Box<dyn std::error::Error + Send + Sync>>>,
{
    let template = template_name(template_key);
    // Held across the build: other tasks in this process wanting a template
    // wait here rather than piling up on the advisory lock with a
    // connection each.
    let mut ready = server.inner.templates.lock().await;
    if ready.contains(&template) {
        return Ok(template);
    }

    let mut conn = server.admin_connect().await?;
    let lock_key = advisory_key(&template);
    if let Err(e) = sqlx::query("select pg_advisory_lock($1)")
        .bind(lock_key)
        .execute(&mut conn)
        .await
    {
        close_quietly(conn).await;
        return Err(HarnessError::db("taking the template advisory lock", e));
    }

    let result = build_template_locked(server, &mut conn, &template, init).await;

    // Closing the session would release the lock too; unlocking first just
    // lets the next process in without waiting for the backend to exit.
    let _ = sqlx::query("select pg_advisory_unlock($1)")
        .bind(lock_key)
        .execute(&mut conn)
        .await;
    close_quietly(conn).await;

    result?;
    ready.insert(template.clone());
    Ok(template)
}

async fn build_template_locked<F, Fut>(
    server: &PgServer,
    conn: &mut PgConnection,
    template: &str,
    init: F,
) -> Result<(), HarnessError>
where
    F: FnOnce(String) -> Fut,
    Fut: Future<Output = Result<(), Box<dyn std::error::Error + Send + Sync>>>,
{
    // The final name only ever appears on a complete template (the rename is
    // the commit point), so its existence is all that needs checking.
    let exists: bool =
        sqlx::query_scalar("select exists(select 1 from pg_database where datname = $1)")
            .bind(template)
            .fetch_one(&mut *conn)
            .await
            .map_err(|e| HarnessError::db("looking up the template", e))?;
    if exists {
        return Ok(());
    }

    let building = format!("{template}_building");
    let building_q = quote_ident(&building);
    // Left behind by a process that died mid-build; we hold the lock, so
    // nobody is still working on it.
    drop_any_database(conn, &building).await?;
    exec(
        conn,
        format!("create database {building_q} template template0"),
        "creating the template database",
    )
    .await?;

    tracing::debug!(template, "initialising a template database");
    if let Err(source) = init(server.url_for(&building)).await {
        if let Err(e) = drop_any_database(conn, &building).await {
            tracing::warn!(error = %e, "could not drop a template whose init failed");
        }
        return Err(HarnessError::TemplateInit {
            template: template.to_owned(),
            source,
        });
    }

    // Nobody may connect to (and so change, or block clones of) the
    // template. Set before the rename so the final name never appears
    // without it, and so nobody new gets in while we wait for the rename.
    exec(
        conn,
        format!("alter database {building_q} with is_template true allow_connections false"),
        "marking the template",
    )
    .await?;
    // `init` may have left pooled connections behind; they would block the
    // rename and, later, every clone.
    let rename = format!(
        "alter database {building_q} rename to {}",
        quote_ident(template)
    );
    let mut attempts = 0;
    loop {
        sqlx::query(
            "select pg_terminate_backend(pid) from pg_stat_activity \
             where datname = $1 and pid <> pg_backend_pid()",
        )
        .bind(&building)
        .execute(&mut *conn)
        .await
        .map_err(|e| HarnessError::db("disconnecting sessions from the template", e))?;
        match exec(conn, rename.clone(), "renaming the finished template").await {
            Ok(()) => break,
            Err(e) if e.sqlstate().as_deref() == Some(OBJECT_IN_USE) && attempts < 100 => {
                attempts += 1;
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            Err(e) => return Err(e),
        }
    }
    tracing::debug!(template, "template database ready");
    Ok(())
}

/// Drops `name` if it exists, also when it is marked as a template (which
/// plain DROP DATABASE refuses) or has sessions.
pub(crate) async fn drop_any_database(
    conn: &mut PgConnection,
    name: &str,
) -> Result<(), HarnessError> {
    let is_template: Option<bool> =
        sqlx::query_scalar("select datistemplate from pg_database where datname = $1")
            .bind(name)
            .fetch_optional(&mut *conn)
            .await
            .map_err(|e| HarnessError::db(format!("looking up {name}"), e))?;
    let quoted = quote_ident(name);
    match is_template {
        None => return Ok(()),
        Some(true) => {
            exec(
                conn,
                format!("alter database {quoted} with is_template false"),
                &format!("un-templating {name}"),
            )
            .await?;
        }
        Some(false) => {}
    }
    exec(
        conn,
        format!("drop database if exists {quoted} with (force)"),
        &format!("dropping {name}"),
    )
    .await
}

async fn exec(
    conn: &mut PgConnection,
    statement: String,
    context: &str,
) -> Result<(), HarnessError> {
    sqlx::query(sqlx::AssertSqlSafe(statement))
        .execute(&mut *conn)
        .await
        .map(drop)
        .map_err(|e| HarnessError::db(context, e))
}

/// Advisory lock id for building `template`; namespaced so it is unlikely
/// to collide with locks the application itself takes.
fn advisory_key(template: &str) -> i64 {
    let digest = Sha256::digest(format!("awa-harness template {template}").as_bytes());
    let mut bytes = [0u8; 8];
    bytes.copy_from_slice(&digest[..8]);
    i64::from_be_bytes(bytes)
}

pub(crate) async fn close_quietly(conn: PgConnection) {
    if let Err(e) = conn.close().await {
        tracing::debug!(error = %e, "closing a connection failed");
    }
}
