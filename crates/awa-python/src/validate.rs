//! The checks a job passes before the Python producer sends it: the Rust
//! client's own (`awa_core`), so a job the Python side accepts is one the
//! Rust side would accept too.

use crate::error::ValidationError;
use awa_core::{NewJob, Priority, QueueName};
use pyo3::prelude::*;

fn invalid(e: impl std::fmt::Display) -> PyErr {
    ValidationError::new_err(e.to_string())
}

/// Check one job (args and metadata as JSON text) and raise
/// `ValidationError` saying what is wrong: queue name, kind, priority,
/// max attempts, unique key, size.
#[pyfunction]
#[pyo3(signature = (queue, kind, args_json, priority, max_attempts=None, unique_key=None, metadata_json=None))]
pub(crate) fn validate_job(
    queue: &str,
    kind: &str,
    args_json: &str,
    priority: i64,
    max_attempts: Option<i64>,
    unique_key: Option<String>,
    metadata_json: Option<&str>,
) -> PyResult<()> {
    let queue = QueueName::new(queue).map_err(invalid)?;
    let args: serde_json::Value = serde_json::from_str(args_json)
        .map_err(|e| invalid(format!("the job args are not valid JSON: {e}")))?;
    let metadata = metadata_json
        .map(serde_json::from_str::<serde_json::Value>)
        .transpose()
        .map_err(|e| invalid(format!("the job metadata is not valid JSON: {e}")))?;
    let max_attempts = max_attempts
        .map(|n| awa_core::bounds::MAX_ATTEMPTS.check(n).map(|n| n as i32))
        .transpose()
        .map_err(invalid)?;
    let mut job = NewJob::new(queue, kind, args);
    job.priority = Priority::new(priority).map_err(invalid)?;
    job.max_attempts = max_attempts;
    job.unique_key = unique_key;
    job.metadata = metadata;
    job.validate().map_err(invalid)?;
    job.check_size(NewJob::DEFAULT_MAX_BYTES).map_err(invalid)?;
    Ok(())
}

/// Check a key spec with `awa_core::Unique`'s rules and return it as the
/// JSON `awa.enqueue` takes (the same text the Rust client sends), or
/// raise `ValidationError` saying what is wrong.
#[pyfunction]
#[pyo3(signature = (by_queue, by_args, fields, period_secs=None, states=None))]
pub(crate) fn unique_spec(
    by_queue: bool,
    by_args: bool,
    fields: Vec<String>,
    period_secs: Option<f64>,
    states: Option<Vec<String>>,
) -> PyResult<String> {
    let period = period_secs
        .map(|secs| {
            std::time::Duration::try_from_secs_f64(secs).map_err(|_| {
                invalid(format!(
                    "unique period must be whole seconds from 1 to 31622400 (366 days), not {secs}"
                ))
            })
        })
        .transpose()?;
    let states = states
        .map(|names| {
            names
                .iter()
                .map(|n| n.parse::<awa_core::JobState>().map_err(invalid))
                .collect::<PyResult<Vec<_>>>()
        })
        .transpose()?;
    let spec = awa_core::Unique {
        by_queue,
        by_args,
        fields,
        period,
        states,
    };
    spec.validate().map_err(invalid)?;
    Ok(spec.to_json().to_string())
}

/// A job timeout in seconds, checked against `awa_core::bounds::JOB_TIMEOUT`
/// (1 ms to 7 days), as the whole milliseconds stored in a job's metadata
/// (`awa_core::timeout::METADATA_KEY`); raises `ValidationError` saying
/// what is wrong.
#[pyfunction]
pub(crate) fn job_timeout_ms(seconds: f64) -> PyResult<u64> {
    let timeout = std::time::Duration::try_from_secs_f64(seconds).map_err(|_| {
        invalid(format!(
            "timeout must be a positive number of seconds, not {seconds}"
        ))
    })?;
    let timeout = awa_core::bounds::JOB_TIMEOUT
        .check(timeout)
        .map_err(invalid)?;
    let mut metadata = None;
    awa_core::timeout::set(&mut metadata, timeout).map_err(invalid)?;
    Ok(awa_core::timeout::of(metadata.as_ref()).map_or(0, |t| t.as_millis() as u64))
}
