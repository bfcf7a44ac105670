//! What a Python handler sees of its attempt: the job, and heartbeat,
//! progress, checkpoints and cancellation, over `awa::JobContext`. The
//! Python class `awa.Context` wraps this one.

use crate::error::{AwaError, ValidationError};
use awa::{JobContext, Progress};
use pyo3::prelude::*;

/// The native half of `awa.Context` (one per attempt).
#[pyclass(module = "awa._awa", frozen)]
pub(crate) struct NativeContext {
    ctx: JobContext,
}

impl NativeContext {
    pub(crate) fn new(ctx: JobContext) -> Self {
        Self { ctx }
    }

    /// Run `fut` on the shared runtime without holding the GIL. Called
    /// from a handler's thread (tokio's blocking pool or the asyncio
    /// thread), never from a runtime worker.
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
    /// rescued it), as learnt at the last heartbeat.
    fn is_cancelled(&self) -> bool {
        self.ctx.is_cancelled()
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
