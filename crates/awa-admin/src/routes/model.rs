//! The request and response bodies of the API that are not plane types
//! (those are served as the planes define them).

use awa_control::runtimes::RuntimeEntry;
use awa_control::status::{PinnedAlert, StorageStatus};
use awa_core::JobId;
use awa_dlq::DlqEntry;
use awa_exec::AttemptProgress;
use awa_history::JobView;
use chrono::{DateTime, Utc};
use std::collections::BTreeMap;

/// What the server is and what it allows.
#[derive(Debug, serde::Serialize, utoipa::ToSchema)]
pub struct ServerInfo {
    pub version: String,
    /// The substrate schema this server reads and acts on.
    pub schema: String,
    /// True: no AWA_ADMIN_TOKEN was configured, every action is refused.
    pub read_only: bool,
    /// True: reads need the token too.
    pub token_for_reads: bool,
    /// Snapshots older than this are reported as an alert.
    pub pinned_alert_secs: f64,
}

/// Jobs of a queue that ended in one minute, by outcome.
#[derive(Debug, serde::Serialize, utoipa::ToSchema)]
pub struct ThroughputMinute {
    pub minute: DateTime<Utc>,
    pub completed: i64,
    pub failed: i64,
    pub cancelled: i64,
}

/// One queue: counts in every state, health, settings, recent throughput.
#[derive(Debug, serde::Serialize, utoipa::ToSchema)]
pub struct QueueSummary {
    pub queue: String,
    /// Jobs per state, every state present (zeros included); terminal
    /// totals are exact for all time.
    pub counts: BTreeMap<String, i64>,
    /// How long the oldest available job has waited; absent when none is
    /// waiting.
    pub oldest_available_secs: Option<f64>,
    pub paused: bool,
    /// Its rate limits and global concurrency (one per kind they apply
    /// to; none when unlimited): docs/limits.md.
    pub limits: Vec<awa_control::limits::QueueLimit>,
    /// One entry per minute of the window, oldest first, zeros included.
    pub throughput: Vec<ThroughputMinute>,
}

#[derive(Debug, serde::Serialize, utoipa::ToSchema)]
pub struct QueueList {
    pub queues: Vec<QueueSummary>,
    /// Minutes covered by each queue's `throughput`.
    pub throughput_minutes: i32,
}

/// One page of jobs, newest first.
#[derive(Debug, serde::Serialize, utoipa::ToSchema)]
pub struct JobPage {
    pub jobs: Vec<JobView>,
    /// Pass as `before` for the next page; absent on the last page.
    pub next_before: Option<i64>,
}

/// One job with what its attempts reported.
#[derive(Debug, serde::Serialize, utoipa::ToSchema)]
pub struct JobDetail {
    pub job: JobView,
    /// Progress and checkpoint from heartbeats (absent: none, or the job
    /// has finished).
    pub progress: Option<AttemptProgress>,
}

/// Which jobs a bulk action applies to: one queue's, narrowed by state,
/// kind and args containment.
#[derive(Debug, serde::Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct BulkSelection {
    pub queue: String,
    /// Retry: failed or cancelled (required). Cancel: available,
    /// scheduled, retryable, snoozed or running (absent: any of them).
    pub state: Option<String>,
    pub kind: Option<String>,
    /// jsonb containment: `{"user": 42}` matches args holding that key
    /// with that value.
    #[schema(value_type = Option<Object>)]
    pub args_contains: Option<serde_json::Value>,
    /// Only count the jobs that match; change nothing.
    #[serde(default)]
    pub dry_run: bool,
}

#[derive(Debug, serde::Serialize, utoipa::ToSchema)]
pub struct Cancelled {
    pub id: JobId,
    /// The state the job was cancelled from.
    pub cancelled_from: String,
}

#[derive(Debug, serde::Serialize, utoipa::ToSchema)]
pub struct DlqPage {
    pub entries: Vec<DlqEntry>,
}

/// Which dead-lettered jobs an action applies to: one (`job_id`) or all
/// (`all: true`, optionally only of `queue`).
#[derive(Debug, serde::Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct DlqSelection {
    pub job_id: Option<i64>,
    #[serde(default)]
    pub all: bool,
    pub queue: Option<String>,
}

#[derive(Debug, serde::Serialize, utoipa::ToSchema)]
pub struct Purged {
    pub purged: Vec<JobId>,
}

/// Storage health: substrates, rings, outcomes, leader, snapshots.
#[derive(Debug, serde::Serialize, utoipa::ToSchema)]
pub struct StorageView {
    #[serde(flatten)]
    pub status: StorageStatus,
    /// Set when a snapshot has held reclamation back longer than the
    /// threshold.
    pub pinned_alert: Option<PinnedAlert>,
}

#[derive(Debug, serde::Serialize, utoipa::ToSchema)]
pub struct RuntimeList {
    pub runtimes: Vec<RuntimeEntry>,
}

/// A periodic schedule and where it stands.
#[derive(Debug, serde::Serialize, utoipa::ToSchema)]
pub struct CronEntry {
    pub name: String,
    pub cron: String,
    pub timezone: String,
    pub queue: String,
    pub kind: String,
    pub enabled: bool,
    pub last_tick: Option<DateTime<Utc>>,
    pub next_fire: Option<DateTime<Utc>>,
    pub last_job_id: Option<i64>,
    /// Why the maintenance leader cannot fire this schedule (it skips it
    /// and fires the others), while it cannot; null once it fires again.
    pub error: Option<String>,
    /// Since when `error` has held.
    pub error_since: Option<DateTime<Utc>>,
}

impl CronEntry {
    /// The stored schedule as served, its next fire computed at `now`.
    pub fn new(s: awa_control::cron::Stored, now: DateTime<Utc>) -> Self {
        Self {
            next_fire: s.next_fire(now),
            name: s.schedule.name,
            cron: s.schedule.cron,
            timezone: s.schedule.timezone,
            queue: s.schedule.queue,
            kind: s.schedule.kind,
            enabled: s.enabled,
            last_tick: s.last_tick,
            last_job_id: s.last_job_id,
            error: s.error,
            error_since: s.error_since,
        }
    }
}

#[derive(Debug, serde::Serialize, utoipa::ToSchema)]
pub struct CronList {
    pub schedules: Vec<CronEntry>,
}

/// A schedule's job enqueued now, outside its ticks.
#[derive(Debug, serde::Serialize, utoipa::ToSchema)]
pub struct CronRun {
    pub name: String,
    pub job_id: JobId,
}

/// Every queue's activity in one minute, or one queue's.
#[derive(Debug, serde::Serialize, utoipa::ToSchema)]
pub struct ActivityPoint {
    /// The minute's start.
    pub minute: DateTime<Utc>,
    /// Jobs that reached each terminal state in the minute.
    pub completed: i64,
    pub failed: i64,
    pub cancelled: i64,
    pub dead_lettered: i64,
    /// From becoming runnable to being claimed (the latest 200 claims of
    /// the minute, each claim's first job); absent without claims.
    pub pickup_avg_secs: Option<f64>,
    pub pickup_max_secs: Option<f64>,
    /// The longest any available job had waited when the leader measured
    /// during the minute; absent when none was waiting.
    pub wait_max_secs: Option<f64>,
}

/// Throughput, failures and latency per minute, for charts.
#[derive(Debug, serde::Serialize, utoipa::ToSchema)]
pub struct ActivityView {
    pub minutes: i32,
    /// The queue asked for; absent: every queue, summed.
    pub queue: Option<String>,
    /// One per minute, oldest first, ending with the current minute; zeros
    /// where nothing was recorded.
    pub points: Vec<ActivityPoint>,
    /// When the maintenance leader last recorded any of these minutes;
    /// absent: nothing recorded (no leader has run in the window).
    pub last_measured_at: Option<DateTime<Utc>>,
}
