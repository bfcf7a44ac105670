//! Typed handlers, and the retry policy applied around every handler.

use crate::{Job, RetryPolicy};
use async_trait::async_trait;
use awa_exec::worker::{Handler, HandlerResult, JobContext, JobError};
use std::collections::HashMap;
use std::future::Future;
use std::marker::PhantomData;
use std::sync::Arc;

/// A handler of typed jobs `J`: any `async fn(J, JobContext) ->
/// HandlerResult` (or closure returning such a future) is one, so this
/// trait is rarely implemented by hand. Give it to
/// [`crate::ClientBuilder::register`].
pub trait JobHandler<J>: Send + Sync + 'static {
    /// Run the handler on one attempt's typed args and context.
    fn call(
        &self,
        job: J,
        ctx: JobContext,
    ) -> std::pin::Pin<Box<dyn Future<Output = HandlerResult> + Send + 'static>>;
}

impl<J, F, Fut> JobHandler<J> for F
where
    F: Fn(J, JobContext) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = HandlerResult> + Send + 'static,
{
    fn call(
        &self,
        job: J,
        ctx: JobContext,
    ) -> std::pin::Pin<Box<dyn Future<Output = HandlerResult> + Send + 'static>> {
        Box::pin(self(job, ctx))
    }
}

/// A typed handler as a worker handler: deserializes the args first.
pub(crate) struct Typed<J, F> {
    f: F,
    _job: PhantomData<fn() -> J>,
}

impl<J, F> Typed<J, F> {
    pub(crate) fn new(f: F) -> Self {
        Self {
            f,
            _job: PhantomData,
        }
    }
}

#[async_trait]
impl<J, F> Handler for Typed<J, F>
where
    J: Job,
    F: JobHandler<J>,
{
    async fn handle(&self, ctx: JobContext) -> HandlerResult {
        // Args that no longer match the type (a changed struct, a job
        // enqueued by hand) cannot succeed on a retry: fail at once, and
        // say what did not match.
        let args: J = serde_json::from_value(ctx.job.args.clone()).map_err(|err| {
            JobError::Permanent(format!(
                "the args of job kind {:?} do not match {}: {err}",
                J::KIND,
                std::any::type_name::<J>()
            ))
        })?;
        self.f.call(args, ctx).await
    }
}

/// Which retry policy applies to a job: its kind's, else its queue's, else
/// the substrate default.
#[derive(Debug, Clone, Default)]
pub(crate) struct Policies {
    pub by_kind: HashMap<String, RetryPolicy>,
    pub by_queue: HashMap<String, RetryPolicy>,
}

impl Policies {
    fn for_job(&self, kind: &str, queue: &str) -> Option<&RetryPolicy> {
        self.by_kind.get(kind).or_else(|| self.by_queue.get(queue))
    }
}

/// Any handler, with the retry policy turning a plain `Retry` into a
/// `RetryAfter` of the policy's delay.
pub(crate) struct WithPolicy {
    pub inner: Arc<dyn Handler>,
    pub policies: Arc<Policies>,
}

/// A plain `Retry` becomes a `RetryAfter` of the policy's delay.
fn with_delay(policy: Option<&RetryPolicy>, attempt: i32, result: HandlerResult) -> HandlerResult {
    match result {
        Err(JobError::Retry(error)) => match policy.and_then(|p| p.delay(attempt)) {
            Some(delay) => Err(JobError::RetryAfter(delay, error)),
            None => Err(JobError::Retry(error)),
        },
        other => other,
    }
}

#[async_trait]
impl Handler for WithPolicy {
    async fn handle(&self, ctx: JobContext) -> HandlerResult {
        let attempt = ctx.attempt();
        let policy = self
            .policies
            .for_job(&ctx.job.kind, ctx.job.queue.as_str())
            .cloned();
        with_delay(policy.as_ref(), attempt, self.inner.handle(ctx).await)
    }

    /// A timeout is a failed attempt like any other: the policy applies.
    fn timed_out(&self, job: &awa_core::ClaimedJob, error: JobError) -> HandlerResult {
        let policy = self.policies.for_job(&job.kind, job.queue.as_str());
        with_delay(policy, job.attempt, self.inner.timed_out(job, error))
    }
}
