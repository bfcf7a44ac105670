//! A job's attempts and who holds it (ADR 11): the records the planes carry
//! with the job's body, completed with what the claim ring still knows
//! about its latest attempt.

use awa_core::DbTime;
use sqlx::{Row, postgres::PgRow};

/// The runtime that ran an attempt, as it was registered then.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct AttemptRuntime {
    /// Its instance id (`awa.runtimes`).
    pub id: Option<uuid::Uuid>,
    /// Host and pid; absent when the runtime was no longer registered.
    #[serde(default)]
    pub host: Option<String>,
    #[serde(default)]
    pub pid: Option<i32>,
}

/// One attempt of a job.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct AttemptRecord {
    /// Its number (1 for the first run; a snooze or release does not use
    /// one up, so the next run has the same number; a retry on demand
    /// starts again at 1).
    pub attempt: i32,
    /// When it was claimed; absent for a completion whose claim the ring
    /// no longer holds.
    #[serde(default)]
    pub started_at: Option<DbTime>,
    /// When it ended; absent while it runs.
    #[serde(default)]
    pub ended_at: Option<DbTime>,
    /// running, completed, retried, rescued, snoozed, released, failed,
    /// cancelled or dead_lettered.
    pub outcome: String,
    /// The error it ended with (at most 8 KiB), or the reason of a rescue
    /// or cancel.
    #[serde(default)]
    pub error: Option<String>,
    /// The runtime that ran it, when known.
    #[serde(default)]
    pub runtime: Option<AttemptRuntime>,
}

/// The runtime that holds a running job.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Holder {
    pub instance_id: uuid::Uuid,
    /// Absent when the registry has forgotten the runtime (it stopped
    /// reporting itself alive; rescue will take the job).
    pub host: Option<String>,
    pub pid: Option<i32>,
    /// When the runtime last reported itself alive.
    pub last_seen_at: Option<DbTime>,
    /// Seconds since then, on the database's clock.
    pub heartbeat_age_secs: Option<f64>,
    /// The attempt's own latest heartbeat (jobs that run long enough to
    /// heartbeat; one-job reads only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub attempt_heartbeat_at: Option<DbTime>,
}

/// The holder columns every job read returns (`holder`, `holder_host`,
/// ...); None unless the job runs.
pub(crate) fn holder(row: &PgRow, prefix: &str) -> Option<Holder> {
    let id: Option<uuid::Uuid> = row.get("holder");
    id.map(|instance_id| Holder {
        instance_id,
        host: row.get(format!("{prefix}_host").as_str()),
        pid: row.get(format!("{prefix}_pid").as_str()),
        last_seen_at: row.get(format!("{prefix}_seen_at").as_str()),
        heartbeat_age_secs: row.get(format!("{prefix}_age_secs").as_str()),
        attempt_heartbeat_at: None,
    })
}

/// The stored records (a JSON array; NULL: none). A record that does not
/// read is skipped rather than failing the whole read: the history is for
/// people, and the job itself is still shown.
pub(crate) fn parse(value: Option<serde_json::Value>) -> Vec<AttemptRecord> {
    match value {
        Some(serde_json::Value::Array(items)) => items
            .into_iter()
            .filter_map(|v| serde_json::from_value(v).ok())
            .collect(),
        _ => Vec::new(),
    }
}

/// The records of a one-job read (`get_job.sql`), completed with the
/// latest claim: a running attempt is added as `running`; a completion
/// derived from its batch gets its start and runtime while the claim ring
/// still holds them.
pub(crate) fn of_job(row: &PgRow, state: &str, attempt: i32) -> Vec<AttemptRecord> {
    let mut records = parse(row.get("attempts"));
    let started: Option<DbTime> = row.get("claim_started_at");
    let instance: Option<uuid::Uuid> = row.get("claim_instance");
    let runtime = instance.map(|id| AttemptRuntime {
        id: Some(id),
        host: row.get("claim_host"),
        pid: row.get("claim_pid"),
    });
    match state {
        "running" => records.push(AttemptRecord {
            attempt,
            started_at: started.or_else(|| row.get("at")),
            ended_at: None,
            outcome: "running".into(),
            error: None,
            runtime,
        }),
        "completed" => {
            if let Some(last) = records.last_mut()
                && last.outcome == "completed"
                && last.attempt == attempt
            {
                if last.started_at.is_none() {
                    last.started_at = started;
                }
                if last.runtime.is_none() {
                    last.runtime = runtime;
                }
            }
        }
        _ => {}
    }
    records
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_read_as_finish_writes_them() {
        let stored = serde_json::json!([
            {"attempt": 1, "started_at": "2026-01-02T03:04:05.123456+02:00",
             "ended_at": "2026-01-02T03:04:06+02:00", "outcome": "retried",
             "error": "boom", "runtime": {"id": "6f1d8b0e-8f53-4c38-9d59-0b7f2e3c1a11",
                                          "host": "h", "pid": 7}},
            {"attempt": 2, "ended_at": "2026-01-02T01:05:00+00:00", "outcome": "completed"},
            {"not": "a record"}
        ]);
        let records = parse(Some(stored));
        assert_eq!(records.len(), 2, "the unreadable one is skipped");
        assert_eq!(records[0].outcome, "retried");
        assert_eq!(
            records[0].started_at.as_ref().unwrap().to_rfc3339(),
            "2026-01-02T01:04:05.123456+00:00"
        );
        assert_eq!(records[0].runtime.as_ref().unwrap().pid, Some(7));
        assert_eq!(records[1].runtime, None);
        assert_eq!(records[1].error, None);
        assert!(parse(None).is_empty());
    }
}
