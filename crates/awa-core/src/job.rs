//! Job shapes that cross plane boundaries.

// Re-exported by the `awa` client: every public item is documented.
#![warn(missing_docs)]

use crate::{JobId, Priority, QueueName, RunLease};
use chrono::{DateTime, Utc};

/// A job as a producer describes it.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct NewJob {
    /// The queue it goes to.
    pub queue: QueueName,
    /// The kind name handlers are found by (see [`NewJob::check_kind`]).
    pub kind: String,
    /// The job's arguments, stored as JSON.
    pub args: serde_json::Value,
    /// 1 runs first, 4 last.
    pub priority: Priority,
    /// `None` or a time not in the future means "runnable now".
    pub run_at: Option<DateTime<Utc>>,
    /// `None` uses the queue's default.
    pub max_attempts: Option<i32>,
    /// At most one job per key among the unfinished ones (and, with a
    /// [`Unique`](crate::Unique) spec, those kept after they finished):
    /// enqueueing another with the same key returns the holder's id and
    /// inserts nothing. With `unique`, part of the derived key.
    pub unique_key: Option<String>,
    /// Free-form JSON stored beside the args (counted in the size limit).
    pub metadata: Option<serde_json::Value>,
    /// Uniqueness by kind, queue, args or args fields, per period, across
    /// chosen final states: the key is derived from it in SQL.
    pub unique: Option<crate::Unique>,
}

impl NewJob {
    /// A job of `kind` with `args` on `queue`, runnable now, at the default
    /// priority, with no key or metadata.
    pub fn new(queue: QueueName, kind: impl Into<String>, args: serde_json::Value) -> Self {
        Self {
            queue,
            kind: kind.into(),
            args,
            priority: Priority::default(),
            run_at: None,
            max_attempts: None,
            unique_key: None,
            metadata: None,
            unique: None,
        }
    }
}

/// Proof that one attempt owns a job. Every write to a live attempt carries
/// it; the execution plane rejects it once the attempt has been finished,
/// rescued or re-claimed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
pub struct AttemptToken {
    /// The job.
    pub job_id: JobId,
    /// Which claim of the job this attempt is.
    pub run_lease: RunLease,
    /// Claim-ring slot holding the claim batch.
    pub claim_slot: i32,
    /// The claim batch (one per claim call) and this attempt's item in it
    /// (1-based): finishing goes straight to the item.
    pub batch_id: i64,
    /// This attempt's item in the batch (1-based).
    pub item: i32,
    /// Queue-ring slot holding the body this attempt was claimed from.
    pub ready_slot: i32,
    /// The body's lane position in that slot.
    pub ready_seq: i64,
}

/// A job handed to a worker.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct ClaimedJob {
    /// The proof this attempt owns the job, carried by every write.
    pub token: AttemptToken,
    /// The queue it was claimed from.
    pub queue: QueueName,
    /// Its kind.
    pub kind: String,
    /// Its arguments.
    pub args: serde_json::Value,
    /// Its priority (1 runs first, 4 last).
    pub priority: i16,
    /// 1 on the first run.
    pub attempt: i32,
    /// Attempts before it fails for good.
    pub max_attempts: i32,
    /// When it was enqueued.
    pub created_at: DateTime<Utc>,
    /// When the job became runnable; pickup latency is measured from here.
    pub ready_at: DateTime<Utc>,
    /// The metadata it was enqueued with.
    pub metadata: Option<serde_json::Value>,
}

/// Where a job is in its lifecycle, as the planes together report it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "snake_case")]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub enum JobState {
    /// Runnable now, waiting for a worker.
    Available,
    /// Waiting for its `run_at`.
    Scheduled,
    /// Failed an attempt; waiting out its backoff before the next one.
    Retryable,
    /// Snoozed by its handler; runnable again after the delay.
    Snoozed,
    /// Claimed by a worker that holds it in its local buffer, waiting for
    /// a free slot: not started yet. As its worker last reported it (at
    /// most about a second ago).
    Buffered,
    /// Claimed, and its handler has started (as far as its worker last
    /// reported, at most about a second ago).
    Running,
    /// Finished successfully (terminal).
    Completed,
    /// Failed for good: attempts used up or a permanent error (terminal).
    Failed,
    /// Cancelled by an operator, a producer or its handler (terminal).
    Cancelled,
    /// Failed for good in a queue with a dead-letter queue: held there
    /// for an operator to retry or purge (terminal).
    DeadLettered,
}

impl JobState {
    /// Every state, in lifecycle order.
    pub const ALL: [JobState; 10] = [
        JobState::Available,
        JobState::Scheduled,
        JobState::Retryable,
        JobState::Snoozed,
        JobState::Buffered,
        JobState::Running,
        JobState::Completed,
        JobState::Failed,
        JobState::Cancelled,
        JobState::DeadLettered,
    ];

    /// The state's name as SQL, the CLI and JSON write it.
    pub fn as_str(self) -> &'static str {
        match self {
            JobState::Available => "available",
            JobState::Scheduled => "scheduled",
            JobState::Retryable => "retryable",
            JobState::Snoozed => "snoozed",
            JobState::Buffered => "buffered",
            JobState::Running => "running",
            JobState::Completed => "completed",
            JobState::Failed => "failed",
            JobState::Cancelled => "cancelled",
            JobState::DeadLettered => "dead_lettered",
        }
    }

    /// True for a state a job never leaves (only a DLQ retry brings a
    /// dead-lettered job back, as a new attempt).
    pub fn is_terminal(self) -> bool {
        matches!(
            self,
            JobState::Completed | JobState::Failed | JobState::Cancelled | JobState::DeadLettered
        )
    }
}

impl std::str::FromStr for JobState {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        JobState::ALL
            .into_iter()
            .find(|state| state.as_str() == s)
            .ok_or_else(|| {
                let names: Vec<_> = JobState::ALL.iter().map(|s| s.as_str()).collect();
                format!(
                    "unknown job state {s:?}; expected one of {}",
                    names.join(", ")
                )
            })
    }
}

impl std::fmt::Display for JobState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Counts what serde writes, so a size is known without a copy.
struct ByteCount(usize);

impl std::io::Write for ByteCount {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0 += buf.len();
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

fn json_len(value: &serde_json::Value) -> usize {
    let mut count = ByteCount(0);
    // Writing a Value into a counter cannot fail.
    let _ = serde_json::to_writer(&mut count, value);
    count.0
}

impl NewJob {
    /// The default size limit of one job: args plus metadata as JSON text,
    /// 1 MiB. The database enforces its substrate's `max_job_bytes`
    /// (this by default) for every producer; producers check it early.
    pub const DEFAULT_MAX_BYTES: usize = 1 << 20;

    /// Bytes of args plus metadata as compact JSON. PostgreSQL's rendering
    /// (`jsonb::text`, which the database limit measures) is never shorter,
    /// so a job within the limit here may still be refused there, never
    /// the other way round.
    pub fn json_bytes(&self) -> usize {
        json_len(&self.args) + self.metadata.as_ref().map_or(0, json_len)
    }

    /// Refuse a job whose args plus metadata exceed `limit` bytes.
    pub fn check_size(&self, limit: usize) -> Result<(), crate::InvalidInput> {
        let bytes = self.json_bytes();
        if bytes > limit {
            return Err(crate::InvalidInput::TooLarge {
                what: "job args and metadata",
                bytes,
                limit,
            });
        }
        Ok(())
    }

    /// The longest kind name, in bytes.
    pub const MAX_KIND_LEN: usize = 255;
    /// The longest unique key, in bytes.
    pub const MAX_UNIQUE_KEY_LEN: usize = 512;
    /// The most attempts a job may be given.
    pub const MAX_ATTEMPTS: i32 = crate::bounds::MAX_ATTEMPTS.max as i32;

    /// A job kind as every producer and reader accepts it: 1 to 255 bytes
    /// without control characters (also used to validate kind filters).
    pub fn check_kind(kind: &str) -> Result<(), crate::InvalidInput> {
        if kind.is_empty() || kind.len() > Self::MAX_KIND_LEN || kind.chars().any(char::is_control)
        {
            return Err(crate::InvalidInput::Name {
                what: "job kind",
                value: kind.to_string(),
                why: "it must be 1 to 255 bytes without control characters".into(),
            });
        }
        Ok(())
    }

    /// Check what the types cannot: kind, max attempts, unique key, key
    /// spec, and that args, metadata and key hold no NUL (PostgreSQL
    /// refuses it in text and jsonb, so the job could never be stored).
    pub fn validate(&self) -> Result<(), crate::InvalidInput> {
        use crate::InvalidInput;
        Self::check_kind(&self.kind)?;
        check_storable_json("job args", &self.args)?;
        if let Some(m) = &self.metadata {
            check_storable_json("job metadata", m)?;
        }
        if let Some(key) = &self.unique_key {
            check_storable_text("unique key", key)?;
        }
        if let Some(max) = self.max_attempts {
            crate::bounds::CountBound {
                hint: "a job runs at least once; leave it unset for the queue default",
                ..crate::bounds::MAX_ATTEMPTS
            }
            .check(max as i64)?;
        }
        if let Some(key) = &self.unique_key
            && (key.is_empty() || key.len() > Self::MAX_UNIQUE_KEY_LEN)
        {
            return Err(InvalidInput::Name {
                what: "unique key",
                value: key.clone(),
                why: "it must be 1 to 512 bytes".into(),
            });
        }
        if let Some(unique) = &self.unique {
            unique.validate()?;
        }
        if let Some(at) = self.run_at {
            crate::time::WRITABLE.check("run_at", at)?;
        }
        Ok(())
    }
}

const NUL_WHY: &str = "it contains a NUL character (\\u0000), which PostgreSQL cannot store in \
    text or jsonb; remove it, or encode binary data (e.g. as base64)";

/// Refuse text PostgreSQL cannot store: a NUL character.
pub fn check_storable_text(what: &'static str, text: &str) -> Result<(), crate::InvalidInput> {
    if text.contains('\0') {
        return Err(crate::InvalidInput::Name {
            what,
            value: text.replace('\0', "\\u0000").chars().take(100).collect(),
            why: NUL_WHY.into(),
        });
    }
    Ok(())
}

/// Refuse JSON PostgreSQL's jsonb cannot store: a NUL in any string or
/// object key. The error names where (`$.a.b[2]`), not the value.
pub fn check_storable_json(
    what: &'static str,
    value: &serde_json::Value,
) -> Result<(), crate::InvalidInput> {
    use serde_json::Value;
    // An explicit stack: a deeply nested value cannot exhaust ours.
    let mut stack: Vec<(&Value, String)> = vec![(value, "$".to_string())];
    while let Some((v, path)) = stack.pop() {
        let bad = match v {
            Value::String(s) => s.contains('\0').then(|| path.clone()),
            Value::Array(items) => {
                for (i, item) in items.iter().enumerate() {
                    stack.push((item, format!("{path}[{i}]")));
                }
                None
            }
            Value::Object(map) => {
                let mut bad = None;
                for (k, item) in map {
                    if k.contains('\0') {
                        bad = Some(format!("{path} (a key)"));
                        break;
                    }
                    stack.push((
                        item,
                        format!("{path}.{}", k.chars().take(40).collect::<String>()),
                    ));
                }
                bad
            }
            _ => None,
        };
        if let Some(at) = bad {
            return Err(crate::InvalidInput::Name {
                what,
                value: at,
                why: NUL_WHY.into(),
            });
        }
    }
    Ok(())
}

#[cfg(test)]
mod storable_tests {
    use super::*;
    use serde_json::json;

    fn job() -> NewJob {
        NewJob::new(QueueName::new("q").unwrap(), "k", json!({"a": 1}))
    }

    #[test]
    fn a_nul_anywhere_postgres_cannot_store_is_refused_with_where() {
        assert!(job().validate().is_ok());
        let cases: Vec<(NewJob, &str)> = vec![
            (
                NewJob {
                    args: json!({"a": "x\u{0}y"}),
                    ..job()
                },
                "$.a",
            ),
            (
                NewJob {
                    args: json!({"a": [1, {"b": "\u{0}"}]}),
                    ..job()
                },
                "$.a[1].b",
            ),
            (
                NewJob {
                    args: json!({"k\u{0}": 1}),
                    ..job()
                },
                "$ (a key)",
            ),
            (
                NewJob {
                    args: json!("\u{0}"),
                    ..job()
                },
                "$",
            ),
            (
                NewJob {
                    metadata: Some(json!({"m": "\u{0}"})),
                    ..job()
                },
                "$.m",
            ),
            (
                NewJob {
                    unique_key: Some("a\u{0}b".into()),
                    ..job()
                },
                "a\\u0000b",
            ),
            (
                NewJob {
                    kind: "k\u{0}".into(),
                    ..job()
                },
                "k\u{0}",
            ),
        ];
        for (j, at) in cases {
            let err = j.validate().expect_err("refused").to_string();
            assert!(err.contains(&format!("{at:?}")), "{at}: {err}");
        }
        // Escaped text that is not a NUL is fine.
        assert!(
            NewJob {
                args: json!({"a": "\\u0000"}),
                ..job()
            }
            .validate()
            .is_ok()
        );
    }
}
