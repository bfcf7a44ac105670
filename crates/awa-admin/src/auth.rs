//! The token rule, enforced here and nowhere else: every request passes
//! through [`guard`] before any handler runs.
//!
//! - Actions (every non-GET request) need the bearer token. Without a
//!   configured token the server is read-only and refuses them with 403.
//! - Reads need it too when the server was started with reads protected.
//! - The page and its assets are always served (the page asks for the
//!   token), so are `/openapi.json` and `/healthz`.
//!
//! The token is compared in constant time and never logged or echoed;
//! actions are logged with the actor: a short fingerprint of the token
//! (its SHA-256, first 8 hex digits), or `anonymous`.

use crate::AppState;
use crate::error::ApiError;
use axum::extract::{Request, State};
use axum::http::{Method, header};
use axum::middleware::Next;
use axum::response::Response;
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

/// The admin token. Its `Debug` shows only the fingerprint.
#[derive(Clone)]
pub struct Token {
    secret: Vec<u8>,
    fingerprint: String,
}

impl std::fmt::Debug for Token {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Token({})", self.fingerprint)
    }
}

/// The shortest token accepted: a guessable token would make the API as
/// open as no token at all.
pub const MIN_TOKEN_BYTES: usize = 16;

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum TokenError {
    #[error(
        "AWA_ADMIN_TOKEN is too short ({0} bytes): use at least 16 random bytes, e.g. `openssl rand -hex 32`"
    )]
    TooShort(usize),
    #[error(
        "AWA_ADMIN_TOKEN contains whitespace or control characters; use a hex or base64 string"
    )]
    BadCharacters,
}

impl Token {
    pub fn new(secret: &str) -> Result<Self, TokenError> {
        if secret.len() < MIN_TOKEN_BYTES {
            return Err(TokenError::TooShort(secret.len()));
        }
        if secret.chars().any(|c| c.is_whitespace() || c.is_control()) {
            return Err(TokenError::BadCharacters);
        }
        let digest = Sha256::digest(secret.as_bytes());
        let fingerprint: String = digest[..4].iter().map(|b| format!("{b:02x}")).collect();
        Ok(Self {
            secret: secret.as_bytes().to_vec(),
            fingerprint: format!("token:{fingerprint}"),
        })
    }

    /// What logs name this token by.
    pub fn fingerprint(&self) -> &str {
        &self.fingerprint
    }

    fn matches(&self, presented: &[u8]) -> bool {
        // ct_eq on slices of different lengths is false without looking at
        // the contents; the length of the token is not a secret worth
        // hiding.
        self.secret.ct_eq(presented).into()
    }
}

/// Who made a request, for the action log.
#[derive(Debug, Clone)]
pub struct Actor(pub String);

/// Paths served to anyone: the page, its assets, the document, health.
fn public(path: &str) -> bool {
    path == "/" || path.starts_with("/assets/") || path == "/openapi.json" || path == "/healthz"
}

fn bearer(req: &Request) -> Option<&[u8]> {
    let value = req.headers().get(header::AUTHORIZATION)?.as_bytes();
    let rest = value.strip_prefix(b"Bearer ")?;
    Some(rest)
}

pub async fn guard(
    State(state): State<AppState>,
    mut req: Request,
    next: Next,
) -> Result<Response, ApiError> {
    let action = req.method() != Method::GET && req.method() != Method::HEAD;
    let path = req.uri().path().to_string();
    let presented = bearer(&req).map(<[u8]>::to_vec);
    let actor = match (&state.config.token, presented) {
        (Some(token), Some(p)) if token.matches(&p) => Actor(token.fingerprint().to_string()),
        (Some(_), Some(_)) => {
            return Err(ApiError::unauthorized(
                "the bearer token does not match AWA_ADMIN_TOKEN",
            ));
        }
        (None, Some(_)) if action => return Err(ApiError::read_only()),
        _ => Actor("anonymous".into()),
    };
    let authenticated = actor.0 != "anonymous";
    if action && !authenticated {
        return Err(match state.config.token {
            None => ApiError::read_only(),
            Some(_) => ApiError::unauthorized(
                "actions need the admin token: send `Authorization: Bearer <AWA_ADMIN_TOKEN>`",
            ),
        });
    }
    if !action && state.config.token_for_reads && !authenticated && !public(&path) {
        return Err(ApiError::unauthorized(
            "this server requires the admin token for reads: send `Authorization: Bearer <AWA_ADMIN_TOKEN>`",
        ));
    }
    req.extensions_mut().insert(actor);
    Ok(next.run(req).await)
}
