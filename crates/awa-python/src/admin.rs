//! Admin reads and actions for Python, over the plane crates (no SQL
//! here): one job by id (with its attempts), queue stats, the dead-letter
//! queue, cancel, and retry and cancel by selection.
//! Results cross to Python as JSON text; `awa.Client` decodes them.

use crate::error::{plane, to_py};
use awa_core::{JobId, JobSelection, JobState, QueueName};
use awa_dlq::{DlqPlane, PgDlqPlane, Selection};
use awa_history::{HistoryPlane, PgHistoryPlane};
use pyo3::prelude::*;

/// The native half of `awa.Client`: a small pool on one database.
#[pyclass(module = "awa._awa", frozen)]
pub(crate) struct NativeClient {
    client: awa::Client,
}

fn json(value: &impl serde::Serialize) -> String {
    serde_json::to_string(value).expect("plain data serializes")
}

fn queue_name(queue: Option<String>) -> PyResult<Option<QueueName>> {
    queue
        .map(QueueName::new)
        .transpose()
        .map_err(|e| crate::error::ValidationError::new_err(e.to_string()))
}

impl NativeClient {
    /// Wait for `fut` on the shared runtime without holding the GIL.
    fn block<T: Send>(
        &self,
        py: Python<'_>,
        fut: impl std::future::Future<Output = PyResult<T>> + Send,
    ) -> PyResult<T> {
        py.detach(|| crate::runtime().block_on(fut))
    }

    fn parts(&self) -> (awa::sqlx::PgPool, awa::SchemaName) {
        (self.client.pool().clone(), self.client.schema().clone())
    }
}

async fn acquire(
    pool: &awa::sqlx::PgPool,
) -> PyResult<awa::sqlx::pool::PoolConnection<awa::sqlx::Postgres>> {
    pool.acquire().await.map_err(|e| to_py(e.into()))
}

#[pymethods]
impl NativeClient {
    /// Connect a pool of up to `max_connections` to `url` and check the
    /// database is migrated.
    #[new]
    #[pyo3(signature = (url, max_connections=4))]
    fn new(py: Python<'_>, url: String, max_connections: u32) -> PyResult<Self> {
        let client = py
            .detach(|| crate::runtime().block_on(awa::Client::connect(&url, max_connections)))
            .map_err(to_py)?;
        Ok(Self { client })
    }

    /// One job (any state) as JSON, or None when unknown.
    fn job_json(&self, py: Python<'_>, id: i64) -> PyResult<Option<String>> {
        let client = self.client.clone();
        let view = self.block(
            py,
            async move { client.job(JobId(id)).await.map_err(to_py) },
        )?;
        Ok(view.as_ref().map(json))
    }

    /// Jobs per state per queue (all queues with jobs, or one), as JSON.
    #[pyo3(signature = (queue=None))]
    fn queue_stats_json(&self, py: Python<'_>, queue: Option<String>) -> PyResult<String> {
        let queue = queue_name(queue)?;
        let (pool, schema) = self.parts();
        self.block(py, async move {
            let mut conn = acquire(&pool).await?;
            let stats = PgHistoryPlane::new(schema)
                .queue_stats(&mut conn, queue.as_ref())
                .await
                .map_err(plane)?;
            Ok(json(&stats))
        })
    }

    /// Dead-lettered jobs, oldest first, as JSON.
    #[pyo3(signature = (queue=None, limit=100))]
    fn dlq_list_json(&self, py: Python<'_>, queue: Option<String>, limit: i64) -> PyResult<String> {
        let queue = queue_name(queue)?;
        let limit = awa_core::bounds::LIST_LIMIT
            .check(limit)
            .map_err(|e| crate::error::ValidationError::new_err(e.to_string()))?;
        let (pool, schema) = self.parts();
        self.block(py, async move {
            let mut conn = acquire(&pool).await?;
            let entries = PgDlqPlane::new(schema)
                .list(&mut conn, queue.as_ref(), limit)
                .await
                .map_err(plane)?;
            Ok(json(&entries))
        })
    }

    /// Move dead-lettered jobs back to their queues: one by id, or all
    /// (of one queue). JSON `{"retried": [...], "kept": [...]}`.
    #[pyo3(signature = (id=None, queue=None))]
    fn dlq_retry_json(
        &self,
        py: Python<'_>,
        id: Option<i64>,
        queue: Option<String>,
    ) -> PyResult<String> {
        let which = match id {
            Some(id) => Selection::One(JobId(id)),
            None => Selection::All {
                queue: queue_name(queue)?,
            },
        };
        let (pool, schema) = self.parts();
        self.block(py, async move {
            let mut conn = acquire(&pool).await?;
            let done = PgDlqPlane::new(schema)
                .retry(&mut conn, &which)
                .await
                .map_err(plane)?;
            Ok(json(&done))
        })
    }

    /// Put a failed or cancelled job back as fresh work. JSON
    /// `{"matched", "retried", "kept", "dry_run"}`, or None when no
    /// substrate keeps a failure of that job.
    fn retry_json(&self, py: Python<'_>, id: i64) -> PyResult<Option<String>> {
        let client = self.client.clone();
        let done = self.block(
            py,
            async move { client.retry(JobId(id)).await.map_err(to_py) },
        )?;
        Ok(done.as_ref().map(json))
    }

    /// Retry (`action = "retry"`) or cancel (`"cancel"`) every job of
    /// `queue` matching the filters, or only count them with `dry_run`.
    /// JSON as `awa_history::Retried` / `awa_exec::BulkCancelled`.
    #[pyo3(signature = (action, queue, state=None, kind=None, args_contains_json=None, dry_run=false))]
    #[allow(clippy::too_many_arguments)]
    fn bulk_json(
        &self,
        py: Python<'_>,
        action: &str,
        queue: String,
        state: Option<String>,
        kind: Option<String>,
        args_contains_json: Option<String>,
        dry_run: bool,
    ) -> PyResult<String> {
        let invalid = |e: String| crate::error::ValidationError::new_err(e);
        let selection = JobSelection {
            queue: QueueName::new(queue).map_err(|e| invalid(e.to_string()))?,
            state: state
                .as_deref()
                .map(str::parse::<JobState>)
                .transpose()
                .map_err(invalid)?,
            kind,
            args_contains: args_contains_json
                .as_deref()
                .map(serde_json::from_str::<serde_json::Value>)
                .transpose()
                .map_err(|e| invalid(format!("args_contains is not JSON: {e}")))?,
        };
        let checked = match action {
            "retry" => selection.validate(awa_core::SelectionFor::Retry),
            "cancel" => selection.validate(awa_core::SelectionFor::Cancel),
            other => {
                return Err(invalid(format!(
                    "unknown bulk action {other:?}: retry or cancel"
                )));
            }
        };
        checked.map_err(|e| invalid(e.to_string()))?;
        let client = self.client.clone();
        match action {
            "retry" => self.block(py, async move {
                let done = client
                    .retry_matching(&selection, dry_run)
                    .await
                    .map_err(to_py)?;
                Ok(json(&done))
            }),
            _ => self.block(py, async move {
                let done = client
                    .cancel_matching(&selection, dry_run)
                    .await
                    .map_err(to_py)?;
                Ok(json(&done))
            }),
        }
    }

    /// Cancel a job wherever it is; the state it was cancelled from, or
    /// None when unknown or already finished.
    fn cancel(&self, py: Python<'_>, id: i64) -> PyResult<Option<String>> {
        let client = self.client.clone();
        self.block(
            py,
            async move { client.cancel(JobId(id)).await.map_err(to_py) },
        )
    }
}
