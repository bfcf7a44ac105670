//! Typed jobs: a kind name and defaults bound to a serde type.

use crate::Error;
use awa_core::{NewJob, Priority, QueueName};
use chrono::{DateTime, Utc};
use serde::Serialize;
use serde::de::DeserializeOwned;

/// A job type: its args are the value itself, stored as JSON.
///
/// Usually derived:
///
/// ```
/// #[derive(serde::Serialize, serde::Deserialize, awa::Job)]
/// #[awa(kind = "send_welcome", queue = "email", max_attempts = 5)]
/// struct SendWelcome {
///     user_id: i64,
/// }
///
/// use awa::Job;
/// assert_eq!(SendWelcome::KIND, "send_welcome");
/// assert_eq!(SendWelcome::QUEUE, "email");
/// ```
pub trait Job: Serialize + DeserializeOwned + Send + Sync + 'static {
    /// The kind name stored with every job of this type; handlers are found
    /// by it. Changing it orphans jobs already enqueued under the old name.
    const KIND: &'static str;
    /// The queue jobs of this type go to unless [`InsertOpts::queue`] says
    /// otherwise.
    const QUEUE: &'static str = "default";
    /// Default priority (1 runs first, 4 last; None: the default, 3).
    const PRIORITY: Option<i16> = None;
    /// Default attempts before failing (None: the substrate's default).
    const MAX_ATTEMPTS: Option<i32> = None;
}

/// Options of one insert, over the job type's defaults.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct InsertOpts {
    pub queue: Option<String>,
    pub priority: Option<i16>,
    /// Run no earlier than this (waits in the deferred plane until then).
    pub run_at: Option<DateTime<Utc>>,
    pub max_attempts: Option<i32>,
    /// At most one non-terminal job holds a key: a second insert with a
    /// live key returns the holder's id with `inserted = false`.
    pub unique_key: Option<String>,
    pub metadata: Option<serde_json::Value>,
}

impl InsertOpts {
    pub fn new() -> Self {
        Self::default()
    }
    pub fn queue(mut self, queue: impl Into<String>) -> Self {
        self.queue = Some(queue.into());
        self
    }
    pub fn priority(mut self, priority: i16) -> Self {
        self.priority = Some(priority);
        self
    }
    pub fn run_at(mut self, at: DateTime<Utc>) -> Self {
        self.run_at = Some(at);
        self
    }
    /// Run no earlier than `delay` from now.
    pub fn run_in(self, delay: std::time::Duration) -> Self {
        let delay = chrono::Duration::from_std(delay).unwrap_or(chrono::Duration::MAX);
        self.run_at(Utc::now() + delay)
    }
    pub fn max_attempts(mut self, attempts: i32) -> Self {
        self.max_attempts = Some(attempts);
        self
    }
    pub fn unique_key(mut self, key: impl Into<String>) -> Self {
        self.unique_key = Some(key.into());
        self
    }
    pub fn metadata(mut self, metadata: serde_json::Value) -> Self {
        self.metadata = Some(metadata);
        self
    }
}

/// The untyped job a typed one becomes, checked against every bound.
pub fn new_job<J: Job>(job: &J, opts: InsertOpts) -> Result<NewJob, Error> {
    let args = serde_json::to_value(job).map_err(|source| Error::Serialize {
        kind: J::KIND,
        source,
    })?;
    let queue = QueueName::new(opts.queue.unwrap_or_else(|| J::QUEUE.to_string()))?;
    let mut new = NewJob::new(queue, J::KIND, args);
    if let Some(p) = opts.priority.or(J::PRIORITY) {
        new.priority = Priority::new(i64::from(p))?;
    }
    new.run_at = opts.run_at;
    new.max_attempts = opts.max_attempts.or(J::MAX_ATTEMPTS);
    new.unique_key = opts.unique_key;
    new.metadata = opts.metadata;
    new.validate()?;
    Ok(new)
}
