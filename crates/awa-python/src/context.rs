//! What a Python handler sees of its attempt: the job, and heartbeat,
//! progress, checkpoints and cancellation, over `awa::JobContext`. The
//! Python class `awa.Context` wraps this one.

use crate::error::{AwaError, ValidationError};
use crate::in_python::InPython;
use awa::{JobContext, Progress};
use pyo3::prelude::*;
use std::sync::Arc;
use tokio_util::sync::CancellationToken;

/// The native half of `awa.Context` (one per attempt).
#[pyclass(module = "awa._awa", frozen)]
pub(crate) struct NativeContext {
    ctx: JobContext,
    /// Cancelled when the attempt is over for the worker (its handler
    /// returned, or was given up): `on_cancelled` waiters stop waiting.
    attempt_over: CancellationToken,
    /// The worker's count of Rust-side work that calls into Python.
    in_python: Arc<InPython>,
}

impl NativeContext {
    pub(crate) fn new(
        ctx: JobContext,
        attempt_over: CancellationToken,
        in_python: Arc<InPython>,
    ) -> Self {
        Self {
            ctx,
            attempt_over,
            in_python,
        }
    }

    /// Run `fut` on the shared runtime without holding the GIL. Called
    /// from a handler's thread (the sync pool or the asyncio thread),
    /// never from a runtime worker.
    fn wait<T: Send>(&self, py: Python<'_>, fut: impl std::future::Future<Output = T> + Send) -> T {
        py.detach(|| crate::runtime().handle().block_on(fut))
    }
}

/// A refusal of what the handler passed is its `ValidationError`; the rest
/// (the database) is an `AwaError`.
fn exec_error(e: awa_exec::ExecError) -> PyErr {
    match e {
        awa_exec::ExecError::Invalid(invalid) => ValidationError::new_err(invalid.to_string()),
        other => AwaError::new_err(other.to_string()),
    }
}

fn parse_json(what: &str, text: &str) -> PyResult<serde_json::Value> {
    serde_json::from_str(text)
        .map_err(|e| ValidationError::new_err(format!("the {what} is not valid JSON: {e}")))
}

#[pymethods]
impl NativeContext {
    #[getter]
    fn job_id(&self) -> i64 {
        self.ctx.job.token.job_id.0
    }

    #[getter]
    fn run_lease(&self) -> i64 {
        self.ctx.job.token.run_lease.0
    }

    #[getter]
    fn kind(&self) -> &str {
        &self.ctx.job.kind
    }

    #[getter]
    fn queue(&self) -> &str {
        self.ctx.job.queue.as_str()
    }

    #[getter]
    fn priority(&self) -> i16 {
        self.ctx.job.priority
    }

    #[getter]
    fn attempt(&self) -> i32 {
        self.ctx.attempt()
    }

    #[getter]
    fn max_attempts(&self) -> i32 {
        self.ctx.job.max_attempts
    }

    #[getter]
    fn args_json(&self) -> String {
        self.ctx.job.args.to_string()
    }

    #[getter]
    fn metadata_json(&self) -> Option<String> {
        self.ctx.metadata().map(|m| m.to_string())
    }

    /// True once an operator cancelled this attempt (or maintenance
    /// rescued it): the worker learns it at once (a notification).
    fn is_cancelled(&self) -> bool {
        self.ctx.is_cancelled()
    }

    /// Block (without the GIL) until the attempt is cancelled, or
    /// `timeout` seconds pass (None: no limit); whether it was cancelled.
    #[pyo3(signature = (timeout=None))]
    fn wait_cancelled(&self, py: Python<'_>, timeout: Option<f64>) -> PyResult<bool> {
        let limit = timeout
            .map(|t| {
                std::time::Duration::try_from_secs_f64(t).map_err(|_| {
                    ValidationError::new_err(format!(
                        "timeout must be a non-negative number of seconds, not {t}"
                    ))
                })
            })
            .transpose()?;
        let ctx = self.ctx.clone();
        Ok(self.wait(py, async move {
            match limit {
                Some(limit) => tokio::time::timeout(limit, ctx.cancelled()).await.is_ok(),
                None => {
                    ctx.cancelled().await;
                    true
                }
            }
        }))
    }

    /// Call `callback()` (with the GIL, on a thread of the runtime's
    /// blocking pool) once the attempt is cancelled; never if the attempt
    /// ends first. For `await ctx.cancelled()` in async handlers.
    fn on_cancelled(&self, callback: Py<PyAny>) {
        let ctx = self.ctx.clone();
        let over = self.attempt_over.clone();
        let in_python = self.in_python.clone();
        // Counted while it waits: the attempt's end ends the wait.
        let waiting = in_python.enter();
        crate::runtime().spawn(async move {
            let _waiting = waiting;
            tokio::select! {
                biased;
                _ = over.cancelled() => {}
                _ = ctx.cancelled() => {
                    in_python.spawn_blocking(move || {
                        Python::attach(|py| {
                            if let Err(e) = callback.call0(py) {
                                tracing::warn!(error = %e, "a cancel callback raised");
                            }
                        })
                    });
                }
            }
        });
    }

    /// True once the worker is shutting down.
    fn is_shutting_down(&self) -> bool {
        self.ctx.is_shutting_down()
    }

    /// Heartbeat with optional progress; false when the attempt is no
    /// longer ours.
    #[pyo3(signature = (percent=None, message=None, checkpoint_json=None))]
    fn heartbeat(
        &self,
        py: Python<'_>,
        percent: Option<i16>,
        message: Option<String>,
        checkpoint_json: Option<&str>,
    ) -> PyResult<bool> {
        if let Some(p) = percent
            && !(0..=100).contains(&p)
        {
            return Err(ValidationError::new_err(format!(
                "progress percent {p} is out of range: give 0 to 100"
            )));
        }
        let checkpoint = checkpoint_json
            .map(|c| parse_json("checkpoint", c))
            .transpose()?;
        let progress = Progress {
            percent,
            message,
            checkpoint,
        };
        self.wait(py, self.ctx.heartbeat(progress))
            .map_err(exec_error)
    }

    /// The checkpoint an earlier attempt saved, as JSON text, or None.
    fn checkpoint_json(&self, py: Python<'_>) -> PyResult<Option<String>> {
        let cp = self.wait(py, self.ctx.checkpoint()).map_err(exec_error)?;
        Ok(cp.map(|v| v.to_string()))
    }

    /// Save a checkpoint (JSON text) for the next attempt; false when the
    /// attempt is no longer ours (nothing saved).
    fn save_checkpoint(&self, py: Python<'_>, checkpoint_json: &str) -> PyResult<bool> {
        let value = parse_json("checkpoint", checkpoint_json)?;
        self.wait(py, self.ctx.save_checkpoint(value))
            .map_err(exec_error)
    }
}
