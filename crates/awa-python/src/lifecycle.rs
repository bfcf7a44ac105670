//! What a Python worker declares beside its handlers, as the Rust
//! client has it: periodic jobs (`Worker.cron`), lifecycle hooks
//! (`Worker.on_event` and friends) and the in-process test run
//! (`awa.testing.work_one`).

use crate::error::ValidationError;
use crate::in_python::InPython;
use awa::planes::exec::worker::Worked;
use pyo3::prelude::*;
use std::sync::Arc;

fn invalid(e: impl std::fmt::Display) -> PyErr {
    ValidationError::new_err(e.to_string())
}

/// A schedule from `Worker.cron`'s arguments, checked with the Rust
/// client's rules (name, expression, zone, queue, kind, priority, missed
/// policy) so a bad one is refused where it is written.
#[allow(clippy::too_many_arguments)]
pub(crate) fn schedule(
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
) -> PyResult<awa::Schedule> {
    let mut s = awa::Schedule::new(name, cron, queue, kind);
    s.args = serde_json::from_str(args_json)
        .map_err(|e| invalid(format!("the schedule's args are not valid JSON: {e}")))?;
    s.metadata = metadata_json
        .map(serde_json::from_str)
        .transpose()
        .map_err(|e| invalid(format!("the schedule's metadata is not valid JSON: {e}")))?;
    s.priority = priority;
    s.max_attempts = max_attempts;
    if let Some(tz) = timezone {
        s.timezone = tz;
    }
    if let Some(limit) = catch_up {
        s.missed = awa::Missed::CatchUp { limit };
    }
    s.validate().map_err(invalid)?;
    Ok(s)
}

/// A Rust lifecycle hook that calls the Python `hook` with the event's
/// fields. It runs on the worker's hook task, in commit order; an
/// exception is logged and the next event still comes. Counted in
/// `InPython`, so the worker's `run()` returns only once no hook is
/// inside Python.
pub(crate) fn hook(
    hook: Arc<Py<PyAny>>,
    in_python: Arc<InPython>,
) -> impl Fn(&awa::JobEvent) + Send + Sync + 'static {
    move |e: &awa::JobEvent| {
        let _counted = in_python.enter();
        Python::attach(|py| {
            let args = (
                e.job_id.0,
                e.run_lease.0,
                e.queue.as_str(),
                e.kind.as_str(),
                e.attempt,
                e.state.as_str(),
                e.error.as_deref(),
            );
            if let Err(err) = hook.call1(py, args) {
                tracing::error!(job_id = e.job_id.0, error = %err,
                    "a Python lifecycle hook raised; the next event is still reported");
            }
        })
    }
}

/// What `work_one` did, as JSON for `awa.testing.work_one`.
pub(crate) fn worked_json(w: &Worked) -> String {
    serde_json::json!({
        "job_id": w.job.token.job_id.0,
        "run_lease": w.job.token.run_lease.0,
        "kind": w.job.kind,
        "queue": w.job.queue.as_str(),
        "attempt": w.job.attempt,
        "accepted": w.finished.accepted,
        "state": w.finished.next_state.map(|s| s.as_str()),
    })
    .to_string()
}
