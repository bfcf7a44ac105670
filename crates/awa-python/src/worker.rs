//! A worker that runs Python handlers on the Rust runtime: an
//! [`awa::ClientBuilder`] whose handlers call into Python.
//!
//! The Python side registers, per kind, one callable `invoke(ctx, done)`
//! that never raises: it schedules the user's handler and returns at once;
//! the handler's result or exception, mapped to an outcome tuple `(tag,
//! seconds, message)`, reaches `done`. A sync handler runs on a daemon
//! thread of the package's own pool (a Python thread, so an interpreter
//! that exits while a handler still runs ends that thread the way it ends
//! any daemon thread: no Rust-owned thread is ever inside Python then); an
//! async one on the worker's asyncio loop (`invoke` returns the
//! `concurrent.futures.Future` of `asyncio.run_coroutine_threadsafe`). The
//! attempt waits for `done` without the GIL and without a thread.
//!
//! When the attempt's future is dropped (the cancel grace, the job's
//! timeout or the shutdown grace is over) an async handler's task is cancelled; a sync handler
//! cannot be stopped: it is abandoned (its slot is freed, a warning is
//! logged, and whatever it returns is ignored).

use crate::context::NativeContext;
use crate::error::{ValidationError, to_py};
use crate::in_python::InPython;
use async_trait::async_trait;
use awa::{Handler, HandlerResult, JobContext, JobError, Outcome, RetryPolicy};
use pyo3::prelude::*;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::{Notify, oneshot};
use tokio_util::sync::CancellationToken;

/// How often a running worker looks at Python's pending signals while
/// it waits: the bound on how late SIGINT / SIGTERM handlers run.
const SIGNAL_CHECK: Duration = Duration::from_millis(100);

/// The outcome a handler's tuple names, as the Rust runtime records it.
fn outcome(tag: &str, seconds: Option<f64>, message: Option<String>) -> HandlerResult {
    let delay = || {
        let s = seconds.unwrap_or(0.0);
        // NaN, negative or huge delays are clamped like the Rust client's.
        let s = if s.is_finite() { s.max(0.0) } else { 0.0 };
        awa_core::bounds::handler_delay(Duration::from_secs_f64(
            s.min(awa_core::bounds::MAX_HANDLER_DELAY.as_secs_f64()),
        ))
    };
    let message = message.unwrap_or_default();
    match tag {
        "complete" => Ok(Outcome::Complete),
        "snooze" => Ok(Outcome::Snooze(delay())),
        "cancel" => Ok(Outcome::Cancel(message)),
        "retry" => Err(JobError::Retry(message)),
        "retry_after" => Err(JobError::RetryAfter(delay(), message)),
        "fail" => Err(JobError::Permanent(message)),
        other => Err(JobError::Permanent(format!(
            "the Python handler returned an unknown outcome {other:?} (a bug in awa's Python package)"
        ))),
    }
}

/// An outcome tuple from Python, or a retry saying why it was not one.
fn parse(py: Python<'_>, result: PyResult<Py<PyAny>>) -> HandlerResult {
    let value = result.map_err(|e| JobError::Retry(format!("the Python handler raised: {e}")))?;
    match value.extract::<(String, Option<f64>, Option<String>)>(py) {
        Ok((tag, seconds, message)) => outcome(&tag, seconds, message),
        Err(e) => Err(JobError::Permanent(format!(
            "the Python handler's result is not an outcome: {e}"
        ))),
    }
}

/// Where a handler's outcome goes: `set(outcome)` from a sync handler's
/// thread, or `done(future)` as an async handler's done-callback. The
/// first one wins; after the attempt was given up, nobody listens.
#[pyclass(module = "awa._awa", frozen)]
struct Done {
    tx: Mutex<Option<oneshot::Sender<HandlerResult>>>,
}

impl Done {
    fn send(&self, result: HandlerResult) {
        if let Some(tx) = self.tx.lock().expect("done lock").take() {
            let _ = tx.send(result);
        }
    }
}

#[pymethods]
impl Done {
    /// The outcome tuple of a sync handler.
    fn set(&self, py: Python<'_>, outcome: Py<PyAny>) {
        self.send(parse(py, Ok(outcome)));
    }

    /// An async handler's future, once done (cancelled: nobody waits).
    fn __call__(&self, py: Python<'_>, future: Py<PyAny>) {
        self.send(parse(py, future.call_method0(py, "result")));
    }
}

/// How long `run()` waits, after the client shut down, for the worker's
/// last Rust-side calls into Python (an async handler's cancel, a cancel
/// callback) before it returns anyway.
const IN_PYTHON_DRAIN: Duration = Duration::from_secs(5);

/// A Python handler as a Rust one.
#[derive(Clone)]
struct PyHandler {
    invoke: Arc<Py<PyAny>>,
    is_async: bool,
    in_python: Arc<InPython>,
}

/// Gives up on a handler whose attempt's future is dropped before it
/// returned (cancel grace, timeout or shutdown grace over): cancels an async
/// handler's task, says a sync one is abandoned. Also ends the attempt for
/// the context's `on_cancelled` waiters.
struct GiveUp {
    /// The async handler's `concurrent.futures.Future`.
    future: Option<Py<PyAny>>,
    in_python: Arc<InPython>,
    job_id: i64,
    returned: bool,
    attempt_over: CancellationToken,
}

impl Drop for GiveUp {
    fn drop(&mut self) {
        self.attempt_over.cancel();
        if self.returned {
            return;
        }
        match self.future.take() {
            Some(future) => {
                tracing::info!(
                    job_id = self.job_id,
                    "cancelling the async Python handler's task"
                );
                // Not on a runtime thread: the GIL may take a while.
                self.in_python.spawn_blocking(move || {
                    Python::attach(|py| {
                        let _ = future.call_method0(py, "cancel");
                    })
                });
            }
            None => tracing::warn!(
                job_id = self.job_id,
                "a sync Python handler cannot be stopped: it is abandoned (its slot is freed \
                 and whatever it returns is ignored); watch ctx.is_cancelled() or \
                 ctx.wait_cancelled() to stop in time"
            ),
        }
    }
}

#[async_trait]
impl Handler for PyHandler {
    async fn handle(&self, ctx: JobContext) -> HandlerResult {
        // Held until this attempt's future is done or dropped.
        let _in_python = self.in_python.enter();
        let invoke = self.invoke.clone();
        let job_id = ctx.job.token.job_id.0;
        let attempt_over = CancellationToken::new();
        let native = NativeContext::new(ctx, attempt_over.clone(), self.in_python.clone());
        let (tx, rx) = oneshot::channel();
        // Scheduling takes the GIL: not on a runtime thread.
        let scheduled = tokio::task::spawn_blocking(move || {
            Python::attach(|py| -> PyResult<Option<Py<PyAny>>> {
                let done = Py::new(
                    py,
                    Done {
                        tx: Mutex::new(Some(tx)),
                    },
                )?;
                let handle = invoke.call1(py, (native, done))?;
                Ok((!handle.is_none(py)).then_some(handle))
            })
        })
        .await;
        let future = match scheduled {
            Ok(Ok(future)) => future,
            Ok(Err(e)) => {
                attempt_over.cancel();
                return Err(JobError::Retry(format!(
                    "the Python handler could not be scheduled: {e}"
                )));
            }
            Err(e) => {
                attempt_over.cancel();
                return Err(JobError::Retry(format!("the handler thread failed: {e}")));
            }
        };
        let mut give_up = GiveUp {
            future: if self.is_async { future } else { None },
            in_python: self.in_python.clone(),
            job_id,
            returned: false,
            attempt_over,
        };
        let result = rx.await.unwrap_or_else(|_| {
            Err(JobError::Retry(
                "the Python handler stopped without a result (its asyncio loop stopped?)".into(),
            ))
        });
        give_up.returned = true;
        result
    }
}

/// A Rust no-op handler: the baseline of `cargo xtask bench --scenario
/// python`, in the same process as the Python ones.
struct Noop;

#[async_trait]
impl Handler for Noop {
    async fn handle(&self, _ctx: JobContext) -> HandlerResult {
        Ok(Outcome::Complete)
    }
}

/// Adds one kind's handler to a builder (the handler types differ); once
/// per builder: `run` builds one, `work_one` one per call.
type AddHandler = Arc<dyn Fn(awa::ClientBuilder, &str) -> awa::ClientBuilder + Send + Sync>;

/// One registered kind.
#[derive(Clone)]
struct Registered {
    kind: String,
    handler: AddHandler,
    policy: Option<RetryPolicy>,
    /// The kind's default timeout.
    timeout: Option<Duration>,
}

/// What `run` starts, collected by the constructor and `register`.
#[derive(Clone)]
struct Setup {
    url: String,
    max_connections: u32,
    queues: Vec<(String, usize)>,
    maintenance: bool,
    shutdown_grace: Duration,
    cancel_grace: Duration,
    claim_batch: Option<usize>,
    poll_interval: Option<Duration>,
    kinds: Vec<Registered>,
    /// Periodic jobs declared from code, upserted at start.
    schedules: Vec<awa::Schedule>,
    prune_schedules: bool,
    /// Lifecycle hooks: Python callables of one event each.
    hooks: Vec<Arc<Py<PyAny>>>,
}

fn seconds(what: &str, value: f64) -> PyResult<Duration> {
    Duration::try_from_secs_f64(value).map_err(|_| {
        ValidationError::new_err(format!(
            "{what} must be a non-negative number of seconds, not {value}"
        ))
    })
}

/// The native half of `awa.Worker`: configure, register, then `run` once.
#[pyclass(module = "awa._awa", frozen)]
pub(crate) struct NativeWorker {
    setup: Mutex<Option<Setup>>,
    stop: Arc<Notify>,
    in_python: Arc<InPython>,
}

#[pymethods]
impl NativeWorker {
    #[new]
    #[pyo3(signature = (url, queues, maintenance=true, shutdown_grace=10.0, claim_batch=None, poll_interval=None, max_connections=10, cancel_grace=None))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        url: String,
        queues: Vec<(String, usize)>,
        maintenance: bool,
        shutdown_grace: f64,
        claim_batch: Option<usize>,
        poll_interval: Option<f64>,
        max_connections: u32,
        cancel_grace: Option<f64>,
    ) -> PyResult<Self> {
        let shutdown_grace = awa_core::bounds::SHUTDOWN_GRACE
            .check(seconds("shutdown_grace", shutdown_grace)?)
            .map_err(|e| ValidationError::new_err(e.to_string()))?;
        let cancel_grace = match cancel_grace {
            Some(s) => awa_core::bounds::CANCEL_GRACE
                .check(seconds("cancel_grace", s)?)
                .map_err(|e| ValidationError::new_err(e.to_string()))?,
            None => awa::DEFAULT_CANCEL_GRACE,
        };
        let poll_interval = poll_interval
            .map(|p| seconds("poll_interval", p))
            .transpose()?;
        Ok(Self {
            setup: Mutex::new(Some(Setup {
                url,
                max_connections,
                queues,
                maintenance,
                shutdown_grace,
                cancel_grace,
                claim_batch,
                poll_interval,
                kinds: Vec::new(),
                schedules: Vec::new(),
                prune_schedules: false,
                hooks: Vec::new(),
            })),
            stop: Arc::new(Notify::new()),
            in_python: Arc::default(),
        })
    }

    /// Run `invoke(ctx, done)` for jobs of `kind`. `retry`: `("fixed", s, _)`
    /// or `("exponential", base_s, max_s)`; None keeps the database's
    /// default backoff.
    /// `timeout`: the kind's default timeout in seconds (a job's own wins).
    #[pyo3(signature = (kind, invoke, is_async, retry=None, timeout=None))]
    fn register(
        &self,
        kind: String,
        invoke: Py<PyAny>,
        is_async: bool,
        retry: Option<(String, f64, f64)>,
        timeout: Option<f64>,
    ) -> PyResult<()> {
        let timeout = timeout
            .map(|t| {
                awa_core::bounds::JOB_TIMEOUT
                    .check(seconds("timeout", t)?)
                    .map_err(|e| ValidationError::new_err(e.to_string()))
            })
            .transpose()?;
        let policy = match retry {
            None => None,
            Some((how, a, b)) => Some(match how.as_str() {
                "fixed" => RetryPolicy::fixed(seconds("retry delay", a)?),
                "exponential" => {
                    RetryPolicy::exponential(seconds("retry base", a)?, seconds("retry max", b)?)
                }
                other => {
                    return Err(ValidationError::new_err(format!(
                        "unknown retry policy {other:?}: use fixed or exponential"
                    )));
                }
            }),
        };
        let handler = PyHandler {
            invoke: Arc::new(invoke),
            is_async,
            in_python: self.in_python.clone(),
        };
        self.add(Registered {
            kind,
            handler: Arc::new(move |b, kind| b.register_untyped(kind, handler.clone())),
            policy,
            timeout,
        })
    }

    /// Complete jobs of `kind` in Rust, without calling Python (the
    /// benchmark's baseline).
    fn register_noop(&self, kind: String) -> PyResult<()> {
        self.add(Registered {
            kind,
            handler: Arc::new(|b, kind| b.register_untyped(kind, Noop)),
            policy: None,
            timeout: None,
        })
    }

    /// Declare a periodic job (see `awa::ClientBuilder::cron`), checked
    /// now: upserted when the worker starts, fired by the maintenance
    /// leader once per tick.
    #[pyo3(signature = (name, cron, queue, kind, args_json, priority, max_attempts=None, metadata_json=None, timezone=None, catch_up=None))]
    #[allow(clippy::too_many_arguments)]
    fn cron(
        &self,
        name: String,
        cron: String,
        queue: String,
        kind: String,
        args_json: &str,
        priority: i16,
        max_attempts: Option<i32>,
        metadata_json: Option<&str>,
        timezone: Option<String>,
        catch_up: Option<u32>,
    ) -> PyResult<()> {
        let schedule = crate::lifecycle::schedule(
            name,
            cron,
            queue,
            kind,
            args_json,
            priority,
            max_attempts,
            metadata_json,
            timezone,
            catch_up,
        )?;
        self.with_setup(|s| s.schedules.push(schedule))
    }

    /// At start, delete every schedule this worker does not declare.
    fn prune_schedules(&self) -> PyResult<()> {
        self.with_setup(|s| s.prune_schedules = true)
    }

    /// Call `hook(event)` after every result commits, in commit order
    /// (see `awa::ClientBuilder::on_event`); `event` is the tuple
    /// `(job_id, run_lease, queue, kind, attempt, state, error)`.
    fn on_event(&self, hook: Py<PyAny>) -> PyResult<()> {
        self.with_setup(|s| s.hooks.push(Arc::new(hook)))
    }

    /// Claim one job of `queue`, run its handler here and record the
    /// result (`awa::ClientBuilder::work_one`: hooks are not called, no
    /// worker is started); the outcome as JSON, or None when nothing of
    /// `queue` is runnable now. For unit tests; the worker can still run.
    fn work_one(&self, py: Python<'_>, queue: String) -> PyResult<Option<String>> {
        let setup = self
            .setup
            .lock()
            .expect("setup lock")
            .clone()
            .ok_or_else(|| {
                crate::error::AwaError::new_err("work_one before run(): this worker already ran")
            })?;
        let in_python = self.in_python.clone();
        let rt = crate::runtime();
        let worked = py
            .detach(|| {
                rt.block_on(async move {
                    let worked = async {
                        let base = awa::Client::connect(&setup.url, setup.max_connections).await?;
                        builder(&setup, &base, &in_python).work_one(&queue).await
                    }
                    .await;
                    // The handler's last calls into Python (a task's cancel).
                    in_python.drained(IN_PYTHON_DRAIN).await;
                    worked
                })
            })
            .map_err(to_py)?;
        Ok(worked.map(|w| crate::lifecycle::worked_json(&w)))
    }

    /// Ask a running (or about to run) worker to shut down gracefully.
    /// Safe from any thread, a handler or a signal handler.
    fn stop(&self) {
        self.stop.notify_one();
    }

    /// Start, serve until `stop()` (or a Python signal handler raising),
    /// then shut down gracefully; returns the worker's counters as JSON.
    fn run(&self, py: Python<'_>) -> PyResult<String> {
        let setup = self
            .setup
            .lock()
            .expect("setup lock")
            .take()
            .ok_or_else(|| {
                crate::error::AwaError::new_err("this worker already ran; build a new one")
            })?;
        let grace = setup.shutdown_grace;
        let rt = crate::runtime();
        let in_python = self.in_python.clone();
        let client = py
            .detach(|| rt.block_on(start(setup, in_python)))
            .map_err(to_py)?;
        let stop = self.stop.clone();
        let mut interrupted = None;
        loop {
            let stopped = py.detach(|| {
                rt.block_on(async {
                    tokio::time::timeout(SIGNAL_CHECK, stop.notified())
                        .await
                        .is_ok()
                })
            });
            if stopped {
                break;
            }
            // Runs Python's signal handlers (main thread only); one that
            // raises (KeyboardInterrupt) also stops the worker.
            if let Err(e) = py.check_signals() {
                interrupted = Some(e);
                break;
            }
        }
        let in_python = self.in_python.clone();
        let stats = py
            .detach(|| {
                rt.block_on(async {
                    let stats = client.shutdown(grace).await;
                    if !in_python.drained(IN_PYTHON_DRAIN).await {
                        tracing::warn!(
                            "a call into Python from the worker's threads is still running \
                             {IN_PYTHON_DRAIN:?} after the shutdown; returning anyway"
                        );
                    }
                    stats
                })
            })
            .map_err(to_py)?;
        if let Some(e) = interrupted {
            return Err(e);
        }
        Ok(serde_json::to_string(&stats).expect("counters serialize"))
    }
}

impl NativeWorker {
    fn add(&self, kind: Registered) -> PyResult<()> {
        self.with_setup(|s| s.kinds.push(kind))
    }

    fn with_setup(&self, f: impl FnOnce(&mut Setup)) -> PyResult<()> {
        match self.setup.lock().expect("setup lock").as_mut() {
            Some(setup) => {
                f(setup);
                Ok(())
            }
            None => Err(crate::error::AwaError::new_err(
                "configure before run(): this worker already ran",
            )),
        }
    }
}

/// The builder `setup` describes, on `base`'s pool.
fn builder(setup: &Setup, base: &awa::Client, in_python: &Arc<InPython>) -> awa::ClientBuilder {
    // to_builder: the worker keeps following a failover of a host list.
    let mut b = base
        .to_builder()
        .shutdown_grace(setup.shutdown_grace)
        .cancel_grace(setup.cancel_grace);
    for (queue, concurrency) in &setup.queues {
        b = b.queue(queue, *concurrency);
    }
    for r in &setup.kinds {
        b = (r.handler)(b, &r.kind);
        if let Some(p) = &r.policy {
            b = b.kind_retry_policy(&r.kind, p.clone());
        }
        if let Some(t) = r.timeout {
            b = b.kind_timeout(&r.kind, t);
        }
    }
    if let Some(n) = setup.claim_batch {
        b = b.claim_batch(n);
    }
    if let Some(p) = setup.poll_interval {
        b = b.poll_interval(p);
    }
    if !setup.maintenance {
        b = b.without_maintenance();
    }
    for s in &setup.schedules {
        b = b.cron(s.clone());
    }
    if setup.prune_schedules {
        b = b.prune_schedules();
    }
    for hook in &setup.hooks {
        b = b.on_event(crate::lifecycle::hook(hook.clone(), in_python.clone()));
    }
    b
}

async fn start(setup: Setup, in_python: Arc<InPython>) -> Result<awa::Client, awa::Error> {
    let base = awa::Client::connect(&setup.url, setup.max_connections).await?;
    builder(&setup, &base, &in_python).start().await
}
