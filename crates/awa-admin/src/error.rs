//! The one error shape of the API: `{"error": {"code", "message"}}` with a
//! 4xx that says what was wrong, or a 5xx that says what to do. Database
//! and plane errors are logged here, in full, and never sent: a response
//! carries no SQL, no driver text and no stack trace.

use axum::Json;
use axum::extract::rejection::{JsonRejection, PathRejection, QueryRejection};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};

/// What every error response carries.
#[derive(Debug, serde::Serialize, utoipa::ToSchema)]
pub struct ErrorBody {
    pub error: ErrorDetail,
}

#[derive(Debug, serde::Serialize, utoipa::ToSchema)]
pub struct ErrorDetail {
    /// Stable, machine-readable: `bad_request`, `not_found`,
    /// `unauthorized`, `read_only`, `host_not_allowed`, `payload_too_large`,
    /// `unsupported_media_type`, `method_not_allowed`, `database_error`.
    pub code: String,
    /// For people: what was wrong and what to do.
    pub message: String,
}

#[derive(Debug)]
pub struct ApiError {
    pub status: StatusCode,
    pub code: &'static str,
    pub message: String,
}

impl ApiError {
    pub fn new(status: StatusCode, code: &'static str, message: impl Into<String>) -> Self {
        Self {
            status,
            code,
            message: message.into(),
        }
    }

    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, "bad_request", message)
    }

    pub fn not_found(message: impl Into<String>) -> Self {
        Self::new(StatusCode::NOT_FOUND, "not_found", message)
    }

    pub fn unauthorized(message: impl Into<String>) -> Self {
        Self::new(StatusCode::UNAUTHORIZED, "unauthorized", message)
    }

    pub fn read_only() -> Self {
        Self::new(
            StatusCode::FORBIDDEN,
            "read_only",
            "this server is read-only: actions need a token; restart `awa serve` with \
             AWA_ADMIN_TOKEN set and send it as `Authorization: Bearer <token>`",
        )
    }

    /// A database or plane failure: logged with its detail, answered with
    /// a fixed message.
    pub fn internal(what: &str, err: &dyn std::error::Error) -> Self {
        tracing::error!(error = %err, "admin API: {what} failed");
        Self::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "database_error",
            format!(
                "{what} failed in the database; the server log has the detail. \
                 Check that the database is reachable and migrated, then retry"
            ),
        )
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body = ErrorBody {
            error: ErrorDetail {
                code: self.code.to_string(),
                message: self.message,
            },
        };
        let mut response = (self.status, Json(body)).into_response();
        if self.status == StatusCode::UNAUTHORIZED {
            response
                .headers_mut()
                .insert(header::WWW_AUTHENTICATE, "Bearer".parse().expect("valid"));
        }
        response
    }
}

impl From<awa_core::InvalidInput> for ApiError {
    fn from(err: awa_core::InvalidInput) -> Self {
        Self::bad_request(err.to_string())
    }
}

impl From<QueryRejection> for ApiError {
    fn from(err: QueryRejection) -> Self {
        // serde's message names the parameter and what it expected.
        Self::bad_request(format!("bad query parameters: {}", err.body_text()))
    }
}

impl From<PathRejection> for ApiError {
    fn from(err: PathRejection) -> Self {
        Self::bad_request(format!("bad path: {}", err.body_text()))
    }
}

impl From<JsonRejection> for ApiError {
    fn from(err: JsonRejection) -> Self {
        match err.status() {
            StatusCode::PAYLOAD_TOO_LARGE => Self::new(
                StatusCode::PAYLOAD_TOO_LARGE,
                "payload_too_large",
                format!(
                    "the request body is over the limit of {} bytes",
                    crate::MAX_BODY_BYTES
                ),
            ),
            StatusCode::UNSUPPORTED_MEDIA_TYPE => Self::new(
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                "unsupported_media_type",
                "send the body as JSON with `Content-Type: application/json`",
            ),
            _ => Self::bad_request(format!("bad JSON body: {}", err.body_text())),
        }
    }
}

/// Plane errors: invalid input is the caller's (400), the rest is logged
/// and answered without detail.
macro_rules! plane_error {
    ($($ty:ident :: $name:ident),*) => {$(
        impl From<$ty::$name> for ApiError {
            fn from(err: $ty::$name) -> Self {
                match err {
                    $ty::$name::Invalid(invalid) => invalid.into(),
                    other => Self::internal("the request", &other),
                }
            }
        }
    )*};
}

plane_error!(
    awa_history::HistoryError,
    awa_dlq::DlqError,
    awa_exec::ExecError,
    awa_control::ControlError,
    awa_maint::MaintError
);

impl From<sqlx::Error> for ApiError {
    fn from(err: sqlx::Error) -> Self {
        Self::internal("getting a database connection", &err)
    }
}
