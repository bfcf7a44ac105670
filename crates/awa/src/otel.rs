//! Traces from enqueue to execution (feature `otel`): the [`Traces`]
//! middleware stores the producer's OpenTelemetry trace context in each
//! job's metadata, and runs each attempt in a span whose parent is that
//! context.
//!
//! **Producer.** At enqueue, the context of the current `tracing` span
//! (through `tracing-opentelemetry`, when the application installs its
//! layer), else the current OpenTelemetry [`Context`], is written as W3C
//! trace context into the job's metadata under [`METADATA_KEY`]:
//! `{"awa_trace": {"traceparent": "00-…-…-01", "tracestate": "…"}}`
//! (`tracestate` only when there is one). Nothing is written when there is
//! no valid span, when the metadata is not a JSON object, or when it has
//! an `awa_trace` already (set by hand, or by the SQL producer's
//! `p_traceparent`). The Python producer and the SQL producer store the
//! same shape.
//!
//! **Execution.** Each attempt runs in a span `awa.execute` of kind
//! `Consumer`, a child of the stored context (a root span when the job has
//! none), with the attributes `awa.queue`, `awa.kind`, `awa.job_id`,
//! `awa.attempt` and, when the attempt ends, `awa.outcome` (`completed`,
//! `snoozed`, `cancelled`, `retry` or `failed`: the result as the handler
//! and the middleware inside this one returned it; an error also sets the
//! span's status). The span is the current OpenTelemetry context while the
//! handler runs, so spans the handler starts with the OpenTelemetry API
//! are its children.
//!
//! **Export** is the tracer's: give [`Traces::new`] a tracer from a
//! provider with the OTLP exporter (`opentelemetry-otlp`), or use
//! [`Traces::global`] for the global provider. Without the middleware
//! nothing is read, written or exported.

use crate::middleware::{EnqueueNext, ExecuteNext, Middleware};
use crate::{Error, Inserted};
use async_trait::async_trait;
use awa_core::NewJob;
use awa_exec::worker::{HandlerResult, JobContext, JobError, Outcome};
use opentelemetry::context::FutureExt as _;
use opentelemetry::global::BoxedTracer;
use opentelemetry::propagation::TextMapPropagator as _;
use opentelemetry::trace::{SpanKind, Status, TraceContextExt as _, Tracer};
use opentelemetry::{Context, KeyValue};
use opentelemetry_sdk::propagation::TraceContextPropagator;
use std::collections::HashMap;
use tracing_opentelemetry::OpenTelemetrySpanExt as _;

/// The metadata member that carries a job's trace context.
pub use awa_core::trace::METADATA_KEY;

/// The middleware that propagates trace context and traces attempts: add
/// it to a worker's [`crate::ClientBuilder::middleware`] and to producer
/// clients ([`crate::Client::with_middleware`]). Added first, its span
/// covers the other middleware too.
pub struct Traces {
    tracer: BoxedTracer,
}

impl std::fmt::Debug for Traces {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Traces").finish_non_exhaustive()
    }
}

impl Traces {
    /// Trace attempts with `tracer` (from the application's provider).
    pub fn new<T>(tracer: T) -> Self
    where
        T: Tracer + Send + Sync + 'static,
        T::Span: Send + Sync + 'static,
    {
        Self {
            tracer: BoxedTracer::new(Box::new(tracer)),
        }
    }

    /// Trace attempts with the global tracer provider's tracer `awa`
    /// (`opentelemetry::global::set_tracer_provider`).
    pub fn global() -> Self {
        Self {
            tracer: opentelemetry::global::tracer("awa"),
        }
    }
}

/// The producer's context: the current `tracing` span's, else the current
/// OpenTelemetry context.
fn producer_context() -> Context {
    let cx = tracing::Span::current().context();
    if cx.span().span_context().is_valid() {
        cx
    } else {
        Context::current()
    }
}

/// `cx` as the metadata member: None without a valid span.
pub fn inject(cx: &Context) -> Option<serde_json::Value> {
    if !cx.span().span_context().is_valid() {
        return None;
    }
    let mut carrier: HashMap<String, String> = HashMap::new();
    TraceContextPropagator::new().inject_context(cx, &mut carrier);
    let mut member = serde_json::Map::new();
    for key in ["traceparent", "tracestate"] {
        if let Some(value) = carrier.remove(key).filter(|v| !v.is_empty()) {
            member.insert(key.into(), value.into());
        }
    }
    member
        .contains_key("traceparent")
        .then_some(serde_json::Value::Object(member))
}

/// The context a job's metadata carries (an empty one when it has none or
/// it does not parse).
pub fn extract(metadata: Option<&serde_json::Value>) -> Context {
    let Some(member) = metadata
        .and_then(|m| m.get(METADATA_KEY))
        .and_then(|t| t.as_object())
    else {
        return Context::new();
    };
    let carrier: HashMap<String, String> = member
        .iter()
        .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_string())))
        .collect();
    TraceContextPropagator::new().extract_with_context(&Context::new(), &carrier)
}

/// Store `member` in `job`'s metadata unless it has one already (or its
/// metadata is not an object).
fn stamp(job: &mut NewJob, member: &serde_json::Value) {
    let metadata = job.metadata.get_or_insert_with(|| serde_json::json!({}));
    if let Some(map) = metadata.as_object_mut() {
        map.entry(METADATA_KEY).or_insert_with(|| member.clone());
    }
}

fn outcome(result: &HandlerResult) -> &'static str {
    match result {
        Ok(Outcome::Complete) => "completed",
        Ok(Outcome::Snooze(_)) => "snoozed",
        Ok(Outcome::Cancel(_)) => "cancelled",
        Err(JobError::Retry(_) | JobError::RetryAfter(..)) => "retry",
        Err(JobError::Permanent(_)) => "failed",
    }
}

#[async_trait]
impl Middleware for Traces {
    async fn enqueue(
        &self,
        mut jobs: Vec<NewJob>,
        next: EnqueueNext<'_>,
    ) -> Result<Vec<Inserted>, Error> {
        if let Some(member) = inject(&producer_context()) {
            for job in &mut jobs {
                stamp(job, &member);
            }
        }
        next.run(jobs).await
    }

    async fn execute(&self, ctx: JobContext, next: ExecuteNext<'_>) -> HandlerResult {
        let parent = extract(ctx.metadata());
        let span = self
            .tracer
            .span_builder("awa.execute")
            .with_kind(SpanKind::Consumer)
            .with_attributes([
                KeyValue::new("messaging.system", "awa"),
                KeyValue::new("awa.queue", ctx.job.queue.as_str().to_string()),
                KeyValue::new("awa.kind", ctx.job.kind.clone()),
                KeyValue::new("awa.job_id", ctx.job.token.job_id.0),
                KeyValue::new("awa.attempt", i64::from(ctx.attempt())),
            ])
            .start_with_context(&self.tracer, &parent);
        let cx = parent.with_span(span);
        let result = next.run(ctx).with_context(cx.clone()).await;
        let span = cx.span();
        span.set_attribute(KeyValue::new("awa.outcome", outcome(&result)));
        if let Err(err) = &result {
            span.set_status(Status::error(err.to_string()));
        }
        span.end();
        result
    }
}
