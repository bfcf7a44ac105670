//! `awa._awa`: the native half of the Python package `awa`.
//!
//! Owns: the bindings the pure-Python package (`python/awa/`) is built
//! on: a worker over [`awa::ClientBuilder`] that runs Python handlers
//! (`worker`), the handler's context (`context`), admin reads over
//! the plane crates (`admin`), the Rust validation of a job before the
//! Python producer sends it (`validate`), the producer's one statement
//! (`sql/enqueue.sql`, run by Python on the caller's own connection), and
//! the `awa` command line (`python -m awa`, through `awa_cli`).
//!
//! Does not own: any SQL of its own beyond that statement (every read
//! goes through a plane crate), nor the job runtime: claims, batching,
//! heartbeats, retries and shutdown are `awa`'s and `awa-exec`'s. The
//! Python side owns typed args, the mapping of handler results and
//! exceptions to outcomes, and the psycopg / SQLAlchemy helpers.
//!
//! Threads: Rust never holds the GIL while it waits (on Postgres, a
//! channel or a sleep): every wait runs inside `Python::detach`. Sync
//! handlers run on tokio's blocking pool, taking the GIL only to call;
//! async handlers run on one asyncio loop in a thread the Python side owns.

// PyO3's macros expand to `unsafe` FFI glue; this crate writes none itself.
#![allow(unsafe_code)]

mod admin;
mod context;
mod error;
mod in_python;
mod lifecycle;
mod validate;
mod worker;

use pyo3::prelude::*;
use std::sync::OnceLock;

/// The one tokio runtime of the process, shared by workers, contexts and
/// admin clients. Built on first use.
pub(crate) fn runtime() -> &'static tokio::runtime::Runtime {
    static RUNTIME: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
    RUNTIME.get_or_init(|| {
        tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .thread_name("awa-tokio")
            .build()
            .expect("the tokio runtime starts (threads and a timer)")
    })
}

/// The statement the Python producer runs: `awa.enqueue` with its
/// arguments as text arrays (see the file's header).
const ENQUEUE_SQL: &str = include_str!("../sql/enqueue.sql");

/// Run the `awa` command line with `args` (the program name first) and
/// return its exit code. The GIL is released while it runs.
#[pyfunction]
fn cli_main(py: Python<'_>, args: Vec<String>) -> u8 {
    py.detach(|| awa_cli::run_with_args(args))
}

/// Log to stderr through `tracing`, with `filter` (an `EnvFilter`
/// directive such as "awa=info"); quiet unless called. Once per process.
#[pyfunction]
fn init_logging(filter: &str) -> PyResult<()> {
    let filter = tracing_subscriber::EnvFilter::try_new(filter)
        .map_err(|e| error::ValidationError::new_err(format!("invalid log filter: {e}")))?;
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .try_init();
    Ok(())
}

#[pymodule]
fn _awa(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add("ENQUEUE_SQL", ENQUEUE_SQL)?;
    // 1 runs first, 4 last; the Rust client's default (ADR 12).
    m.add("DEFAULT_PRIORITY", awa_core::Priority::DEFAULT.get())?;
    m.add("AwaError", py.get_type::<error::AwaError>())?;
    m.add("ValidationError", py.get_type::<error::ValidationError>())?;
    m.add_function(wrap_pyfunction!(cli_main, m)?)?;
    m.add_function(wrap_pyfunction!(init_logging, m)?)?;
    m.add_function(wrap_pyfunction!(validate::validate_job, m)?)?;
    m.add_function(wrap_pyfunction!(validate::unique_spec, m)?)?;
    m.add_function(wrap_pyfunction!(validate::job_timeout_ms, m)?)?;
    m.add("TIMEOUT_METADATA_KEY", awa_core::timeout::METADATA_KEY)?;
    m.add_class::<worker::NativeWorker>()?;
    m.add_class::<context::NativeContext>()?;
    m.add_class::<admin::NativeClient>()?;
    Ok(())
}
