//! Every duration and count Awa accepts from an operator or a caller, with
//! its range, in one place.
//!
//! The CLI checks its flags against these before it connects; the Rust API
//! (`QueueConfig`, `MaintSettings`, `WorkerConfig`, `SlotCounts`) checks the
//! same values; the SQL side refuses the stored settings again (CHECK
//! constraints on `awa.queue_meta` and `{schema}.exec_settings`), so a
//! raw-SQL caller cannot store a poison value either, and every runtime
//! function the runtime role may EXECUTE refuses an argument outside these
//! bounds with SQLSTATE 22023 and a hint before it writes anything (limits,
//! intervals, slots, priorities, delays, error text: each function's header
//! says which). When a bound changes here, change the matching CHECK in the
//! control or exec DDL and the functions that name it;
//! `awa-maint/tests/maint/sql_bounds.rs` calls every runtime function at each
//! bound and just outside it.
//!
//! Results a handler hands back (error text, retry and snooze delays) are
//! not refused but clamped, because refusing them would leave the attempt
//! with nowhere to go: see [`MAX_ERROR_BYTES`], [`MAX_HANDLER_DELAY`] and
//! [`error_text`].

use crate::InvalidInput;
use std::time::Duration;

/// A count or other integer with an inclusive range.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CountBound {
    /// What the value is, as a message names it ("shard count").
    pub what: &'static str,
    pub min: i64,
    pub max: i64,
    /// What to do instead, shown with a refusal.
    pub hint: &'static str,
}

impl CountBound {
    /// `value` if it lies in `min..=max`.
    pub fn check(&self, value: i64) -> Result<i64, InvalidInput> {
        if (self.min..=self.max).contains(&value) {
            Ok(value)
        } else {
            Err(InvalidInput::OutOfRange {
                what: self.what,
                value,
                min: self.min,
                max: self.max,
                hint: self.hint,
            })
        }
    }
}

/// A duration with an inclusive range.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DurationBound {
    /// What the value is, as a message names it ("--dlq-retention").
    pub what: &'static str,
    pub min: Duration,
    pub max: Duration,
    /// What to do instead, shown with a refusal.
    pub hint: &'static str,
}

impl DurationBound {
    /// `value` if it lies in `min..=max`.
    pub fn check(&self, value: Duration) -> Result<Duration, InvalidInput> {
        if (self.min..=self.max).contains(&value) {
            Ok(value)
        } else {
            Err(InvalidInput::DurationOutOfRange {
                what: self.what,
                value: format_duration(value),
                min: format_duration(self.min),
                max: format_duration(self.max),
                hint: self.hint,
            })
        }
    }

    /// `value` moved into `min..=max`.
    pub fn clamp(&self, value: Duration) -> Duration {
        value.clamp(self.min, self.max)
    }
}

/// A short human form (`1s`, `250ms`, `30days`), for messages.
pub fn format_duration(d: Duration) -> String {
    const DAY: u64 = 86_400;
    let secs = d.as_secs();
    let millis = d.subsec_millis();
    if d.subsec_nanos() == 0 && secs > 0 {
        if secs.is_multiple_of(DAY) {
            let n = secs / DAY;
            return format!("{n}{}", if n == 1 { "day" } else { "days" });
        }
        if secs.is_multiple_of(3600) {
            return format!("{}h", secs / 3600);
        }
        if secs.is_multiple_of(60) {
            return format!("{}m", secs / 60);
        }
        return format!("{secs}s");
    }
    if secs == 0 && d.subsec_nanos() == millis * 1_000_000 {
        return format!("{millis}ms");
    }
    format!("{:.3}s", d.as_secs_f64())
}

const fn days(n: u64) -> Duration {
    Duration::from_secs(n * 86_400)
}

// ---- Counts ---------------------------------------------------------------

/// Job priority. A small range keeps the lanes per queue, and so a claim's
/// index probes, few.
pub const PRIORITY: CountBound = CountBound {
    what: "priority",
    min: 1,
    max: 4,
    hint: "1 runs first, 4 last; 3 is the default",
};

/// Attempts of one job (per job or as a queue's default).
pub const MAX_ATTEMPTS: CountBound = CountBound {
    what: "max attempts",
    min: 1,
    max: 1000,
    hint: "a job runs at least once",
};

/// Lanes per priority of one queue. Stored as smallint; more than 64 only
/// multiplies the lanes a claim visits.
pub const SHARDS: CountBound = CountBound {
    what: "shard count",
    min: 1,
    max: 64,
    hint: "1 keeps strict FIFO per priority; more lets more claimers work at once",
};

/// Jobs of one queue a worker runs at once.
pub const CONCURRENCY: CountBound = CountBound {
    what: "concurrency",
    min: 1,
    max: 4096,
    hint: "jobs of each queue that run at once; run more workers for more",
};

/// A rate limit's jobs per period (`--rate-limit N/PERIOD`). A limited
/// claim rewrites one entry per claim call in the period, so the state of
/// one partition stays at most this many entries. `awa.queue_limits`
/// refuses the same range.
pub const RATE_LIMIT: CountBound = CountBound {
    what: "rate limit",
    min: 1,
    max: 100_000,
    hint: "jobs per period, e.g. 100/1m; use a shorter period for a higher rate",
};

/// A rate limit's period. `awa.queue_limits` refuses the same range.
pub const RATE_PERIOD: DurationBound = DurationBound {
    what: "rate limit period",
    min: Duration::from_secs(1),
    max: days(1),
    hint: "whole seconds to a day, e.g. 100/1m or 5/1s",
};

/// Jobs of a queue (or of a partition of it) running at once across every
/// worker (`--global-concurrency`). `awa.queue_limits` refuses the same
/// range.
pub const GLOBAL_CONCURRENCY: CountBound = CountBound {
    what: "global concurrency",
    min: 1,
    max: 100_000,
    hint: "jobs running at once across all workers",
};

/// Fields in a limit's partition path (`args.a.b` has 2).
pub const LIMIT_PATH: CountBound = CountBound {
    what: "partition path length",
    min: 1,
    max: 8,
    hint: "a path into the job's args, e.g. args.tenant",
};

/// Jobs claimed in one round trip.
pub const CLAIM_BATCH: CountBound = CountBound {
    what: "claim batch",
    min: 1,
    max: 1024,
    hint: "larger batches only make one claim statement slower",
};

/// Copies one `awa job enqueue --count` writes in its single transaction.
pub const ENQUEUE_COUNT: CountBound = CountBound {
    what: "count",
    min: 1,
    max: 1_000_000,
    hint: "enqueue larger volumes in several runs",
};

/// Rows one list command returns.
pub const LIST_LIMIT: CountBound = CountBound {
    what: "limit",
    min: 1,
    max: 10_000,
    hint: "narrow the list with --queue or --state",
};

/// Rows one maintenance call moves (`deferred_promote`, `rescue_stale`,
/// `ready_relocate`, `exec_park`, `storage_transfer_in`): the leader uses
/// 1000 to 2000; a larger call only holds its locks longer.
pub const MAINT_LIMIT: CountBound = CountBound {
    what: "maintenance batch limit",
    min: 1,
    max: 10_000,
    hint: "rows one maintenance call moves; call again for more",
};

/// Minutes of activity one read covers: the health task keeps two hours
/// (`awa.queue_minutes`).
pub const ACTIVITY_MINUTES: CountBound = CountBound {
    what: "minutes",
    min: 1,
    max: 120,
    hint: "activity is kept for the last two hours",
};

/// Slots of one ring. Fewer than 4 leaves no room between the slot being
/// written, the ones draining and the one being reclaimed; more than 256
/// only multiplies catalog entries and planning time. The substrate
/// installer checks the same range.
pub const SLOT_COUNT: CountBound = CountBound {
    what: "slot count",
    min: 4,
    max: 256,
    hint: "each ring needs at least 4 slots; 16/8/8 is the default shape",
};

// ---- Durations ------------------------------------------------------------

/// A waiting job moves one priority step towards 1 (first) per this
/// interval. PostgreSQL
/// intervals keep microseconds, and a zero interval divides by zero in every
/// claim, so at least a second; `off` is a separate setting. Past 30 days
/// aging no longer means anything.
pub const PRIORITY_AGING: DurationBound = DurationBound {
    what: "--priority-aging",
    min: Duration::from_secs(1),
    max: days(30),
    hint: "use e.g. 5m, or `off` to turn aging off",
};

/// What the Rust API (`QueueConfig`) and the database (`queue_meta` CHECK)
/// accept for priority aging: anything that cannot divide by zero (an
/// interval rounds to microseconds) or overflow. Operators get the stricter
/// [`PRIORITY_AGING`]; tests and embedders may age faster.
pub const PRIORITY_AGING_STORED: DurationBound = DurationBound {
    what: "priority aging",
    min: Duration::from_millis(1),
    max: days(30),
    hint: "use e.g. 5m, or zero to turn aging off",
};

/// How long dead-lettered jobs are kept. Retention computes
/// `now() - retention`, which must stay a valid timestamp: ten years is far
/// inside that.
pub const DLQ_RETENTION: DurationBound = DurationBound {
    what: "--dlq-retention",
    min: Duration::from_secs(1),
    max: days(3650),
    hint: "use e.g. 14days; purge at once with `awa dlq purge`",
};

/// How long failed and cancelled jobs stay readable and retryable
/// (`awa storage configure --failure-retention`; also a CHECK on
/// `substrate_info.failure_retention`).
pub const FAILURE_RETENTION: DurationBound = DurationBound {
    what: "--failure-retention",
    min: Duration::from_secs(1),
    max: days(3650),
    hint: "use e.g. 7days (the default)",
};

/// Ring rotation cadence. Terminal history lasts about slot count x this.
pub const ROTATE_INTERVAL: DurationBound = DurationBound {
    what: "--rotate-interval",
    min: Duration::from_millis(10),
    max: days(1),
    hint: "use e.g. 30s (the default) or 200ms for tests",
};

/// How long a prune step waits for the locks of the slot it truncates.
/// Writers of the ring queue behind the lock request while it waits, so it
/// must be short; zero would mean no timeout at all.
pub const PRUNE_LOCK_TIMEOUT: DurationBound = DurationBound {
    what: "prune lock timeout",
    min: Duration::from_millis(1),
    max: Duration::from_secs(10),
    hint: "writers queue behind the truncation's lock request; the leader uses 200ms",
};

/// How long an attempt may go without a heartbeat before maintenance
/// rescues it. Workers heartbeat at a third of the bound the substrate
/// publishes ([`heartbeat_cadence`]), so any value in range works with
/// them; below a second the heartbeats themselves become the load.
pub const RESCUE_AFTER: DurationBound = DurationBound {
    what: "--rescue-after",
    min: Duration::from_secs(1),
    max: days(1),
    hint: "use e.g. 60s (the default); workers heartbeat at a third of it",
};

/// The period of a unique key spec ("one per args per 10 minutes"): whole
/// seconds, so a window is `floor(epoch / period)` on any clock. A year
/// (366 days) at most: a key held longer is a permanent record, which
/// belongs in the application's own table. `unique_derive.sql` refuses
/// the same range.
pub const UNIQUE_PERIOD: DurationBound = DurationBound {
    what: "unique period",
    min: Duration::from_secs(1),
    max: days(366),
    hint: "whole seconds, e.g. 10m or 1h",
};

/// How long graceful shutdown of a worker may take in all: waiting for
/// in-flight jobs and recording results.
pub const SHUTDOWN_GRACE: DurationBound = DurationBound {
    what: "shutdown grace",
    min: Duration::ZERO,
    max: Duration::from_secs(3600),
    hint: "in-flight jobs not finished within it are released or rescued",
};

/// How long a cancelled attempt's handler may run on after it was told,
/// before the worker drops it and frees its slot.
pub const CANCEL_GRACE: DurationBound = DurationBound {
    what: "cancel grace",
    min: Duration::ZERO,
    max: Duration::from_secs(3600),
    hint: "a handler told of a cancel gets this long to stop before it is dropped",
};

/// A job's timeout (a kind's default, or one job's own): how long its
/// handler may run before the worker drops it and fails the attempt.
pub const JOB_TIMEOUT: DurationBound = DurationBound {
    what: "job timeout",
    min: Duration::from_millis(1),
    max: days(7),
    hint: "use e.g. 30s; a job that may run longer than a week should not have one",
};

/// How often an idle queue is polled without a notification.
pub const POLL_INTERVAL: DurationBound = DurationBound {
    what: "poll interval",
    min: Duration::from_millis(1),
    max: Duration::from_secs(60),
    hint: "notifications wake workers at once; polling is the fallback",
};

/// The longest a worker waits between heartbeats of a long job (it
/// heartbeats more often when the rescue bound asks for it).
pub const HEARTBEAT_INTERVAL: DurationBound = DurationBound {
    what: "heartbeat interval",
    min: Duration::from_millis(100),
    max: Duration::from_secs(3600),
    hint: "keep it well under the rescue bound",
};

/// The heartbeat cadence a worker uses under rescue bound `rescue_after`:
/// a third of it (so two heartbeats can be late before a rescue), never
/// more than `at_most`, never less than [`HEARTBEAT_INTERVAL`]'s minimum.
pub fn heartbeat_cadence(rescue_after: Duration, at_most: Duration) -> Duration {
    (rescue_after / 3).min(at_most).max(HEARTBEAT_INTERVAL.min)
}

// ---- What handlers hand back ----------------------------------------------

/// Longest error text (and cancel reason) stored with an attempt, in bytes
/// of UTF-8. Longer text is cut on a character boundary and marked.
pub const MAX_ERROR_BYTES: usize = 8 * 1024;

/// Records of a job's attempts kept with it: the latest this many (each
/// with an error of at most [`MAX_ERROR_BYTES`]), so a job that retries
/// for ever carries a bounded history. Also `c_keep` in `attempt_push.sql`.
pub const ATTEMPT_HISTORY: usize = 25;

/// Retry and snooze delays a handler asks for are clamped into this range:
/// 0 to 30 days. A longer delay would overflow a timestamp or an interval
/// in the database and make the result unstorable; a job that must wait
/// longer should be enqueued again with `run_at`.
pub const MAX_HANDLER_DELAY: Duration = days(30);

/// The delay a handler asked for, clamped to `0..=MAX_HANDLER_DELAY`.
pub fn handler_delay(delay: Duration) -> Duration {
    delay.min(MAX_HANDLER_DELAY)
}

/// Error text as it can be stored: NUL characters (which PostgreSQL text
/// cannot hold) removed, and at most [`MAX_ERROR_BYTES`] bytes, cut on a
/// character boundary with a marker saying how much was dropped. Borrows
/// when nothing had to change.
pub fn error_text(text: &str) -> std::borrow::Cow<'_, str> {
    use std::borrow::Cow;
    let mut out: Cow<'_, str> = if text.contains('\0') {
        Cow::Owned(text.replace('\0', ""))
    } else {
        Cow::Borrowed(text)
    };
    if out.len() > MAX_ERROR_BYTES {
        let total = out.len();
        let marker_room = 64;
        let mut cut = MAX_ERROR_BYTES - marker_room;
        while !out.is_char_boundary(cut) {
            cut -= 1;
        }
        let mut s = out[..cut].to_string();
        s.push_str(&format!(
            " ... [truncated: {} of {total} bytes]",
            total - cut
        ));
        debug_assert!(s.len() <= MAX_ERROR_BYTES);
        out = Cow::Owned(s);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_refuse_outside_their_range() {
        for b in [
            PRIORITY,
            MAX_ATTEMPTS,
            SHARDS,
            CONCURRENCY,
            CLAIM_BATCH,
            ENQUEUE_COUNT,
            LIST_LIMIT,
            MAINT_LIMIT,
            SLOT_COUNT,
        ] {
            assert!(b.check(b.min - 1).is_err(), "{} min-1", b.what);
            assert_eq!(b.check(b.min), Ok(b.min), "{} min", b.what);
            assert_eq!(b.check(b.max), Ok(b.max), "{} max", b.what);
            assert!(b.check(b.max + 1).is_err(), "{} max+1", b.what);
        }
    }

    #[test]
    fn durations_refuse_outside_their_range() {
        let tick = Duration::from_nanos(1);
        for b in [
            PRIORITY_AGING,
            PRIORITY_AGING_STORED,
            DLQ_RETENTION,
            ROTATE_INTERVAL,
            RESCUE_AFTER,
            PRUNE_LOCK_TIMEOUT,
            SHUTDOWN_GRACE,
            CANCEL_GRACE,
            JOB_TIMEOUT,
            POLL_INTERVAL,
            HEARTBEAT_INTERVAL,
            UNIQUE_PERIOD,
        ] {
            if b.min > Duration::ZERO {
                assert!(b.check(b.min - tick).is_err(), "{} min-1", b.what);
            }
            assert_eq!(b.check(b.min), Ok(b.min), "{} min", b.what);
            assert_eq!(b.check(b.max), Ok(b.max), "{} max", b.what);
            let err = b.check(b.max + tick).unwrap_err().to_string();
            assert!(err.contains(b.what), "{err}");
        }
        let err = DLQ_RETENTION
            .check(Duration::from_secs(100_000_000 * 365 * 86_400))
            .unwrap_err()
            .to_string();
        assert!(err.contains("3650days"), "{err}");
    }

    #[test]
    fn error_text_is_storable() {
        assert!(matches!(error_text("fine"), std::borrow::Cow::Borrowed(_)));
        assert_eq!(error_text("a\0b"), "ab");
        let long = "é".repeat(MAX_ERROR_BYTES); // 2 bytes each
        let cut = error_text(&long);
        assert!(cut.len() <= MAX_ERROR_BYTES);
        assert!(cut.contains("[truncated:"));
        assert!(cut.starts_with("éé"));
        let exact = "x".repeat(MAX_ERROR_BYTES);
        assert_eq!(error_text(&exact), exact);
    }

    #[test]
    fn delays_and_cadence() {
        assert_eq!(
            handler_delay(Duration::from_secs(u64::MAX / 4)),
            MAX_HANDLER_DELAY
        );
        assert_eq!(
            handler_delay(Duration::from_secs(5)),
            Duration::from_secs(5)
        );
        let most = Duration::from_secs(15);
        assert_eq!(
            heartbeat_cadence(Duration::from_secs(60), most),
            Duration::from_secs(15)
        );
        assert_eq!(
            heartbeat_cadence(Duration::from_secs(3), most),
            Duration::from_secs(1)
        );
        assert_eq!(
            heartbeat_cadence(Duration::from_millis(1), most),
            HEARTBEAT_INTERVAL.min
        );
    }
}
