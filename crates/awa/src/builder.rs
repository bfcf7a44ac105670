//! Workers: a builder for the queues, handlers, policies and hooks of one
//! process, and the running runtime it starts (dispatchers, completer,
//! LISTEN listener, heartbeats, a maintenance-leader candidate, and the
//! runtime registry entry).

use crate::handler::{JobHandler, Policies, Typed, WithPolicy};
use crate::middleware::{Chain, Middleware, Wrapped};
use crate::{Client, Error, Job, RetryPolicy};
use awa_core::{QueueName, SchemaName};
use awa_exec::worker::{Handler, JobEvent, Stats, StatsSnapshot, Worked, Worker, WorkerConfig};
use awa_maint::tasks::MaintSettings;
use sqlx::PgPool;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::{oneshot, watch};

type Hook = Arc<dyn Fn(&JobEvent) + Send + Sync>;

/// Builds a worker [`Client`]: queues to serve, a handler per job kind,
/// retry policies and lifecycle hooks; [`ClientBuilder::start`] runs it.
///
/// The maintenance leader runs by default: one candidate per process, of
/// which one per database leads. Without a leader somewhere, no retry,
/// scheduled or snoozed job ever becomes runnable again and abandoned
/// attempts are never rescued; opt out with
/// [`ClientBuilder::without_maintenance`] only when another process (for
/// example `awa maint run`) runs it.
pub struct ClientBuilder {
    pool: PgPool,
    /// Pinned to one substrate; None follows the storage routing.
    schema: Option<SchemaName>,
    queues: Vec<(String, usize)>,
    handlers: HashMap<String, Arc<dyn Handler>>,
    default_handler: Option<Arc<dyn Handler>>,
    policies: Policies,
    hooks: Vec<Hook>,
    maintenance: Option<MaintSettings>,
    shutdown_grace: Option<Duration>,
    claim_batch: Option<usize>,
    poll_interval: Option<Duration>,
    heartbeat_interval: Option<Duration>,
    cancel_grace: Option<Duration>,
    /// Each kind's default timeout (the worker's `kind_timeouts`).
    timeouts: HashMap<String, Duration>,
    /// Periodic jobs declared by this process, upserted at start.
    schedules: Vec<awa_control::cron::Schedule>,
    prune_schedules: bool,
    /// The first mistake made while building, reported by `start`.
    error: Option<Error>,
    /// The failover watch of the pool, handed on to the started client.
    pub(crate) watch: Option<Arc<awa_maint::connect::Watch>>,
    /// Wraps every handler and the started client's inserts.
    pub(crate) middleware: Chain,
}

impl std::fmt::Debug for ClientBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClientBuilder")
            .field("schema", &self.schema)
            .field("queues", &self.queues)
            .field("kinds", &self.handlers.keys().collect::<Vec<_>>())
            .field("maintenance", &self.maintenance.is_some())
            .finish_non_exhaustive()
    }
}

impl ClientBuilder {
    pub(crate) fn new(pool: PgPool) -> Self {
        Self {
            pool,
            schema: None,
            queues: Vec::new(),
            handlers: HashMap::new(),
            default_handler: None,
            policies: Policies::default(),
            hooks: Vec::new(),
            maintenance: Some(MaintSettings::default()),
            shutdown_grace: None,
            claim_batch: None,
            poll_interval: None,
            heartbeat_interval: None,
            cancel_grace: None,
            timeouts: HashMap::new(),
            schedules: Vec::new(),
            prune_schedules: false,
            error: None,
            watch: None,
            middleware: Chain::default(),
        }
    }

    fn fail(&mut self, err: Error) {
        self.error.get_or_insert(err);
    }

    /// Serve `queue`, running at most `concurrency` of its jobs at once.
    pub fn queue(mut self, queue: &str, concurrency: usize) -> Self {
        match QueueName::new(queue) {
            Ok(q) => self.queues.push((q.as_str().to_string(), concurrency)),
            Err(err) => self.fail(err.into()),
        }
        self
    }

    /// Pin the worker, its maintenance and its inserts to one substrate,
    /// whatever the storage routing says (for tests and for a substrate
    /// used on its own). By default a client follows the routing: it
    /// claims from every substrate the routing reads and picks up a
    /// transition step within `awa_control::routing::REFRESH`, without a
    /// restart.
    pub fn schema(mut self, schema: SchemaName) -> Self {
        self.schema = Some(schema);
        self
    }

    /// Run `handler` for jobs of type `J`: it gets the typed args and the
    /// attempt's context. Args that do not deserialize into `J` fail the
    /// job permanently with a message saying why.
    /// The type's default timeout ([`Job::TIMEOUT`]) applies, unless
    /// [`ClientBuilder::timeout`] says otherwise.
    pub fn register<J: Job>(mut self, handler: impl JobHandler<J>) -> Self {
        self.add(J::KIND.to_string(), Arc::new(Typed::new(handler)));
        match J::TIMEOUT {
            Some(timeout) if !self.timeouts.contains_key(J::KIND) => {
                self.kind_timeout(J::KIND, timeout)
            }
            _ => self,
        }
    }

    /// The default timeout of jobs of type `J` (over [`Job::TIMEOUT`]): a
    /// handler still running `timeout` after it started is dropped (its
    /// task aborted, its slot freed) and the attempt fails with a timeout
    /// error (`awa_core::timeout::ERROR_PREFIX`), retried by the retry
    /// policy until max attempts. A job's own timeout
    /// ([`crate::InsertOpts::timeout`]) wins. 1 ms to 7 days.
    pub fn timeout<J: Job>(self, timeout: Duration) -> Self {
        self.kind_timeout(J::KIND, timeout)
    }

    /// The default timeout of an untyped kind (see [`ClientBuilder::timeout`]).
    pub fn kind_timeout(mut self, kind: &str, timeout: Duration) -> Self {
        match awa_core::bounds::JOB_TIMEOUT.check(timeout) {
            Ok(t) => {
                self.timeouts.insert(kind.to_string(), t);
            }
            Err(err) => self.fail(err.into()),
        }
        self
    }

    /// Run an untyped handler (JSON args in `ctx.job.args`) for `kind`.
    pub fn register_untyped(mut self, kind: &str, handler: impl Handler) -> Self {
        self.add(kind.to_string(), Arc::new(handler));
        self
    }

    /// Run `handler` for every kind without a handler of its own (otherwise
    /// such jobs fail permanently, naming the kind).
    pub fn register_default(mut self, handler: impl Handler) -> Self {
        self.default_handler = Some(Arc::new(handler));
        self
    }

    fn add(&mut self, kind: String, handler: Arc<dyn Handler>) {
        if kind.trim().is_empty() {
            self.fail(
                awa_core::InvalidInput::Name {
                    what: "job kind",
                    value: kind,
                    why: "a kind must not be blank".into(),
                }
                .into(),
            );
        } else if self.handlers.insert(kind.clone(), handler).is_some() {
            self.fail(Error::DuplicateKind(kind));
        }
    }

    /// The retry policy of jobs of type `J` (over any queue policy).
    pub fn retry_policy<J: Job>(mut self, policy: RetryPolicy) -> Self {
        self.policies.by_kind.insert(J::KIND.to_string(), policy);
        self
    }

    /// The retry policy of an untyped kind.
    pub fn kind_retry_policy(mut self, kind: &str, policy: RetryPolicy) -> Self {
        self.policies.by_kind.insert(kind.to_string(), policy);
        self
    }

    /// The retry policy of every kind in `queue` that has none of its own.
    pub fn queue_retry_policy(mut self, queue: &str, policy: RetryPolicy) -> Self {
        match QueueName::new(queue) {
            Ok(q) => {
                self.policies
                    .by_queue
                    .insert(q.as_str().to_string(), policy);
            }
            Err(err) => self.fail(err.into()),
        }
        self
    }

    /// Wrap every attempt this worker runs, and every insert of the client
    /// `start` returns, in `middleware`, inside any added before: the
    /// first added runs first on the way in and last on the way out. The
    /// retry policy applies to what the outermost middleware returns. See
    /// [`crate::middleware`] for how errors pass through.
    pub fn middleware(mut self, middleware: impl Middleware) -> Self {
        self.middleware = self.middleware.with(Arc::new(middleware));
        self
    }

    /// Call `hook` after every result commits (completed, retried,
    /// snoozed, cancelled, failed, dead-lettered): see [`JobEvent`].
    pub fn on_event(mut self, hook: impl Fn(&JobEvent) + Send + Sync + 'static) -> Self {
        self.hooks.push(Arc::new(hook));
        self
    }

    /// Call `hook` after each completion commits.
    pub fn on_completed(self, hook: impl Fn(&JobEvent) + Send + Sync + 'static) -> Self {
        self.on_state(awa_core::JobState::Completed, hook)
    }

    /// Call `hook` after each job fails for good (attempts used up, or a
    /// permanent error) without going to the DLQ.
    pub fn on_failed(self, hook: impl Fn(&JobEvent) + Send + Sync + 'static) -> Self {
        self.on_state(awa_core::JobState::Failed, hook)
    }

    /// Call `hook` after each job moves to the dead-letter queue.
    pub fn on_dead_lettered(self, hook: impl Fn(&JobEvent) + Send + Sync + 'static) -> Self {
        self.on_state(awa_core::JobState::DeadLettered, hook)
    }

    fn on_state(
        self,
        state: awa_core::JobState,
        hook: impl Fn(&JobEvent) + Send + Sync + 'static,
    ) -> Self {
        self.on_event(move |e| {
            if e.state == state {
                hook(e)
            }
        })
    }

    /// Do not run a maintenance-leader candidate in this process. Some
    /// process must run one (`awa maint run`, or another worker), or
    /// retries, scheduled jobs and rescues stop.
    pub fn without_maintenance(mut self) -> Self {
        self.maintenance = None;
        self
    }

    /// Maintenance cadences (rescue after, rotation, ...), checked at start.
    pub fn maintenance(mut self, settings: MaintSettings) -> Self {
        self.maintenance = Some(settings);
        self
    }

    /// How long shutdown waits for in-flight jobs when no grace is given
    /// (default 10 s).
    pub fn shutdown_grace(mut self, grace: Duration) -> Self {
        self.shutdown_grace = Some(grace);
        self
    }

    /// Declare a periodic job: upserted by `start` (created, or changed to
    /// this definition), then fired by the maintenance leader exactly once
    /// per tick. Schedules not declared here are left alone unless
    /// [`ClientBuilder::prune_schedules`] is set. Build one with
    /// [`crate::schedule`] for a typed job.
    pub fn cron(mut self, schedule: awa_control::cron::Schedule) -> Self {
        if let Err(err) = schedule.validate() {
            self.fail(err.into());
        }
        self.schedules.push(schedule);
        self
    }

    /// At start, delete every schedule in the database that this builder
    /// did not declare (the code is the source of truth).
    pub fn prune_schedules(mut self) -> Self {
        self.prune_schedules = true;
        self
    }

    /// Most jobs claimed in one round trip (default 512,
    /// `awa_exec::worker::DEFAULT_CLAIM_BATCH`; asked for only when jobs
    /// prove short).
    pub fn claim_batch(mut self, jobs: usize) -> Self {
        self.claim_batch = Some(jobs);
        self
    }

    /// How often an idle queue is polled when no notification comes
    /// (default 250 ms).
    pub fn poll_interval(mut self, every: Duration) -> Self {
        self.poll_interval = Some(every);
        self
    }

    /// The longest heartbeat cadence of long jobs (default 15 s; faster
    /// when the substrate's rescue bound asks for it).
    pub fn heartbeat_interval(mut self, every: Duration) -> Self {
        self.heartbeat_interval = Some(every);
        self
    }

    /// How long a handler whose attempt was cancelled (by an operator, or
    /// rescued by maintenance) may run on after [`JobContext::cancelled`]
    /// resolved, before the worker drops it and frees its slot (default
    /// 5 s, [`DEFAULT_CANCEL_GRACE`](crate::DEFAULT_CANCEL_GRACE); 0 to 1
    /// hour).
    ///
    /// [`JobContext::cancelled`]: crate::JobContext::cancelled
    pub fn cancel_grace(mut self, grace: Duration) -> Self {
        self.cancel_grace = Some(grace);
        self
    }

    /// The worker these settings describe, with every handler wrapped in
    /// its retry policy. Validates everything; connects to nothing.
    fn worker(&self) -> Result<(Worker, WorkerConfig), Error> {
        let mut queues = Vec::new();
        for (name, concurrency) in &self.queues {
            queues.push((QueueName::new(name.clone())?, *concurrency));
        }
        let mut config = WorkerConfig::new(
            self.schema
                .clone()
                .unwrap_or_else(SchemaName::default_schema),
            queues,
        );
        if let Some(b) = self.claim_batch {
            config.claim_batch = b;
        }
        if let Some(p) = self.poll_interval {
            config.poll_interval = p;
        }
        if let Some(g) = self.shutdown_grace {
            config.shutdown_grace = g;
        }
        if let Some(h) = self.heartbeat_interval {
            config.heartbeat_interval = h;
        }
        if let Some(g) = self.cancel_grace {
            config.cancel_grace = g;
        }
        config.kind_timeouts = self.timeouts.clone();
        let mut worker = Worker::new(self.pool.clone(), config.clone());
        let policies = Arc::new(self.policies.clone());
        // Policy outermost, then the middleware, then the handler; without
        // middleware nothing is added between policy and handler.
        let wrap = |handler: &Arc<dyn Handler>| -> Arc<dyn Handler> {
            if self.middleware.is_empty() {
                handler.clone()
            } else {
                Arc::new(Wrapped {
                    chain: self.middleware.clone(),
                    inner: handler.clone(),
                })
            }
        };
        for (kind, handler) in &self.handlers {
            worker.register(
                kind.clone(),
                WithPolicy {
                    inner: wrap(handler),
                    policies: policies.clone(),
                },
            );
        }
        if let Some(handler) = &self.default_handler {
            worker.register_default(WithPolicy {
                inner: wrap(handler),
                policies,
            });
        }
        for hook in &self.hooks {
            let hook = hook.clone();
            worker.on_event(move |e| hook(e));
        }
        Ok((worker, config))
    }

    /// Claim one job of `queue`, run its handler inline and record the
    /// result, with the registered handlers and retry policies; nothing
    /// else is started and hooks are not called. For tests: enqueue, then
    /// `work_one`, then assert on the result and the database. None when
    /// nothing of `queue` is runnable now.
    ///
    /// ```
    /// # #[tokio::main]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let db = awa::testing::test_db().await?;
    /// # let pool = db.pool().await?;
    /// use awa::{Client, HandlerResult, JobContext, JobError, JobState, Outcome};
    ///
    /// #[derive(serde::Serialize, serde::Deserialize, awa::Job)]
    /// #[awa(queue = "images", max_attempts = 3)]
    /// struct Resize { width: u32 }
    ///
    /// async fn resize(job: Resize, _ctx: JobContext) -> HandlerResult {
    ///     if job.width == 0 {
    ///         return Err(JobError::Permanent("width 0".into()));
    ///     }
    ///     Ok(Outcome::Complete)
    /// }
    ///
    /// let client = Client::new(pool.clone());
    /// let worker = Client::builder(pool.clone()).register::<Resize>(resize);
    ///
    /// let ok = client.insert(&pool, &Resize { width: 640 }).await?;
    /// let worked = worker.work_one("images").await?.expect("a runnable job");
    /// assert_eq!(worked.job.token.job_id, ok.id);
    /// assert_eq!(worked.finished.next_state, Some(JobState::Completed));
    ///
    /// let bad = client.insert(&pool, &Resize { width: 0 }).await?;
    /// worker.work_one("images").await?;
    /// assert_eq!(client.job(bad.id).await?.expect("kept").state, JobState::Failed);
    ///
    /// assert!(worker.work_one("images").await?.is_none(), "nothing left");
    /// # Ok(())
    /// # }
    /// ```
    pub async fn work_one(&self, queue: &str) -> Result<Option<Worked>, Error> {
        if let Some(err) = &self.error {
            return Err(Error::Worker(err.to_string()));
        }
        let queue = QueueName::new(queue)?;
        let (mut worker, _) = self.worker_for_one(&queue)?;
        if self.schema.is_none() {
            let mut conn = self.pool.acquire().await?;
            let routing = awa_control::routing::read(&mut conn).await?;
            worker.follow_routing(watch::channel(routing).1);
        }
        Ok(worker.work_one(&queue).await?)
    }

    fn worker_for_one(&self, queue: &QueueName) -> Result<(Worker, WorkerConfig), Error> {
        // work_one needs no queue list; give the config the one it runs.
        let mut copy = self.queues.clone();
        if !copy.iter().any(|(q, _)| q == queue.as_str()) {
            copy.push((queue.as_str().to_string(), 1));
        }
        let shadow = ClientBuilder {
            queues: copy,
            ..self.clone_settings()
        };
        shadow.worker()
    }

    fn clone_settings(&self) -> ClientBuilder {
        ClientBuilder {
            pool: self.pool.clone(),
            schema: self.schema.clone(),
            queues: self.queues.clone(),
            handlers: self.handlers.clone(),
            default_handler: self.default_handler.clone(),
            policies: self.policies.clone(),
            hooks: self.hooks.clone(),
            maintenance: self.maintenance.clone(),
            shutdown_grace: self.shutdown_grace,
            claim_batch: self.claim_batch,
            poll_interval: self.poll_interval,
            heartbeat_interval: self.heartbeat_interval,
            cancel_grace: self.cancel_grace,
            timeouts: self.timeouts.clone(),
            schedules: self.schedules.clone(),
            prune_schedules: self.prune_schedules,
            error: None,
            watch: self.watch.clone(),
            middleware: self.middleware.clone(),
        }
    }

    /// Check everything, check the database is migrated, register this
    /// process, and start the worker and (unless opted out) a
    /// maintenance-leader candidate. Returns a [`Client`] that also
    /// inserts; stop it with [`Client::shutdown`].
    pub async fn start(mut self) -> Result<Client, Error> {
        if let Some(err) = self.error.take() {
            return Err(err);
        }
        if self.queues.is_empty() {
            return Err(Error::NoQueues);
        }
        let (mut worker, config) = self.worker()?;
        config.validate()?;
        if let Some(settings) = &self.maintenance {
            settings.validate()?;
        }
        let client = match &self.schema {
            Some(schema) => Client::with_schema(self.pool.clone(), schema.clone()),
            None => Client::new(self.pool.clone()),
        };
        client.check_schema().await?;
        if !self.schedules.is_empty() || self.prune_schedules {
            let mut conn = self.pool.acquire().await?;
            let pruned =
                awa_control::cron::sync(&mut conn, &self.schedules, self.prune_schedules).await?;
            if !pruned.is_empty() {
                tracing::info!(?pruned, "removed schedules this process does not declare");
            }
        }

        let instance = config.instance_id;
        let registration = awa_control::runtimes::Registration::start(
            &self.pool,
            &awa_control::runtimes::RuntimeInfo {
                instance_id: instance,
                role: "worker",
                queues: self.queues.iter().map(|(q, _)| q.clone()).collect(),
            },
        )
        .await?;
        match &self.schema {
            // Registers this runtime's substrates too, so finalize can see
            // it has picked up a target.
            None => worker
                .follow_routing(awa_control::routing::follow(&self.pool, Some(instance)).await?),
            // A pinned runtime names its one substrate, so a move between
            // others does not wait for it.
            Some(schema) => {
                let mut conn = self.pool.acquire().await?;
                awa_control::routing::register_backends(
                    &mut conn,
                    instance,
                    &awa_core::Routing::fixed(schema.clone()),
                )
                .await?;
                &mut worker
            }
        };

        let (stop_maint, maint_rx) = watch::channel(false);
        let maintenance = self.maintenance.as_ref().map(|settings| {
            let mut leader = awa_maint::leader::LeaderConfig::new();
            leader.instance_id = instance;
            match &self.schema {
                Some(schema) => {
                    let tasks = awa_maint::tasks::standard(schema, settings, &instance.to_string());
                    tokio::spawn(awa_maint::leader::run(
                        leader,
                        self.pool.clone(),
                        tasks,
                        maint_rx,
                        None,
                    ))
                }
                None => tokio::spawn(awa_maint::leader::run_routed(
                    leader,
                    self.pool.clone(),
                    settings.clone(),
                    maint_rx,
                    None,
                )),
            }
        });

        let stats = worker.stats();
        let (stop_tx, stop_rx) = oneshot::channel::<Duration>();
        let default_grace = config.shutdown_grace;
        let task = tokio::spawn(worker.run_with_grace(async move {
            // A dropped sender (every Client clone gone) also stops it.
            stop_rx.await.unwrap_or(default_grace)
        }));
        Ok(Client {
            watch: self.watch.clone(),
            middleware: self.middleware.clone(),
            runtime: Some(Arc::new(Runtime {
                parts: Mutex::new(Some(Parts {
                    stop: stop_tx,
                    task,
                    stop_maint,
                    maintenance,
                    registration,
                })),
                stats,
            })),
            ..client
        })
    }
}

/// What a started client runs, until shutdown takes it apart.
#[derive(Debug)]
pub(crate) struct Runtime {
    parts: Mutex<Option<Parts>>,
    pub(crate) stats: Arc<Stats>,
}

#[derive(Debug)]
struct Parts {
    stop: oneshot::Sender<Duration>,
    task: tokio::task::JoinHandle<Result<StatsSnapshot, awa_exec::ExecError>>,
    stop_maint: watch::Sender<bool>,
    maintenance: Option<tokio::task::JoinHandle<Result<(), awa_maint::MaintError>>>,
    registration: awa_control::runtimes::Registration,
}

impl Runtime {
    pub(crate) async fn shutdown(
        &self,
        pool: &PgPool,
        grace: Duration,
    ) -> Result<StatsSnapshot, Error> {
        let Some(parts) = self.parts.lock().expect("runtime lock").take() else {
            // Already shut down (by another clone): nothing left to stop.
            return Ok(self.stats.snapshot());
        };
        let _ = parts.stop.send(grace);
        // The worker bounds itself (grace plus its record grace); the
        // margin here only guards against a runtime that does not answer.
        let bound = grace + awa_exec::worker::RECORD_GRACE + Duration::from_secs(5);
        let result = match tokio::time::timeout(bound, parts.task).await {
            Ok(Ok(Ok(stats))) => Ok(stats),
            Ok(Ok(Err(err))) => Err(Error::Exec(err)),
            Ok(Err(join)) => Err(Error::Worker(join.to_string())),
            Err(_) => Err(Error::ShutdownTimedOut(bound)),
        };
        // Maintenance stops after the worker, so releases it wrote are
        // promoted by whichever leader runs next.
        let _ = parts.stop_maint.send(true);
        if let Some(m) = parts.maintenance {
            match tokio::time::timeout(Duration::from_secs(5), m).await {
                Ok(Ok(Ok(()))) => {}
                Ok(Ok(Err(err))) => {
                    tracing::warn!(error = %err, "the maintenance candidate stopped with an error")
                }
                Ok(Err(err)) => tracing::warn!(error = %err, "the maintenance candidate failed"),
                Err(_) => tracing::warn!("the maintenance candidate did not stop within 5 s"),
            }
        }
        parts.registration.stop(pool).await;
        result
    }
}

impl Drop for Runtime {
    /// Every clone of the client is gone without `shutdown`: stop in the
    /// background (the worker's default grace; the maintenance candidate
    /// at once). Dropping the stop sender is what tells the worker.
    fn drop(&mut self) {
        if let Some(parts) = self.parts.get_mut().ok().and_then(Option::take) {
            let _ = parts.stop_maint.send(true);
        }
    }
}
