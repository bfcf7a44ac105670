//! Typed jobs: a kind name and defaults bound to a serde type.

use crate::Error;
use awa_core::{NewJob, Priority, QueueName, Unique};
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
///
/// Uniqueness goes on the type too (see [`Unique`]): one refresh per
/// account every 10 minutes, completed ones included.
///
/// ```
/// #[derive(serde::Serialize, serde::Deserialize, awa::Job)]
/// #[awa(unique(by_args, period = "10m"))]
/// struct Refresh {
///     account: i64,
/// }
///
/// use awa::Job;
/// assert_eq!(
///     Refresh::unique(),
///     Some(awa::Unique::by_args().period(std::time::Duration::from_secs(600)))
/// );
/// ```
///
/// A spec the database would refuse does not compile: a period that is
/// not whole seconds, an unfinished state, or states kept without a
/// period.
///
/// ```compile_fail
/// #[derive(serde::Serialize, serde::Deserialize, awa::Job)]
/// #[awa(unique(by_args, period = "1500ms"))]
/// struct Refresh { account: i64 }
/// ```
///
/// ```compile_fail
/// #[derive(serde::Serialize, serde::Deserialize, awa::Job)]
/// #[awa(unique(by_args, period = "1h", states("running")))]
/// struct Refresh { account: i64 }
/// ```
///
/// ```compile_fail
/// #[derive(serde::Serialize, serde::Deserialize, awa::Job)]
/// #[awa(unique(by_args, states("completed")))]
/// struct Refresh { account: i64 }
/// ```
///
/// A kind's default timeout goes on the type too (see
/// `docs/timeouts.md`); one outside 1 ms to 7 days does not compile.
///
/// ```
/// #[derive(serde::Serialize, serde::Deserialize, awa::Job)]
/// #[awa(queue = "images", timeout = "30s")]
/// struct Resize {
///     width: u32,
/// }
///
/// use awa::Job;
/// assert_eq!(Resize::TIMEOUT, Some(std::time::Duration::from_secs(30)));
/// ```
///
/// ```compile_fail
/// #[derive(serde::Serialize, serde::Deserialize, awa::Job)]
/// #[awa(timeout = "8days")]
/// struct Resize { width: u32 }
/// ```
pub trait Job: Serialize + DeserializeOwned + Send + Sync + 'static {
    /// The kind name stored with every job of this type; handlers are found
    /// by it. Changing it orphans jobs already enqueued under the old name.
    const KIND: &'static str;
    /// The queue jobs of this type go to unless [`InsertOpts::queue`] says
    /// otherwise.
    const QUEUE: &'static str = "default";
    /// Default priority (1 runs first, 4 last; None: the default, 3).
    /// Within one priority of a queue, jobs run in the order they were
    /// enqueued.
    const PRIORITY: Option<i16> = None;
    /// Default attempts before failing (None: the substrate's default).
    const MAX_ATTEMPTS: Option<i32> = None;
    /// The kind's default timeout (None: none), applied by every worker
    /// that registers the type ([`crate::ClientBuilder::register`]): a
    /// handler still running after it is dropped and the attempt fails
    /// with a timeout error, retried by the retry policy. A job's own
    /// ([`InsertOpts::timeout`]) wins. `#[awa(timeout = "30s")]` on the
    /// derive.
    const TIMEOUT: Option<std::time::Duration> = None;
    /// Default uniqueness of jobs of this type (None: not unique), e.g.
    /// one per args every 10 minutes: `#[awa(unique(by_args, period =
    /// "10m"))]` on the derive, or [`Unique`] here.
    fn unique() -> Option<Unique> {
        None
    }
}

/// Options of one insert, over the job type's defaults. Every field left
/// `None` takes the type's default ([`Job::QUEUE`], [`Job::PRIORITY`],
/// [`Job::MAX_ATTEMPTS`]) or, failing that, the substrate's.
///
/// ```
/// # #[tokio::main]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// # let db = awa::testing::test_db().await?;
/// # let pool = db.pool().await?;
/// use awa::{Client, InsertOpts};
/// use std::time::Duration;
///
/// #[derive(serde::Serialize, serde::Deserialize, awa::Job)]
/// struct Invoice { order: i64 }
///
/// let client = Client::new(pool.clone());
/// let opts = InsertOpts::new()
///     .queue("billing")
///     .run_in(Duration::from_secs(3600))
///     .unique_key("invoice:42");
/// let first = client.insert_with(&pool, &Invoice { order: 42 }, opts.clone()).await?;
/// assert!(first.inserted && first.scheduled);
///
/// // The key is held by an unfinished job: nothing new, the holder's id.
/// let again = client.insert_with(&pool, &Invoice { order: 42 }, opts).await?;
/// assert!(!again.inserted);
/// assert_eq!(again.id, first.id);
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone, Default, PartialEq)]
pub struct InsertOpts {
    /// The queue, instead of the type's.
    pub queue: Option<String>,
    /// The priority (1 runs first, 4 last), instead of the type's.
    pub priority: Option<i16>,
    /// Run no earlier than this (waits in the deferred plane until then).
    pub run_at: Option<DateTime<Utc>>,
    /// Attempts before the job fails for good, instead of the type's.
    pub max_attempts: Option<i32>,
    /// At most one non-terminal job holds a key: a second insert with a
    /// live key returns the holder's id with `inserted = false`. With a
    /// [`Unique`] spec, part of the key the spec derives.
    pub unique_key: Option<String>,
    /// Free-form JSON stored beside the args (counted in the job's size).
    pub metadata: Option<serde_json::Value>,
    /// Uniqueness by kind, queue, args or args fields, per period, across
    /// final states (over the type's [`Job::unique`]): a duplicate returns
    /// the existing job's id with `inserted = false`.
    pub unique: Option<Unique>,
    /// This job's own timeout, over its kind's ([`Job::TIMEOUT`]): stored
    /// in its metadata (`awa_core::timeout::METADATA_KEY`), so the
    /// metadata, if given, must be a JSON object.
    pub timeout: Option<std::time::Duration>,
}

impl InsertOpts {
    /// No options: the job type's defaults.
    pub fn new() -> Self {
        Self::default()
    }
    /// Insert into `queue` instead of the type's queue.
    pub fn queue(mut self, queue: impl Into<String>) -> Self {
        self.queue = Some(queue.into());
        self
    }
    /// Run at `priority`: 1 runs first, 4 last (checked at insert).
    ///
    /// ```
    /// # #[tokio::main]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// # let db = awa::testing::test_db().await?;
    /// # let pool = db.pool().await?;
    /// use awa::{Client, HandlerResult, InsertOpts, JobContext, Outcome};
    ///
    /// #[derive(serde::Serialize, serde::Deserialize, awa::Job)]
    /// struct Report { name: String }
    ///
    /// let client = Client::new(pool.clone());
    /// let low = InsertOpts::new().priority(4);
    /// let high = InsertOpts::new().priority(1);
    /// let later = client.insert_with(&pool, &Report { name: "weekly".into() }, low).await?;
    /// let first = client.insert_with(&pool, &Report { name: "urgent".into() }, high).await?;
    ///
    /// let worker = Client::builder(pool.clone())
    ///     .register::<Report>(|_: Report, _: JobContext| async { HandlerResult::Ok(Outcome::Complete) });
    /// let ran: Vec<_> = [worker.work_one("default").await?, worker.work_one("default").await?]
    ///     .into_iter()
    ///     .map(|worked| worked.expect("a job").job.token.job_id)
    ///     .collect();
    /// assert_eq!(ran, [first.id, later.id]);
    /// # Ok(())
    /// # }
    /// ```
    pub fn priority(mut self, priority: i16) -> Self {
        self.priority = Some(priority);
        self
    }
    /// Run no earlier than `at`.
    pub fn run_at(mut self, at: DateTime<Utc>) -> Self {
        self.run_at = Some(at);
        self
    }
    /// Run no earlier than `delay` from now.
    pub fn run_in(self, delay: std::time::Duration) -> Self {
        let delay = chrono::Duration::from_std(delay).unwrap_or(chrono::Duration::MAX);
        self.run_at(Utc::now() + delay)
    }
    /// Fail for good after `attempts` attempts.
    pub fn max_attempts(mut self, attempts: i32) -> Self {
        self.max_attempts = Some(attempts);
        self
    }
    /// Hold `key` while the job is unfinished: another insert with the
    /// same key meanwhile returns this job's id, inserting nothing.
    pub fn unique_key(mut self, key: impl Into<String>) -> Self {
        self.unique_key = Some(key.into());
        self
    }
    /// Store `metadata` beside the args.
    pub fn metadata(mut self, metadata: serde_json::Value) -> Self {
        self.metadata = Some(metadata);
        self
    }
    /// Unique by this spec, e.g. `Unique::by_args().period(10 minutes)`.
    pub fn unique(mut self, spec: Unique) -> Self {
        self.unique = Some(spec);
        self
    }
    /// Stop the job's handler after `timeout` (1 ms to 7 days, checked at
    /// insert) and fail the attempt with a timeout error, whatever its
    /// kind's default.
    pub fn timeout(mut self, timeout: std::time::Duration) -> Self {
        self.timeout = Some(timeout);
        self
    }
}

/// The untyped job a typed one becomes, checked against every bound: what
/// [`crate::Client::insert_with`] sends, for callers that batch typed and
/// untyped jobs together through [`crate::Client::insert_raw`].
///
/// ```
/// use awa::{InsertOpts, new_job};
///
/// #[derive(serde::Serialize, serde::Deserialize, awa::Job)]
/// #[awa(queue = "email")]
/// struct SendWelcome { user_id: i64 }
///
/// let job = new_job(&SendWelcome { user_id: 7 }, InsertOpts::new().priority(1))?;
/// assert_eq!(job.kind, "send_welcome");
/// assert_eq!(job.queue.as_str(), "email");
/// assert_eq!(job.args, serde_json::json!({ "user_id": 7 }));
///
/// // Out of bounds: refused before anything is sent.
/// assert!(new_job(&SendWelcome { user_id: 7 }, InsertOpts::new().priority(9)).is_err());
/// # Ok::<(), awa::Error>(())
/// ```
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
    new.unique = opts.unique.or_else(J::unique);
    if let Some(timeout) = opts.timeout {
        awa_core::timeout::set(&mut new.metadata, timeout)?;
    }
    new.validate()?;
    Ok(new)
}
