//! Connecting, with errors that say what to check.

use crate::error::CliError;
use sqlx::{Connection, PgConnection};
use std::time::Duration;

const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

pub fn require_url(url: &Option<String>) -> Result<&str, CliError> {
    url.as_deref()
        .filter(|u| !u.is_empty())
        .ok_or(CliError::NoDatabaseUrl)
}

pub async fn connect(url: &str) -> Result<PgConnection, CliError> {
    let fail = |reason: String| CliError::Unreachable {
        url: redact(url),
        reason,
    };
    match tokio::time::timeout(CONNECT_TIMEOUT, PgConnection::connect(url)).await {
        Ok(Ok(conn)) => Ok(conn),
        Ok(Err(err)) => Err(fail(err.to_string())),
        Err(_) => Err(fail(format!(
            "no answer within {}s",
            CONNECT_TIMEOUT.as_secs()
        ))),
    }
}

/// The URL without its password, for messages.
pub fn redact(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_string();
    };
    let Some((userinfo, host)) = rest.rsplit_once('@') else {
        return url.to_string();
    };
    let user = userinfo.split(':').next().unwrap_or("");
    format!("{scheme}://{user}:***@{host}")
}

#[cfg(test)]
mod tests {
    #[test]
    fn redacts_password() {
        assert_eq!(
            super::redact("postgres://u:secret@h:5432/db"),
            "postgres://u:***@h:5432/db"
        );
        assert_eq!(super::redact("postgres://h/db"), "postgres://h/db");
    }
}
