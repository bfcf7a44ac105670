//! Traces from enqueue to execution, with an in-memory exporter and a
//! started worker on a real database: the producer's span (an
//! OpenTelemetry span made current, or a `tracing` span through
//! `tracing-opentelemetry`) is the parent of every attempt's span, which
//! carries queue, kind, attempt and outcome; a job enqueued outside any
//! span runs in a root span; and a job whose metadata already carries a
//! trace context (the SQL producer's) keeps it.

use awa::otel::Traces;
use awa::{Client, HandlerResult, JobContext, JobError, JobState, Outcome, RetryPolicy};
use opentelemetry::context::FutureExt as _;
use opentelemetry::trace::{
    Span as _, SpanId, SpanKind, TraceContextExt as _, Tracer as _, TracerProvider as _,
};
use opentelemetry::{Context, Value};
use opentelemetry_sdk::trace::{InMemorySpanExporter, SdkTracerProvider, SpanData};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tracing_subscriber::layer::SubscriberExt as _;

mod common;
use common::wait_for;

#[derive(Debug, Clone, serde::Serialize, serde::Deserialize, awa::Job)]
#[awa(kind = "traced", queue = "traced", max_attempts = 3)]
struct Traced {
    fail_first: bool,
}

fn attr<'a>(span: &'a SpanData, key: &str) -> Option<&'a Value> {
    span.attributes
        .iter()
        .find(|kv| kv.key.as_str() == key)
        .map(|kv| &kv.value)
}

fn executions(exporter: &InMemorySpanExporter, job: awa::JobId) -> Vec<SpanData> {
    let mut spans: Vec<_> = exporter
        .get_finished_spans()
        .unwrap()
        .into_iter()
        .filter(|s| s.name == "awa.execute" && attr(s, "awa.job_id") == Some(&Value::I64(job.0)))
        .collect();
    spans.sort_by_key(|s| match attr(s, "awa.attempt") {
        Some(Value::I64(a)) => *a,
        _ => 0,
    });
    spans
}

fn provider() -> (SdkTracerProvider, InMemorySpanExporter) {
    let exporter = InMemorySpanExporter::default();
    let provider = SdkTracerProvider::builder()
        .with_simple_exporter(exporter.clone())
        .build();
    (provider, exporter)
}

#[tokio::test]
async fn the_producers_span_is_the_parent_of_every_attempts_span() {
    let db = awa::testing::test_db().await.unwrap();
    let pool = db.pool().await.unwrap();
    let (provider, exporter) = provider();

    // Each attempt's handler records the span it runs in.
    let handler_parents: Arc<Mutex<Vec<SpanId>>> = Arc::default();
    let worker = Client::builder(pool.clone())
        .queue("traced", 2)
        .maintenance(awa::MaintSettings {
            promote_interval: Duration::from_millis(50),
            ..Default::default()
        })
        .retry_policy::<Traced>(RetryPolicy::fixed(Duration::from_millis(10)))
        .middleware(Traces::new(provider.tracer("awa")))
        .register::<Traced>({
            let handler_parents = handler_parents.clone();
            move |job: Traced, ctx: JobContext| {
                let handler_parents = handler_parents.clone();
                async move {
                    handler_parents
                        .lock()
                        .unwrap()
                        .push(Context::current().span().span_context().span_id());
                    if job.fail_first && ctx.attempt() == 1 {
                        return Err(JobError::Retry("first attempt fails".into())) as HandlerResult;
                    }
                    Ok(Outcome::Complete)
                }
            }
        })
        .start()
        .await
        .unwrap();

    // A separate producer process would have a client of its own.
    let producer = Client::new(pool.clone()).with_middleware(Traces::new(provider.tracer("app")));
    let app = provider.tracer("app");
    let span = app.start("handle signup");
    let producer_cx = Context::current_with_span(span);
    let producer_span = producer_cx.span().span_context().clone();
    let job = producer
        .insert(&pool, &Traced { fail_first: true })
        .with_context(producer_cx.clone())
        .await
        .unwrap();
    producer_cx.span().end();

    // Stored as W3C trace context in the metadata.
    let view = producer.job(job.id).await.unwrap().expect("inserted");
    let traceparent = view.metadata.as_ref().unwrap()["awa_trace"]["traceparent"]
        .as_str()
        .unwrap()
        .to_string();
    assert_eq!(
        traceparent,
        format!(
            "00-{}-{}-01",
            producer_span.trace_id(),
            producer_span.span_id()
        )
    );

    // Outside any span: nothing stored, and the attempt's span is a root.
    let lone = producer
        .insert(&pool, &Traced { fail_first: false })
        .await
        .unwrap();
    assert_eq!(producer.job(lone.id).await.unwrap().unwrap().metadata, None);

    wait_for(&worker, job.id, JobState::Completed).await;
    wait_for(&worker, lone.id, JobState::Completed).await;
    worker.shutdown(Duration::from_secs(5)).await.unwrap();
    provider.force_flush().unwrap();

    let spans = executions(&exporter, job.id);
    assert_eq!(spans.len(), 2, "one span per attempt: {spans:#?}");
    for (span, (attempt, outcome)) in spans.iter().zip([(1, "retry"), (2, "completed")]) {
        assert_eq!(span.span_context.trace_id(), producer_span.trace_id());
        assert_eq!(span.parent_span_id, producer_span.span_id());
        assert!(span.parent_span_is_remote);
        assert_eq!(span.span_kind, SpanKind::Consumer);
        assert_eq!(attr(span, "awa.queue"), Some(&Value::from("traced")));
        assert_eq!(attr(span, "awa.kind"), Some(&Value::from("traced")));
        assert_eq!(attr(span, "awa.attempt"), Some(&Value::I64(attempt)));
        assert_eq!(attr(span, "awa.outcome"), Some(&Value::from(outcome)));
    }
    assert!(matches!(
        spans[0].status,
        opentelemetry::trace::Status::Error { .. }
    ));

    let lone_spans = executions(&exporter, lone.id);
    assert_eq!(lone_spans.len(), 1);
    assert_eq!(lone_spans[0].parent_span_id, SpanId::INVALID);
    assert_ne!(
        lone_spans[0].span_context.trace_id(),
        producer_span.trace_id()
    );

    // The handler ran inside its attempt's span.
    let mut inside: Vec<String> = handler_parents
        .lock()
        .unwrap()
        .iter()
        .map(|s| s.to_string())
        .collect();
    let mut ours: Vec<String> = spans
        .iter()
        .chain(&lone_spans)
        .map(|s| s.span_context.span_id().to_string())
        .collect();
    inside.sort();
    ours.sort();
    assert_eq!(inside, ours);

    // The exporter saw the producer's span and the attempts, nothing else
    // from awa (no span per enqueue).
    let names: Vec<_> = exporter
        .get_finished_spans()
        .unwrap()
        .into_iter()
        .map(|s| s.name.to_string())
        .collect();
    assert_eq!(names.iter().filter(|n| *n == "awa.execute").count(), 3);
    assert_eq!(names.len(), 4, "{names:?}");
}

#[tokio::test]
async fn a_tracing_span_of_the_producer_is_the_parent_through_tracing_opentelemetry() {
    let db = awa::testing::test_db().await.unwrap();
    let pool = db.pool().await.unwrap();
    let (provider, exporter) = provider();
    let subscriber = tracing_subscriber::registry()
        .with(tracing_opentelemetry::layer().with_tracer(provider.tracer("app")));
    let _default = tracing::subscriber::set_default(subscriber);

    let client = Client::builder(pool.clone())
        .queue("traced", 1)
        .without_maintenance()
        .middleware(Traces::new(provider.tracer("awa")))
        .register::<Traced>(|_job: Traced, _ctx: JobContext| async { Ok(Outcome::Complete) });

    let producer = Client::new(pool.clone()).with_middleware(Traces::new(provider.tracer("app")));
    let span = tracing::info_span!("checkout");
    let job = {
        let _entered = span.enter();
        producer
            .insert(&pool, &Traced { fail_first: false })
            .await
            .unwrap()
    };
    let producer_span = {
        use tracing_opentelemetry::OpenTelemetrySpanExt as _;
        span.context().span().span_context().clone()
    };
    drop(span);
    assert!(producer_span.is_valid());

    let worked = client.work_one("traced").await.unwrap().expect("runnable");
    assert_eq!(worked.job.token.job_id, job.id);
    provider.force_flush().unwrap();
    let spans = executions(&exporter, job.id);
    assert_eq!(spans.len(), 1);
    assert_eq!(spans[0].span_context.trace_id(), producer_span.trace_id());
    assert_eq!(spans[0].parent_span_id, producer_span.span_id());
    assert_eq!(
        attr(&spans[0], "awa.outcome"),
        Some(&Value::from("completed"))
    );
}

#[tokio::test]
async fn the_sql_producers_trace_arguments_make_the_same_parent() {
    let db = awa::testing::test_db().await.unwrap();
    let pool = db.pool().await.unwrap();
    let (provider, exporter) = provider();
    let client = Client::new(pool.clone());
    let worker = Client::builder(pool.clone())
        .middleware(Traces::new(provider.tracer("awa")))
        .register::<Traced>(|_job: Traced, _ctx: JobContext| async { Ok(Outcome::Complete) });

    // Another language's producer, in its own span.
    let span = provider.tracer("other").start("php request");
    let producer = span.span_context().clone();
    let traceparent = format!("00-{}-{}-01", producer.trace_id(), producer.span_id());
    // Three jobs, one call: no metadata, an object of the caller's, and
    // one that carries a context of its own (kept).
    let own = serde_json::json!({ "awa_trace": {
        "traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01" } });
    let ids: Vec<i64> = sqlx::query_scalar(
        "SELECT job_id FROM awa.enqueue(ARRAY['traced', 'traced', 'traced'], \
         ARRAY['traced', 'traced', 'traced'], \
         ARRAY['{\"fail_first\": false}', '{\"fail_first\": false}', '{\"fail_first\": false}']::jsonb[], \
         ARRAY[3, 3, 3]::smallint[], ARRAY[NULL, NULL, NULL]::timestamptz[], \
         ARRAY[NULL, NULL, NULL]::integer[], ARRAY[NULL, NULL, NULL]::text[], \
         ARRAY[NULL, '{\"user\": 7}', $1]::jsonb[], \
         p_traceparent => $2, p_tracestate => 'vendor=x')",
    )
    .bind(&own)
    .bind(&traceparent)
    .fetch_all(&pool)
    .await
    .unwrap();
    drop(span);
    let ids: Vec<awa::JobId> = ids.into_iter().map(awa::JobId).collect();
    let stored = serde_json::json!({ "traceparent": traceparent, "tracestate": "vendor=x" });
    let metadata = |i: usize| {
        let client = client.clone();
        let id = ids[i];
        async move { client.job(id).await.unwrap().unwrap().metadata }
    };
    assert_eq!(
        metadata(0).await,
        Some(serde_json::json!({ "awa_trace": stored }))
    );
    assert_eq!(
        metadata(1).await,
        Some(serde_json::json!({ "user": 7, "awa_trace": stored }))
    );
    assert_eq!(metadata(2).await, Some(own));

    for _ in 0..3 {
        worker.work_one("traced").await.unwrap().expect("runnable");
    }
    provider.force_flush().unwrap();
    for id in &ids[..2] {
        let spans = executions(&exporter, *id);
        assert_eq!(spans.len(), 1);
        assert_eq!(spans[0].span_context.trace_id(), producer.trace_id());
        assert_eq!(spans[0].parent_span_id, producer.span_id());
    }
    let kept = executions(&exporter, ids[2]);
    assert_eq!(
        kept[0].parent_span_id.to_string(),
        "b7ad6b7169203331",
        "the job's own context wins"
    );
}
