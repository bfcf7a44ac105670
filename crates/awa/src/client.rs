//! The producer side: inserting typed or untyped jobs, in the caller's
//! transaction or on the pool.

use crate::middleware::{Chain, EnqueueNext, Middleware, Path};
use crate::{Error, InsertOpts, Job, job::new_job};
use awa_core::{JobId, JobSelection, NewJob, SchemaName};
use awa_ready::{PgReadyPlane, ReadyPlane};
use sqlx::pool::PoolConnection;
use sqlx::{Acquire, PgPool, Postgres};
use std::sync::Arc;
use std::time::Duration;

/// What one insert did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct Inserted {
    /// The new job's id, or, when its unique key was taken, the id of the
    /// live job holding the key.
    pub id: JobId,
    /// False when the unique key was already held (nothing was inserted).
    pub inserted: bool,
    /// True when the job waits for its `run_at`.
    pub scheduled: bool,
}

impl From<awa_ready::Enqueued> for Inserted {
    fn from(e: awa_ready::Enqueued) -> Self {
        Self {
            id: e.job_id,
            inserted: e.inserted,
            scheduled: e.scheduled,
        }
    }
}

/// A handle on an Awa database: inserts jobs, and, when built with
/// [`Client::builder`] and started, runs workers and a maintenance-leader
/// candidate until [`Client::shutdown`].
///
/// By default a client follows the storage routing (which substrate
/// receives new work, and which ones workers read, as the transition
/// state in the database says: see `awa_control::routing`); one made with
/// [`Client::with_schema`] is pinned to one substrate.
///
/// Cloning is cheap; clones share the pool and the running workers.
///
/// A job inserted on the caller's transaction exists exactly when the
/// transaction commits:
///
/// ```
/// # #[tokio::main]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// # let db = awa::testing::test_db().await?;
/// # let pool = db.pool().await?;
/// use awa::{Client, JobState};
///
/// #[derive(serde::Serialize, serde::Deserialize, awa::Job)]
/// #[awa(queue = "email")]
/// struct SendWelcome { user_id: i64 }
///
/// let client = Client::new(pool.clone());
///
/// let mut tx = pool.begin().await?;
/// let gone = client.insert(&mut *tx, &SendWelcome { user_id: 1 }).await?;
/// tx.rollback().await?;
/// assert!(client.job(gone.id).await?.is_none());
///
/// let mut tx = pool.begin().await?;
/// // ... the application's own writes on `tx` ...
/// let kept = client.insert(&mut *tx, &SendWelcome { user_id: 2 }).await?;
/// tx.commit().await?;
/// let job = client.job(kept.id).await?.expect("committed");
/// assert_eq!(job.state, JobState::Available);
/// assert_eq!(job.args, serde_json::json!({ "user_id": 2 }));
///
/// assert_eq!(client.cancel(kept.id).await?.as_deref(), Some("available"));
/// assert_eq!(client.job(kept.id).await?.expect("kept").state, JobState::Cancelled);
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone)]
pub struct Client {
    pub(crate) pool: PgPool,
    pub(crate) target: Target,
    pub(crate) runtime: Option<Arc<crate::builder::Runtime>>,
    /// For a pool made by [`Client::connect`] from a host list: what moves
    /// it to the new primary after a failover, as long as a client (or a
    /// builder from [`Client::to_builder`]) holds it.
    pub(crate) watch: Option<Arc<awa_maint::connect::Watch>>,
    /// Wraps every insert (outermost first); empty: inserts go straight
    /// to the producer.
    pub(crate) middleware: Chain,
}

/// Where a client's work goes.
#[derive(Debug, Clone)]
pub(crate) enum Target {
    Pinned(SchemaName),
    /// The routing as last read, and when: re-read when older than
    /// `awa_control::routing::REFRESH`. Only a hint for producers (SQL
    /// routes every insert again); for reads (`job`, `cancel`) it says
    /// which substrates to look in.
    Routed(Arc<std::sync::Mutex<(awa_core::Routing, Option<std::time::Instant>)>>),
}

impl Target {
    pub(crate) fn routed() -> Self {
        Self::Routed(Arc::new(std::sync::Mutex::new((
            awa_core::Routing::default(),
            None,
        ))))
    }
}

/// How long connecting may take before [`Client::connect`] gives up.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

impl Client {
    /// A producer-only client on `pool`, following the storage routing.
    pub fn new(pool: PgPool) -> Self {
        Self {
            pool,
            target: Target::routed(),
            runtime: None,
            watch: None,
            middleware: Chain::default(),
        }
    }

    /// A producer-only client pinned to substrate `schema`, whatever the
    /// routing says: for tests and for a substrate used on its own. Jobs
    /// inserted here run only on workers that serve `schema`.
    pub fn with_schema(pool: PgPool, schema: SchemaName) -> Self {
        Self {
            pool,
            target: Target::Pinned(schema),
            runtime: None,
            watch: None,
            middleware: Chain::default(),
        }
    }

    /// Connect a pool of up to `max_connections` to `url` (a `postgres://`
    /// URL; `sslmode`, `sslrootcert`, host lists and
    /// `target_session_attrs` as libpq understands them) and check the
    /// database is migrated to a schema this client can use.
    ///
    /// From a host list (`postgres://h1:5432,h2:5432/app?target_session_attrs=read-write`)
    /// the pool follows a failover to the new primary while this client,
    /// a clone of it or a builder from [`Client::to_builder`] is alive.
    pub async fn connect(url: &str, max_connections: u32) -> Result<Self, Error> {
        let (pool, watch) = connect_pool(url, max_connections).await?;
        let mut client = Self::new(pool);
        client.watch = watch.is_active().then(|| Arc::new(watch));
        client.check_schema().await?;
        Ok(client)
    }

    /// This client with `middleware` wrapping every insert, inside any
    /// added before (see [`crate::middleware`] for the order and how
    /// errors pass). A worker's middleware is added on its
    /// [`crate::ClientBuilder::middleware`] instead, which wraps both its
    /// handlers and the started client's inserts.
    pub fn with_middleware(mut self, middleware: impl Middleware) -> Self {
        self.middleware = self.middleware.with(Arc::new(middleware));
        self
    }

    /// A worker client: add queues and handlers, then `start()`.
    pub fn builder(pool: PgPool) -> crate::ClientBuilder {
        crate::ClientBuilder::new(pool)
    }

    /// A worker builder on this client's pool, pinned like this client,
    /// that keeps following a failover as this client does (a pool from
    /// [`Client::connect`] with a host list).
    pub fn to_builder(&self) -> crate::ClientBuilder {
        let mut builder = crate::ClientBuilder::new(self.pool.clone());
        builder.watch = self.watch.clone();
        builder.middleware = self.middleware.clone();
        match &self.target {
            Target::Pinned(schema) => builder.schema(schema.clone()),
            Target::Routed(_) => builder,
        }
    }

    /// The pool this client works on: pass it to an insert to commit the
    /// job at once, outside any transaction of yours.
    pub fn pool(&self) -> &PgPool {
        &self.pool
    }

    /// The substrate new work goes to: the pinned one, or the write
    /// substrate of the routing as last read.
    pub fn schema(&self) -> SchemaName {
        match &self.target {
            Target::Pinned(schema) => schema.clone(),
            Target::Routed(hint) => hint.lock().expect("routing hint").0.write().clone(),
        }
    }

    /// The routing this client works by: pinned, or read from the
    /// database when the last read is older than
    /// `awa_control::routing::REFRESH` (on `conn`, so inside the caller's
    /// transaction when it is one).
    pub(crate) async fn routing(
        &self,
        conn: &mut sqlx::PgConnection,
    ) -> Result<awa_core::Routing, Error> {
        let hint = match &self.target {
            Target::Pinned(schema) => return Ok(awa_core::Routing::fixed(schema.clone())),
            Target::Routed(hint) => hint,
        };
        {
            let cached = hint.lock().expect("routing hint");
            if cached
                .1
                .is_some_and(|at| at.elapsed() < awa_control::routing::REFRESH)
            {
                return Ok(cached.0.clone());
            }
        }
        let routing = awa_control::routing::read(conn).await?;
        *hint.lock().expect("routing hint") = (routing.clone(), Some(std::time::Instant::now()));
        Ok(routing)
    }

    /// A pooled connection and the substrates the routing reads now (every
    /// one that may hold a job): what the by-id and by-selection
    /// operations run over.
    async fn reading(&self) -> Result<(PoolConnection<Postgres>, Vec<SchemaName>), Error> {
        let mut conn = self.pool.acquire().await?;
        let reads = self.routing(&mut conn).await?.reads();
        Ok((conn, reads))
    }

    /// The producer for this insert: pinned, or routed starting from the
    /// write substrate as last read.
    async fn producer(&self, conn: &mut sqlx::PgConnection) -> Result<PgReadyPlane, Error> {
        Ok(match &self.target {
            Target::Pinned(schema) => PgReadyPlane::new(schema.clone()),
            Target::Routed(_) => PgReadyPlane::routed(self.routing(conn).await?.write().clone()),
        })
    }

    /// Fail with a clear message when the database is not migrated (run
    /// `awa migrate` or `cargo xtask migrate`), is at an older schema
    /// version than this client (run `awa migrate` with this release), or
    /// was migrated by a newer release.
    pub async fn check_schema(&self) -> Result<(), Error> {
        let mut conn = self.pool.acquire().await?;
        awa_maint::migrate::require_current(&mut conn).await?;
        Ok(())
    }

    /// Insert one typed job with its type's defaults: on a transaction
    /// (`&mut tx`: visible when it commits, gone if it rolls back), a
    /// connection, or the pool (`client.pool()`: committed at once).
    pub async fn insert<'c, A, J>(&self, conn: A, job: &J) -> Result<Inserted, Error>
    where
        A: Acquire<'c, Database = Postgres>,
        J: Job,
    {
        self.insert_with(conn, job, InsertOpts::default()).await
    }

    /// Insert one typed job with options over its type's defaults.
    pub async fn insert_with<'c, A, J>(
        &self,
        conn: A,
        job: &J,
        opts: InsertOpts,
    ) -> Result<Inserted, Error>
    where
        A: Acquire<'c, Database = Postgres>,
        J: Job,
    {
        let new = new_job(job, opts)?;
        let mut done = self.insert_raw(conn, std::slice::from_ref(&new)).await?;
        Ok(done.pop().expect("one result per job"))
    }

    /// Insert many typed jobs in one round trip (the array path); results
    /// in input order.
    pub async fn insert_many<'c, A, J>(&self, conn: A, jobs: &[J]) -> Result<Vec<Inserted>, Error>
    where
        A: Acquire<'c, Database = Postgres>,
        J: Job,
    {
        let new = typed_batch(jobs)?;
        self.insert_raw(conn, &new).await
    }

    /// Insert a large batch through COPY (worth it from about a thousand
    /// jobs): the same outcome as [`Client::insert_many`]. Runs in a
    /// savepoint when `conn` is a transaction. Needs PostgreSQL's default
    /// TEMPORARY privilege on the database.
    pub async fn insert_many_copy<'c, A, J>(
        &self,
        conn: A,
        jobs: &[J],
    ) -> Result<Vec<Inserted>, Error>
    where
        A: Acquire<'c, Database = Postgres>,
        J: Job,
    {
        let new = typed_batch(jobs)?;
        let mut conn = conn.acquire().await?;
        self.through_middleware(&mut conn, new, Path::Copy).await
    }

    /// Insert untyped jobs (any kind, JSON args) in one round trip.
    pub async fn insert_raw<'c, A>(&self, conn: A, jobs: &[NewJob]) -> Result<Vec<Inserted>, Error>
    where
        A: Acquire<'c, Database = Postgres>,
    {
        let mut conn = conn.acquire().await?;
        if self.middleware.is_empty() {
            return self.write(&mut conn, jobs, Path::Array).await;
        }
        self.through_middleware(&mut conn, jobs.to_vec(), Path::Array)
            .await
    }

    /// The insert, through the middleware when there is any.
    async fn through_middleware(
        &self,
        conn: &mut sqlx::PgConnection,
        jobs: Vec<NewJob>,
        path: Path,
    ) -> Result<Vec<Inserted>, Error> {
        if self.middleware.is_empty() {
            return self.write(conn, &jobs, path).await;
        }
        let sent = jobs.len();
        let done = EnqueueNext {
            rest: self.middleware.layers(),
            client: self,
            conn,
            path,
        }
        .run(jobs)
        .await?;
        // Callers rely on one result per job, in order.
        if done.len() != sent {
            return Err(Error::Middleware(format!(
                "an enqueue middleware returned {} results for {sent} jobs; return what next.run gives (one per job, in order)",
                done.len()
            )));
        }
        Ok(done)
    }

    /// The insert itself, after every middleware: the producer writes.
    pub(crate) async fn write(
        &self,
        conn: &mut sqlx::PgConnection,
        jobs: &[NewJob],
        path: Path,
    ) -> Result<Vec<Inserted>, Error> {
        let producer = self.producer(conn).await?;
        let done = match path {
            Path::Array => producer.enqueue(conn, jobs).await?,
            Path::Copy => producer.enqueue_copy(conn, jobs).await?,
        };
        count_enqueued(jobs, &done);
        Ok(done.into_iter().map(Inserted::from).collect())
    }

    /// One job as the read views show it (any state), or None.
    pub async fn job(&self, id: JobId) -> Result<Option<awa_history::JobView>, Error> {
        // Ids are database-wide: the first substrate that knows it.
        let (mut conn, reads) = self.reading().await?;
        Ok(awa_history::job_in(&mut conn, &reads, id).await?)
    }

    /// Cancel a job wherever it is (waiting, scheduled or running: a
    /// running attempt's result is then rejected, and its handler sees
    /// `is_cancelled()` at its next heartbeat). Returns the state it was
    /// cancelled from, or None when it was unknown or already finished.
    pub async fn cancel(&self, id: JobId) -> Result<Option<String>, Error> {
        let (mut conn, reads) = self.reading().await?;
        Ok(awa_exec::cancel_in(&mut conn, &reads, id).await?)
    }

    /// Put a failed or cancelled job back as fresh work: the same id, its
    /// attempts start again and its attempt history is kept, whether or
    /// not its queue dead-letters (dead letters: the DLQ's own retry).
    /// Returns what happened (`matched == 0`: no failure of that job is
    /// kept; `kept`: a newer unfinished job holds its unique key), or None
    /// when no substrate keeps a failure of that job.
    pub async fn retry(&self, id: JobId) -> Result<Option<awa_history::Retried>, Error> {
        let (mut conn, reads) = self.reading().await?;
        Ok(awa_history::retry_in(&mut conn, &reads, id).await?)
    }

    /// Put back every failed or cancelled job `selection` names (its
    /// `state` must be failed or cancelled), or with `dry_run` only count
    /// them. Failures recorded after the call began are left alone.
    pub async fn retry_matching(
        &self,
        selection: &JobSelection,
        dry_run: bool,
    ) -> Result<awa_history::Retried, Error> {
        let (mut conn, reads) = self.reading().await?;
        Ok(awa_history::retry_matching(&mut conn, &reads, selection, dry_run).await?)
    }

    /// Cancel every unfinished job `selection` names (any unfinished
    /// state, or the one it names), or with `dry_run` only count them.
    pub async fn cancel_matching(
        &self,
        selection: &JobSelection,
        dry_run: bool,
    ) -> Result<awa_exec::BulkCancelled, Error> {
        let (mut conn, reads) = self.reading().await?;
        Ok(awa_exec::cancel_matching(&mut conn, &reads, selection, dry_run).await?)
    }

    /// Stop the workers started by [`crate::ClientBuilder::start`]: no new
    /// claims; in-flight jobs get up to `grace` to finish, buffered and
    /// unfinished ones are released to run again (never lost); then the
    /// maintenance candidate stops and the process leaves the runtime
    /// registry. Returns the worker's counters. A producer-only client has
    /// nothing to stop and returns zeros.
    pub async fn shutdown(
        &self,
        grace: Duration,
    ) -> Result<awa_exec::worker::StatsSnapshot, Error> {
        awa_core::bounds::SHUTDOWN_GRACE.check(grace)?;
        match &self.runtime {
            Some(rt) => rt.shutdown(&self.pool, grace).await,
            None => Ok(Default::default()),
        }
    }

    /// The running worker's live counters (None for a producer-only client).
    pub fn stats(&self) -> Option<awa_exec::worker::StatsSnapshot> {
        self.runtime.as_ref().map(|rt| rt.stats.snapshot())
    }
}

fn typed_batch<J: Job>(jobs: &[J]) -> Result<Vec<NewJob>, Error> {
    jobs.iter()
        .map(|j| new_job(j, InsertOpts::default()))
        .collect()
}

/// A pool of up to `max_connections` to `url`, connected the way
/// [`Client::connect`] connects (a `postgres://` URL, `sslmode` and
/// `sslrootcert` as libpq reads them, host lists tried in order, errors that
/// never show the password), without the schema check: pass it to
/// [`Client::builder`], whose `start` checks the schema. This pool does not
/// move to a new primary after a failover of a host list by itself: use
/// [`Client::connect`] (and [`Client::to_builder`] for workers) for that.
pub async fn connect(url: &str, max_connections: u32) -> Result<PgPool, Error> {
    connect_pool(url, max_connections)
        .await
        .map(|(pool, _watch)| pool)
}

/// A pool for `url`, with a bounded connect time, and its failover watch
/// (`awa_maint::connect`). Errors never quote the URL's password.
pub(crate) async fn connect_pool(
    url: &str,
    max_connections: u32,
) -> Result<(PgPool, awa_maint::connect::Watch), Error> {
    // Checked as libpq reads URLs (scheme, sslmode, sslrootcert, host
    // lists), with a message that never holds the password.
    let info =
        awa_core::conninfo::connect_options(url).map_err(|err| Error::Connect(err.to_string()))?;
    let options = sqlx::postgres::PgPoolOptions::new()
        .max_connections(max_connections.max(1))
        .acquire_timeout(CONNECT_TIMEOUT);
    awa_maint::connect::pool(&info, options)
        .await
        // The driver may quote part of the URL back: scrub its secrets.
        .map_err(|err| {
            Error::Connect(format!(
                "{}: {} (check the host, port, credentials and sslmode)",
                awa_core::redact::redact_conninfo(url),
                awa_core::redact::scrub(&err.to_string(), url)
            ))
        })
}

/// `awa_jobs_enqueued_total`: jobs this process inserted (not those whose
/// unique key was held), counted when the call returns: on a transaction
/// the caller later rolls back they are counted all the same.
fn count_enqueued(jobs: &[NewJob], done: &[awa_ready::Enqueued]) {
    if awa_exec::metrics::enabled() {
        for (job, e) in jobs.iter().zip(done) {
            if e.inserted {
                awa_exec::metrics::enqueued(job.queue.as_str(), &job.kind);
            }
        }
    }
}
