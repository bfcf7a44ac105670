//! The OpenAPI document, generated from the handlers and the types they
//! serve; checked in as `docs/openapi.json` (a test fails when the two
//! differ) and served at `/openapi.json`.

use crate::routes::{activity, cron, dlq, jobs, model, queues, system};
use axum::Json;
use utoipa::OpenApi;

#[derive(Debug, OpenApi)]
#[openapi(
    info(
        title = "Awa admin API",
        description = "The operator API of `awa serve`: queues, jobs, the dead-letter queue, \
            storage health, runtimes and cron schedules, plus actions. Actions (every POST) need \
            `Authorization: Bearer <AWA_ADMIN_TOKEN>`; without a configured token the server is \
            read-only and answers them 403. Every request must name this server in `Host` \
            (loopback, the listen address, or a name given with `--allowed-host`); any other is \
            answered 421 `host_not_allowed`. Every error is `{\"error\": {\"code\", \"message\"}}`.",
        license(name = "MIT OR Apache-2.0")
    ),
    paths(
        system::info, queues::list, queues::pause, queues::resume, activity::activity, jobs::list,
        jobs::detail, jobs::cancel, jobs::retry, jobs::retry_matching, jobs::cancel_matching,
        dlq::list, dlq::retry, dlq::purge, system::storage, system::runtimes, system::cron,
        cron::pause, cron::resume, cron::run_now, crate::metrics::scrape
    ),
    components(schemas(crate::ErrorBody, crate::ErrorDetail, model::ServerInfo)),
    modifiers(&BearerAuth, &HostRule),
    security(("bearer" = []))
)]
pub struct ApiDoc;

#[derive(Debug)]
struct BearerAuth;

impl utoipa::Modify for BearerAuth {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
        let components = openapi.components.get_or_insert_with(Default::default);
        components.add_security_scheme(
            "bearer",
            SecurityScheme::Http(HttpBuilder::new().scheme(HttpAuthScheme::Bearer).build()),
        );
    }
}

/// Every operation may be answered 421 by the origin rule (`origin.rs`),
/// which runs before any handler.
#[derive(Debug)]
struct HostRule;

impl utoipa::Modify for HostRule {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        use utoipa::openapi::{ContentBuilder, RefOr, ResponseBuilder};
        let response = ResponseBuilder::new()
            .description("The Host header does not name this server")
            .content(
                "application/json",
                ContentBuilder::new()
                    .schema(Some(RefOr::Ref(utoipa::openapi::Ref::from_schema_name(
                        "ErrorBody",
                    ))))
                    .build(),
            )
            .build();
        for item in openapi.paths.paths.values_mut() {
            for op in [
                &mut item.get,
                &mut item.post,
                &mut item.put,
                &mut item.delete,
                &mut item.patch,
            ]
            .into_iter()
            .flatten()
            {
                op.responses
                    .responses
                    .insert("421".into(), RefOr::T(response.clone()));
            }
        }
    }
}

/// The document as checked in (pretty JSON, trailing newline).
pub fn document_json() -> String {
    let mut text = ApiDoc::openapi()
        .to_pretty_json()
        .expect("the OpenAPI document serializes");
    text.push('\n');
    text
}

/// `GET /openapi.json`.
pub async fn document() -> Json<serde_json::Value> {
    Json(serde_json::to_value(ApiDoc::openapi()).expect("the OpenAPI document serializes"))
}
