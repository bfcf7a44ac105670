//! Identifiers that end up inside SQL. They are validated here, once, and
//! always quoted when used, so a hostile name can never change a statement.

// Re-exported by the `awa` client: every public item is documented.
#![warn(missing_docs)]

use crate::InvalidInput;
use std::fmt;

/// Postgres truncates identifiers at 63 bytes (NAMEDATALEN - 1); we refuse
/// instead of letting two long names silently collide.
const MAX_IDENT_BYTES: usize = 63;

/// Double-quote an identifier for SQL, doubling embedded quotes.
///
/// Validated names never contain quotes, but quoting anyway means a
/// mistake elsewhere degrades to "no such schema" instead of injection.
pub fn quote_ident(ident: &str) -> String {
    format!("\"{}\"", ident.replace('"', "\"\""))
}

fn check_ident(what: &'static str, value: &str) -> Result<(), InvalidInput> {
    let fail = |why: &str| InvalidInput::Name {
        what,
        value: value.to_string(),
        why: why.to_string(),
    };
    if value.is_empty() {
        return Err(fail("it is empty; use lowercase letters, digits and _"));
    }
    if value.len() > MAX_IDENT_BYTES {
        return Err(fail(
            "it is longer than 63 bytes, the PostgreSQL identifier limit",
        ));
    }
    let first = value.as_bytes()[0];
    if !(first.is_ascii_lowercase() || first == b'_') {
        return Err(fail("it must start with a lowercase letter or _"));
    }
    if !value
        .bytes()
        .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
    {
        return Err(fail(
            "only lowercase ASCII letters, digits and _ are allowed",
        ));
    }
    Ok(())
}

/// The name of a queue-storage substrate schema (`awa` is the default).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize)]
#[serde(transparent)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct SchemaName(String);

impl SchemaName {
    /// The default substrate's schema, which also holds the
    /// database-wide tables.
    pub const DEFAULT: &'static str = "awa";

    /// `value` as a substrate schema name: a lowercase identifier of at
    /// most 63 bytes starting with a letter or `_`, not `pg_*` (reserved by
    /// PostgreSQL), `public` or `information_schema`.
    pub fn new(value: impl Into<String>) -> Result<Self, InvalidInput> {
        let value = value.into();
        check_ident("schema name", &value)?;
        if value.starts_with("pg_") {
            return Err(InvalidInput::Name {
                what: "schema name",
                value,
                why: "names starting with pg_ are reserved by PostgreSQL".into(),
            });
        }
        if value == "public" || value == "information_schema" {
            return Err(InvalidInput::Name {
                what: "schema name",
                value,
                why: "a substrate needs a schema of its own; pick a new name".into(),
            });
        }
        Ok(Self(value))
    }

    /// [`SchemaName::DEFAULT`], `awa`.
    pub fn default_schema() -> Self {
        Self(Self::DEFAULT.to_string())
    }

    /// True for `awa`.
    pub fn is_default(&self) -> bool {
        self.0 == Self::DEFAULT
    }

    /// The name, unquoted.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The schema name quoted for use inside SQL text.
    pub fn quoted(&self) -> String {
        quote_ident(&self.0)
    }
}

impl fmt::Display for SchemaName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::str::FromStr for SchemaName {
    type Err = InvalidInput;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::new(s)
    }
}

/// A queue name. Queues are data, not identifiers, but we keep them to a
/// conservative alphabet so they are safe in NOTIFY channels, logs and
/// shell commands, and cannot smuggle control characters into output.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize)]
#[serde(transparent)]
pub struct QueueName(String);

impl QueueName {
    /// The longest queue name, in bytes.
    pub const MAX_LEN: usize = 63;

    /// `value` as a queue name: 1 to 63 ASCII letters, digits and
    /// `_ - . :`, starting with a letter or digit.
    pub fn new(value: impl Into<String>) -> Result<Self, InvalidInput> {
        let value = value.into();
        let fail = |why: &str| InvalidInput::Name {
            what: "queue name",
            value: value.clone(),
            why: why.to_string(),
        };
        if value.is_empty() {
            return Err(fail("it is empty"));
        }
        if value.len() > Self::MAX_LEN {
            return Err(fail("it is longer than 63 bytes"));
        }
        if !value.as_bytes()[0].is_ascii_alphanumeric() {
            return Err(fail("it must start with a letter or digit"));
        }
        if !value
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.' | b':'))
        {
            return Err(fail("only ASCII letters, digits and _ - . : are allowed"));
        }
        Ok(Self(value))
    }

    /// The name.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for QueueName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::str::FromStr for QueueName {
    type Err = InvalidInput;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::new(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hostile_schema_names_are_refused() {
        for bad in [
            "x\"; drop schema awa cascade; --",
            "",
            "pg_catalog",
            "Upper",
            "1abc",
            "a-b",
            "public",
            &"a".repeat(64),
        ] {
            assert!(SchemaName::new(bad).is_err(), "{bad:?} should be refused");
        }
        assert!(SchemaName::new("my_jobs").is_ok());
        assert!(SchemaName::new("a".repeat(63)).is_ok());
    }

    #[test]
    fn quoting_doubles_quotes() {
        assert_eq!(quote_ident("a\"b"), "\"a\"\"b\"");
    }

    #[test]
    fn queue_names() {
        assert!(QueueName::new("emails.high-1:x").is_ok());
        for bad in ["", "-x", "a b", "x'; drop table t; --", &"q".repeat(64)] {
            assert!(QueueName::new(bad).is_err(), "{bad:?} should be refused");
        }
    }
}
