//! What a job handler is and what it sees.

use crate::{ExecError, ExecPlane, Finish, PgExecPlane, Progress};
use async_trait::async_trait;
use awa_core::ClaimedJob;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

/// How a handler says its attempt went.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    /// Done: the job is completed.
    Complete,
    /// Run again after the delay; the attempt does not count.
    Snooze(Duration),
    /// Stop for good: the job is cancelled.
    Cancel(String),
}

/// A failed attempt.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum JobError {
    /// Retry with the default backoff (until max attempts).
    #[error("{0}")]
    Retry(String),
    /// Retry after a given delay (until max attempts).
    #[error("{1}")]
    RetryAfter(Duration, String),
    /// Do not retry: fail now (or dead-letter, if the queue opted in).
    #[error("{0}")]
    Permanent(String),
}

/// What a handler returns: how the attempt went, or why it failed.
pub type HandlerResult = Result<Outcome, JobError>;

/// What the worker writes for a handler's result.
pub(crate) fn finish_for(result: HandlerResult) -> Finish {
    match result {
        Ok(Outcome::Complete) => Finish::Complete,
        Ok(Outcome::Snooze(delay)) => Finish::Snooze { delay },
        Ok(Outcome::Cancel(reason)) => Finish::Cancel { reason },
        Err(JobError::Retry(error)) => Finish::Retry { delay: None, error },
        Err(JobError::RetryAfter(delay, error)) => Finish::Retry {
            delay: Some(delay),
            error,
        },
        Err(JobError::Permanent(error)) => Finish::Fail { error },
    }
}

/// A typed async job handler, registered per job kind.
#[async_trait]
pub trait Handler: Send + Sync + 'static {
    /// Run one attempt; its result is recorded once this returns.
    async fn handle(&self, ctx: JobContext) -> HandlerResult;

    /// The result recorded for an attempt of `job` whose handler the worker
    /// stopped at its timeout (its future dropped): `error` is a
    /// [`JobError::Retry`] whose text starts with
    /// [`awa_core::timeout::ERROR_PREFIX`]. A wrapper that maps results
    /// (the `awa` client's retry policies) maps this one too; a wrapper
    /// around another handler forwards it. The default records `error`.
    fn timed_out(&self, job: &ClaimedJob, error: JobError) -> HandlerResult {
        let _ = job;
        Err(error)
    }
}

/// Everything a running attempt can see and do.
#[derive(Debug, Clone)]
pub struct JobContext {
    /// The claimed job: its token, kind, args, attempt and metadata.
    pub job: ClaimedJob,
    pub(crate) pool: sqlx::PgPool,
    pub(crate) plane: Arc<PgExecPlane>,
    pub(crate) shutdown: watch::Receiver<bool>,
    pub(crate) cancel: CancellationToken,
}

impl JobContext {
    /// Keep this attempt alive and optionally report progress. Returns
    /// false when the attempt is no longer ours (cancelled by an operator,
    /// or rescued by maintenance): the handler should stop, since anything
    /// it writes for this attempt will be rejected.
    pub async fn heartbeat(&self, progress: Progress) -> Result<bool, ExecError> {
        let mut conn = self.pool.acquire().await?;
        let ours = self
            .plane
            .heartbeat(&mut conn, &self.job.token, &progress)
            .await?;
        if !ours {
            self.cancel.cancel();
        }
        Ok(ours)
    }

    /// The same as [`JobContext::is_cancelled`].
    pub fn attempt_lost(&self) -> bool {
        self.cancel.is_cancelled()
    }

    /// Which attempt this is (1 for the first run; snoozes do not count).
    pub fn attempt(&self) -> i32 {
        self.job.attempt
    }

    /// The job's metadata, as enqueued.
    pub fn metadata(&self) -> Option<&serde_json::Value> {
        self.job.metadata.as_ref()
    }

    /// True once this attempt is no longer ours: cancelled by an operator
    /// or rescued by maintenance. The worker learns it at once from the
    /// `awa_cancel` notification the cancel commits (or, should the
    /// notification be missed, at the next heartbeat). Its result will be
    /// rejected: stop. A handler still running [`WorkerConfig::cancel_grace`]
    /// (5 s by default) later is dropped and its slot freed.
    ///
    /// [`WorkerConfig::cancel_grace`]: crate::worker::WorkerConfig::cancel_grace
    pub fn is_cancelled(&self) -> bool {
        self.cancel.is_cancelled()
    }

    /// Resolves once this attempt is no longer ours (see
    /// [`JobContext::is_cancelled`]); never, if it stays ours. Select on it
    /// beside the work to stop at once:
    ///
    /// ```ignore
    /// tokio::select! {
    ///     done = do_the_work() => done,
    ///     _ = ctx.cancelled() => Ok(Outcome::Complete), // ignored anyway
    /// }
    /// ```
    pub async fn cancelled(&self) {
        self.cancel.cancelled().await
    }

    /// The checkpoint an earlier attempt of this job saved (see
    /// [`JobContext::save_checkpoint`]); None on a fresh job. Checkpoints
    /// survive retries and rescues and are dropped when the job ends.
    pub async fn checkpoint(&self) -> Result<Option<serde_json::Value>, ExecError> {
        let mut conn = self.pool.acquire().await?;
        self.plane
            .checkpoint(&mut conn, self.job.token.job_id)
            .await
    }

    /// Save a checkpoint for the next attempt to resume from (this also
    /// heartbeats the attempt). False when the attempt is no longer ours:
    /// nothing was saved.
    pub async fn save_checkpoint(&self, checkpoint: serde_json::Value) -> Result<bool, ExecError> {
        self.heartbeat(Progress {
            checkpoint: Some(checkpoint),
            ..Progress::default()
        })
        .await
    }

    /// True once the worker is shutting down: long handlers should wrap up.
    pub fn is_shutting_down(&self) -> bool {
        *self.shutdown.borrow()
    }
}
