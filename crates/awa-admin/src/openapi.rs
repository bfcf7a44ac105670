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
            read-only and answers them 403. Every error is `{\"error\": {\"code\", \"message\"}}`.",
        license(name = "MIT OR Apache-2.0")
    ),
    paths(
        system::info, queues::list, queues::pause, queues::resume, activity::activity, jobs::list,
        jobs::detail, jobs::cancel, dlq::list, dlq::retry, dlq::purge, system::storage,
        system::runtimes, system::cron, cron::pause, cron::resume, cron::run_now,
        crate::metrics::scrape
    ),
    components(schemas(crate::ErrorBody, crate::ErrorDetail, model::ServerInfo)),
    modifiers(&BearerAuth),
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
