//! Middleware: code that wraps every enqueue and every execution of a
//! client, for tenant context, logging, metrics, authorization and traces.
//!
//! A [`Middleware`] is layered on a [`crate::ClientBuilder`] (execution
//! and the started client's inserts) or on a producer [`crate::Client`]
//! with [`crate::Client::with_middleware`]. Each of its two methods gets
//! the work and a `next` to pass it on with; not calling `next` refuses
//! it. Why a trait of our own and not `tower`: ADR 15.
//!
//! **Order.** Middleware added first is outermost: on the way in it runs
//! first, on the way out (after `next` returns) last. With `a` then `b`
//! added, an execution runs `a` before, `b` before, the handler, `b`
//! after, `a` after.
//!
//! **Errors.** An enqueue middleware that returns `Err` without calling
//! `next` refuses the insert: nothing is written and the caller gets the
//! error (use [`crate::Error::Refused`]). One that calls `next` sees the
//! insert's own error and may replace it. An execution middleware returns
//! a [`HandlerResult`] like a handler: a [`JobError`] it
//! returns (or the handler's, passed on) is what the worker records, and
//! the retry policy applies to it as to a handler's (a `Retry` gets the
//! kind's or queue's backoff; `Permanent` fails the job). The retry policy
//! sits outside every middleware, so middleware sees the plain `Retry` a
//! handler returned. A panic is not caught here: it is the worker's, as a
//! handler's is.
//!
//! Nothing here runs when no middleware is added: the insert and the
//! handler are called directly.

use crate::{Error, Inserted};
use async_trait::async_trait;
use awa_core::NewJob;
use awa_exec::worker::{Handler, HandlerResult, JobContext, JobError};
use std::sync::Arc;

/// Code that wraps enqueue and execution. Both methods have a default
/// that passes the work on unchanged, so implement only the side you need.
///
/// ```
/// use awa::middleware::{EnqueueNext, ExecuteNext, Middleware};
/// use awa::{HandlerResult, Inserted, JobContext, NewJob};
///
/// /// Only tenants that exist may enqueue; every job carries its tenant.
/// struct Tenants;
///
/// #[async_trait::async_trait]
/// impl Middleware for Tenants {
///     async fn enqueue(
///         &self,
///         jobs: Vec<NewJob>,
///         next: EnqueueNext<'_>,
///     ) -> Result<Vec<Inserted>, awa::Error> {
///         if jobs.iter().any(|j| j.args.get("tenant").is_none()) {
///             return Err(awa::Error::Refused("every job needs a tenant".into()));
///         }
///         next.run(jobs).await
///     }
///
///     async fn execute(&self, ctx: JobContext, next: ExecuteNext<'_>) -> HandlerResult {
///         let tenant = ctx.job.args["tenant"].to_string();
///         tracing::info!(%tenant, "running a job");
///         next.run(ctx).await
///     }
/// }
/// ```
#[async_trait]
pub trait Middleware: Send + Sync + 'static {
    /// Wrap one insert call (one job, or a batch: `insert_many`,
    /// `insert_many_copy`, `insert_raw`), before anything is written. May
    /// change the jobs (metadata, say), refuse them (return an error
    /// without calling `next`), or look at the results.
    async fn enqueue(
        &self,
        jobs: Vec<NewJob>,
        next: EnqueueNext<'_>,
    ) -> Result<Vec<Inserted>, Error> {
        next.run(jobs).await
    }

    /// Wrap one attempt of a job: the handler runs when `next.run(ctx)`
    /// is awaited (so a task-local set around it is seen by the handler).
    async fn execute(&self, ctx: JobContext, next: ExecuteNext<'_>) -> HandlerResult {
        next.run(ctx).await
    }
}

/// The middleware of a client, outermost first.
#[derive(Clone, Default)]
pub(crate) struct Chain(Arc<[Arc<dyn Middleware>]>);

impl std::fmt::Debug for Chain {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Chain({} middleware)", self.0.len())
    }
}

impl Chain {
    pub(crate) fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// This chain with `m` added innermost.
    pub(crate) fn with(&self, m: Arc<dyn Middleware>) -> Self {
        let mut all: Vec<_> = self.0.iter().cloned().collect();
        all.push(m);
        Self(all.into())
    }

    pub(crate) fn layers(&self) -> &[Arc<dyn Middleware>] {
        &self.0
    }
}

/// How the jobs are finally written: the array path or COPY.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Path {
    Array,
    Copy,
}

/// The rest of an enqueue: the inner middleware, then the insert itself.
pub struct EnqueueNext<'a> {
    pub(crate) rest: &'a [Arc<dyn Middleware>],
    pub(crate) client: &'a crate::Client,
    pub(crate) conn: &'a mut sqlx::PgConnection,
    pub(crate) path: Path,
}

impl std::fmt::Debug for EnqueueNext<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EnqueueNext")
            .field("remaining", &self.rest.len())
            .finish_non_exhaustive()
    }
}

impl EnqueueNext<'_> {
    /// Pass `jobs` on; returns one result per job, in order.
    pub async fn run(self, jobs: Vec<NewJob>) -> Result<Vec<Inserted>, Error> {
        match self.rest.split_first() {
            Some((first, rest)) => {
                first
                    .enqueue(
                        jobs,
                        EnqueueNext {
                            rest,
                            client: self.client,
                            conn: self.conn,
                            path: self.path,
                        },
                    )
                    .await
            }
            None => self.client.write(self.conn, &jobs, self.path).await,
        }
    }
}

/// The rest of an execution: the inner middleware, then the handler.
pub struct ExecuteNext<'a> {
    rest: &'a [Arc<dyn Middleware>],
    handler: &'a dyn Handler,
}

impl std::fmt::Debug for ExecuteNext<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ExecuteNext")
            .field("remaining", &self.rest.len())
            .finish_non_exhaustive()
    }
}

impl ExecuteNext<'_> {
    /// Run the rest of the chain and the handler on `ctx`.
    pub async fn run(self, ctx: JobContext) -> HandlerResult {
        match self.rest.split_first() {
            Some((first, rest)) => {
                first
                    .execute(
                        ctx,
                        ExecuteNext {
                            rest,
                            handler: self.handler,
                        },
                    )
                    .await
            }
            None => self.handler.handle(ctx).await,
        }
    }
}

/// `handler` with `middleware` around it, for a worker built on
/// `awa_exec::worker::Worker` directly rather than by a
/// [`crate::ClientBuilder`] (as `awa worker run` is): the same wrapping the
/// builder gives a registered handler.
pub fn around(handler: impl Handler, middleware: impl Middleware) -> impl Handler {
    Wrapped {
        chain: Chain::default().with(Arc::new(middleware)),
        inner: Arc::new(handler),
    }
}

/// A handler with the chain around it (only built when the chain is not
/// empty).
pub(crate) struct Wrapped {
    pub chain: Chain,
    pub inner: Arc<dyn Handler>,
}

#[async_trait]
impl Handler for Wrapped {
    async fn handle(&self, ctx: JobContext) -> HandlerResult {
        ExecuteNext {
            rest: self.chain.layers(),
            handler: self.inner.as_ref(),
        }
        .run(ctx)
        .await
    }

    /// A timeout is decided outside the chain (the handler's future was
    /// dropped); the inner handler says what it becomes.
    fn timed_out(&self, job: &awa_core::ClaimedJob, error: JobError) -> HandlerResult {
        self.inner.timed_out(job, error)
    }
}
