//! `awa worker run`'s traces: when the standard OpenTelemetry environment
//! names an OTLP endpoint (`OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`, else
//! `OTEL_EXPORTER_OTLP_ENDPOINT`), each attempt runs in the `awa.execute`
//! span of `awa::otel::Traces` (a child of the producer's context stored
//! in the job's metadata) and the spans are exported over OTLP/HTTP with
//! protobuf. Without an endpoint nothing is built: no provider, no
//! exporter, no middleware around the handler.

use crate::error::CliError;
use opentelemetry::trace::TracerProvider as _;
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::trace::SdkTracerProvider;

/// Where the endpoint may be given, the signal's own first (as the SDK
/// reads them).
const ENDPOINT_VARS: [&str; 2] = [
    "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
    "OTEL_EXPORTER_OTLP_ENDPOINT",
];
const PROTOCOL_VARS: [&str; 2] = [
    "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL",
    "OTEL_EXPORTER_OTLP_PROTOCOL",
];
/// The one protocol built in (no gRPC, no JSON: see the workspace's
/// `opentelemetry-otlp` features).
const PROTOCOL: &str = "http/protobuf";
/// `service.name` when neither OTEL_SERVICE_NAME nor
/// OTEL_RESOURCE_ATTRIBUTES names one.
const DEFAULT_SERVICE: &str = "awa-worker";

/// A configured export: the provider the worker's spans go to.
#[derive(Debug)]
pub struct Export {
    provider: SdkTracerProvider,
    /// The variable that named the endpoint, and its value (to say so).
    pub from: (&'static str, String),
}

fn var(name: &str) -> Option<String> {
    std::env::var(name)
        .ok()
        .map(|v| v.trim().to_string())
        .filter(|v| !v.is_empty())
}

/// The export the environment asks for, or None (nothing set up) when it
/// names no endpoint or turns traces off (`OTEL_SDK_DISABLED=true`,
/// `OTEL_TRACES_EXPORTER=none`). Checked before the worker connects: an
/// endpoint the exporter cannot use is a usage error.
pub fn from_env() -> Result<Option<Export>, CliError> {
    if var("OTEL_SDK_DISABLED").is_some_and(|v| v.eq_ignore_ascii_case("true"))
        || var("OTEL_TRACES_EXPORTER").is_some_and(|v| v.eq_ignore_ascii_case("none"))
    {
        return Ok(None);
    }
    let Some(from) = ENDPOINT_VARS
        .iter()
        .find_map(|&name| var(name).map(|value| (name, value)))
    else {
        return Ok(None);
    };
    if let Some((name, protocol)) = PROTOCOL_VARS
        .iter()
        .find_map(|&name| var(name).map(|value| (name, value)))
        && protocol != PROTOCOL
    {
        return Err(CliError::Usage(format!(
            "{name}={protocol}: awa worker run exports traces over {PROTOCOL} only; \
             unset it or set it to {PROTOCOL}"
        )));
    }
    let (name, endpoint) = &from;
    if !endpoint.starts_with("http://") {
        return Err(CliError::Usage(format!(
            "{name}={endpoint}: awa worker run exports traces over plain http:// (to a \
             collector beside it, which may forward over TLS)"
        )));
    }
    // The exporter reads the endpoint, headers, timeout and compression
    // from the same variables.
    let exporter = opentelemetry_otlp::SpanExporter::builder()
        .with_http()
        .build()
        .map_err(|err| CliError::Usage(format!("{name}={endpoint}: {err}")))?;
    let mut resource = Resource::builder();
    let named = var("OTEL_SERVICE_NAME").is_some()
        || var("OTEL_RESOURCE_ATTRIBUTES").is_some_and(|a| {
            a.split(',')
                .any(|kv| kv.trim_start().starts_with("service.name="))
        });
    if !named {
        resource = resource.with_service_name(DEFAULT_SERVICE);
    }
    let provider = SdkTracerProvider::builder()
        .with_batch_exporter(exporter)
        .with_resource(resource.build())
        .build();
    Ok(Some(Export { provider, from }))
}

impl Export {
    /// The middleware that runs each attempt in its span.
    pub fn middleware(&self) -> awa::otel::Traces {
        awa::otel::Traces::new(self.provider.tracer("awa"))
    }

    /// Export what is still buffered, then stop (the SDK's batch thread
    /// blocks while it sends, so off the async workers).
    pub async fn shutdown(self) {
        let provider = self.provider;
        match tokio::task::spawn_blocking(move || provider.shutdown()).await {
            Ok(Ok(())) => {}
            Ok(Err(err)) => {
                tracing::warn!(error = %err, "the trace exporter did not shut down cleanly")
            }
            Err(err) => tracing::warn!(error = %err, "the trace exporter's shutdown failed"),
        }
    }
}
