//! Periodic jobs: schedules in `awa.cron_jobs`, validated here before they
//! are written, and the tick arithmetic the leader's cron task fires by.
//!
//! A schedule fires each tick of its expression in its IANA time zone.
//! Daylight-saving rules (croner's): a tick whose wall-clock time does not
//! exist (spring forward, e.g. 02:30) fires once at the first valid time
//! after the gap; a wall-clock time that happens twice (fall back) fires
//! once, at its first occurrence. Schedules that run every second, minute
//! or hour keep running through the change by the clock.
//!
//! Ticks are whole seconds of the expression: every instant this module
//! takes (`now`, the last tick, `fire_from`) may carry a fraction of a
//! second (the database's clock does), and every tick it returns has none.
//! The arithmetic floors its inputs to the second before croner sees them,
//! because croner keeps whatever fraction it is given: a pass at
//! `12:00:00.415` and one at `12:00:00.957` would otherwise see two
//! different "ticks" of the same second.
//!
//! Exactly once per tick is enforced by `sql/cron_fire.sql` (see there and
//! ARCHITECTURE.md); this module decides *which* ticks are due.

use crate::ControlError;
use awa_core::{InvalidInput, QueueName};
use chrono::{DateTime, SubsecRound, Utc};
use sqlx::{PgConnection, Row};

/// What to do with ticks missed while no leader ran (or the leader was
/// slower than the schedule).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case", tag = "policy")]
pub enum Missed {
    /// Fire only the latest missed tick.
    Skip,
    /// Fire the latest `limit` missed ticks, oldest first (1..=1000).
    CatchUp {
        /// How many of the latest missed ticks to fire.
        limit: u32,
    },
}

/// Most missed ticks one schedule may catch up.
pub const MAX_CATCH_UP: u32 = 1000;

/// A schedule as declared (by code or by `awa cron add`).
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Schedule {
    /// Unique; letters, digits and `_ . : -`, at most 128 characters.
    pub name: String,
    /// 5 fields (minute resolution) or 6 (seconds first), or an alias such
    /// as `@hourly`, `@daily`, `@weekly`, `@monthly`, `@yearly`.
    pub cron: String,
    /// IANA name such as `Europe/Berlin`; default `UTC`.
    pub timezone: String,
    /// The queue each tick's job goes to.
    pub queue: String,
    /// The kind of each tick's job.
    pub kind: String,
    /// The args of each tick's job.
    pub args: serde_json::Value,
    /// The priority of each tick's job (1 runs first, 4 last).
    pub priority: i16,
    /// Attempts of each tick's job (None: the default).
    pub max_attempts: Option<i32>,
    /// Metadata of each tick's job.
    pub metadata: Option<serde_json::Value>,
    /// What to do with ticks missed while no leader ran.
    pub missed: Missed,
}

impl Schedule {
    /// A schedule in UTC with empty args, the default priority, and
    /// `Missed::Skip`.
    pub fn new(
        name: impl Into<String>,
        cron: impl Into<String>,
        queue: impl Into<String>,
        kind: impl Into<String>,
    ) -> Self {
        Self {
            name: name.into(),
            cron: cron.into(),
            timezone: "UTC".into(),
            queue: queue.into(),
            kind: kind.into(),
            args: serde_json::json!({}),
            priority: awa_core::Priority::DEFAULT.get(),
            max_attempts: None,
            metadata: None,
            missed: Missed::Skip,
        }
    }

    /// Check every field; the parsed expression and zone on success.
    pub fn validate(&self) -> Result<Ticks, InvalidInput> {
        check_name(&self.name)?;
        QueueName::new(self.queue.clone())?;
        if self.kind.trim().is_empty() || self.kind.len() > awa_core::NewJob::MAX_KIND_LEN {
            return Err(InvalidInput::Name {
                what: "job kind",
                value: self.kind.clone(),
                why: format!(
                    "a kind must be 1 to {} bytes and not blank",
                    awa_core::NewJob::MAX_KIND_LEN
                ),
            });
        }
        awa_core::Priority::new(i64::from(self.priority))?;
        // What every fire enqueues must be storable (no NUL in jsonb).
        awa_core::check_storable_json("schedule args", &self.args)?;
        if let Some(m) = &self.metadata {
            awa_core::check_storable_json("schedule metadata", m)?;
        }
        if let Some(n) = self.max_attempts {
            awa_core::bounds::MAX_ATTEMPTS.check(i64::from(n))?;
        }
        if let Missed::CatchUp { limit } = self.missed
            && !(1..=MAX_CATCH_UP).contains(&limit)
        {
            return Err(InvalidInput::OutOfRange {
                what: "catch-up limit",
                value: i64::from(limit),
                min: 1,
                max: i64::from(MAX_CATCH_UP),
                hint: "how many missed ticks to fire after downtime, newest kept",
            });
        }
        if let Some(m) = &self.metadata
            && !m.is_object()
        {
            return Err(InvalidInput::Name {
                what: "schedule metadata",
                value: m.to_string(),
                why: "must be a JSON object (each fire adds its tick under \"awa_cron\")".into(),
            });
        }
        let ticks = Ticks::parse(&self.cron, &self.timezone)?;
        ticks.check_fires(&self.cron, Utc::now())?;
        Ok(ticks)
    }
}

fn check_name(name: &str) -> Result<(), InvalidInput> {
    let ok = !name.is_empty()
        && name.len() <= 128
        && name
            .chars()
            .next()
            .is_some_and(|c| c.is_ascii_alphanumeric())
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "_.:-".contains(c));
    if ok {
        Ok(())
    } else {
        Err(InvalidInput::Name {
            what: "schedule name",
            value: name.to_string(),
            why: "use 1 to 128 letters, digits and _ . : - (starting with a letter or digit)"
                .into(),
        })
    }
}

/// A parsed expression in its zone: which instants are ticks.
#[derive(Debug, Clone)]
pub struct Ticks {
    cron: croner::Cron,
    tz: chrono_tz::Tz,
}

impl Ticks {
    /// Parse `expr` (5 or 6 fields, or an `@` alias) in zone `tz`. The
    /// error quotes what was wrong.
    pub fn parse(expr: &str, tz: &str) -> Result<Self, InvalidInput> {
        let zone: chrono_tz::Tz = tz.parse().map_err(|_| InvalidInput::Name {
            what: "time zone",
            value: tz.to_string(),
            why: "not an IANA time zone name (such as UTC, Europe/Berlin, America/New_York)".into(),
        })?;
        let fields = expr.split_whitespace().count();
        if !expr.trim_start().starts_with('@') && !(5..=6).contains(&fields) {
            return Err(InvalidInput::Name {
                what: "cron expression",
                value: expr.to_string(),
                why: format!(
                    "has {fields} fields; use 5 (minute hour day month weekday), 6 (seconds first) or an alias such as @hourly"
                ),
            });
        }
        let cron = croner::parser::CronParser::builder()
            .seconds(croner::parser::Seconds::Optional)
            .year(croner::parser::Year::Disallowed)
            .build()
            .parse(expr)
            .map_err(|err| InvalidInput::Name {
                what: "cron expression",
                value: expr.to_string(),
                why: err.to_string(),
            })?;
        Ok(Self { cron, tz: zone })
    }

    /// Refuse an expression with no tick after `now` (such as `0 0 30 2 *`,
    /// February 30), which would never fire. `expr` is quoted.
    pub fn check_fires(&self, expr: &str, now: DateTime<Utc>) -> Result<(), InvalidInput> {
        match self.next_after(now) {
            Some(_) => Ok(()),
            None => Err(InvalidInput::Name {
                what: "cron expression",
                value: expr.to_string(),
                why: "has no future tick, so it would never fire (a date that does not exist, such as February 30?)".into(),
            }),
        }
    }

    /// The first tick strictly after `after` (a whole second; `after`
    /// may have a fraction: no whole second lies strictly between it and
    /// the next whole second, so flooring it first loses no tick).
    pub fn next_after(&self, after: DateTime<Utc>) -> Option<DateTime<Utc>> {
        self.cron
            .find_next_occurrence(&whole_second(after).with_timezone(&self.tz), false)
            .ok()
            .map(|t| t.with_timezone(&Utc))
    }

    /// The ticks to fire at `now`: those after `after` and at or before
    /// `now`, the newest `keep` of them, oldest first, each a whole second
    /// (a tick is at or before `now` exactly when it is at or before
    /// `now`'s whole second). Bounded work whatever the gap: it walks back
    /// from `now`, at most `keep` ticks, and walks forward (exact around
    /// clock changes) only over a window that contains a change of the
    /// zone's UTC offset.
    pub fn due(&self, after: DateTime<Utc>, now: DateTime<Utc>, keep: u32) -> Vec<DateTime<Utc>> {
        let now = whole_second(now);
        let back = self.walk_back(after, now, keep);
        // Backward search can misplace a tick next to a clock change; the
        // forward search is the reference. Within a window without a
        // change both agree.
        let lower = back.first().copied().unwrap_or(now);
        let from = (lower - CLOCK_CHANGE_MARGIN).max(after);
        if self.offset(from) == self.offset(now) {
            return back;
        }
        let mut ticks = Vec::new();
        let mut cursor = from;
        while let Some(next) = self.next_after(cursor) {
            if next > now {
                break;
            }
            ticks.push(next);
            cursor = next;
        }
        let skip = ticks.len().saturating_sub(keep as usize);
        ticks.split_off(skip)
    }

    fn walk_back(&self, after: DateTime<Utc>, now: DateTime<Utc>, keep: u32) -> Vec<DateTime<Utc>> {
        let mut out = Vec::new();
        let mut cursor = match self
            .cron
            .find_previous_occurrence(&now.with_timezone(&self.tz), true)
        {
            Ok(t) => t,
            Err(_) => return out,
        };
        while out.len() < keep as usize {
            let tick = cursor.with_timezone(&Utc);
            if tick <= after {
                break;
            }
            out.push(tick);
            cursor = match self.cron.find_previous_occurrence(&cursor, false) {
                Ok(t) => t,
                Err(_) => break,
            };
        }
        out.reverse();
        out
    }

    fn offset(&self, at: DateTime<Utc>) -> chrono::FixedOffset {
        use chrono::{Offset, TimeZone};
        self.tz.offset_from_utc_datetime(&at.naive_utc()).fix()
    }
}

/// `t` without its fraction of a second: the instant of the tick it could
/// be. Every instant is floored here before croner sees it, so every tick
/// it returns is a whole second.
fn whole_second(t: DateTime<Utc>) -> DateTime<Utc> {
    t.trunc_subsecs(0)
}

/// How far before the oldest due tick to start the forward walk when the
/// zone's offset changes in between: more than any daylight-saving shift.
const CLOCK_CHANGE_MARGIN: chrono::Duration = chrono::Duration::hours(3);

/// A schedule as stored, with its firing state.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Stored {
    #[serde(flatten)]
    pub schedule: Schedule,
    pub enabled: bool,
    /// Ticks at or before this are never fired (creation, change, resume).
    pub fire_from: DateTime<Utc>,
    /// The latest tick fired.
    pub last_tick: Option<DateTime<Utc>>,
    /// The job of the latest fire (tick or manual run).
    pub last_job_id: Option<i64>,
    pub last_enqueued_at: Option<DateTime<Utc>>,
    /// Why the leader could not fire this schedule (its expression, zone,
    /// queue or args, or the enqueue refused its job), while it cannot:
    /// cleared by the next fire and by any change of the schedule.
    /// Other schedules keep firing meanwhile.
    pub error: Option<String>,
    /// Since when `error` has held (the first pass that failed this way).
    pub error_since: Option<DateTime<Utc>>,
    /// Stored times outside what Awa can show (written by SQL: infinity, a
    /// year past 262143), each given raw; the time itself reads as absent
    /// (`fire_from` as the latest time there is). Such a schedule does not
    /// fire (the leader records why) until it is defined again.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
}

impl Stored {
    /// The next tick that would fire (None when paused or the expression
    /// has no future tick): the first tick after the last one fired (and
    /// after `fire_from`) that is not before `now`'s whole second, so a
    /// tick of the current second that has not fired yet is still next.
    /// A whole second, like every tick.
    pub fn next_fire(&self, now: DateTime<Utc>) -> Option<DateTime<Utc>> {
        if !self.enabled || !self.warnings.is_empty() {
            return None;
        }
        let ticks = Ticks::parse(&self.schedule.cron, &self.schedule.timezone).ok()?;
        let after = self.fire_from.max(self.last_tick.unwrap_or(self.fire_from));
        ticks.next_after(after.max(whole_second(now) - chrono::Duration::seconds(1)))
    }
}

/// Whether `upsert` created the schedule, changed it, or found it as is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Upserted {
    Created,
    Updated,
    Unchanged,
}

/// The schedule as the parameters of cron_create.sql / cron_upsert.sql.
fn with_schedule<'q>(
    sql: &'static str,
    s: &'q Schedule,
) -> sqlx::query::Query<'q, sqlx::Postgres, sqlx::postgres::PgArguments> {
    let (policy, limit) = match s.missed {
        Missed::Skip => ("skip", 1),
        Missed::CatchUp { limit } => ("catch_up", limit as i32),
    };
    sqlx::query(sql)
        .bind(&s.name)
        .bind(&s.cron)
        .bind(&s.timezone)
        .bind(&s.queue)
        .bind(&s.kind)
        .bind(&s.args)
        .bind(s.priority)
        .bind(s.max_attempts)
        .bind(&s.metadata)
        .bind(policy)
        .bind(limit)
}

/// Create a schedule; false (nothing written) when the name is taken.
pub async fn create(conn: &mut PgConnection, s: &Schedule) -> Result<bool, ControlError> {
    s.validate()?;
    let made = with_schedule(include_str!("../sql/cron_create.sql"), s)
        .fetch_optional(conn)
        .await?;
    Ok(made.is_some())
}

/// Create or change a schedule (validated first: nothing is written for
/// bad input).
pub async fn upsert(conn: &mut PgConnection, s: &Schedule) -> Result<Upserted, ControlError> {
    s.validate()?;
    let row = with_schedule(include_str!("../sql/cron_upsert.sql"), s)
        .fetch_optional(conn)
        .await?;
    Ok(match row {
        None => Upserted::Unchanged,
        Some(r) if r.get::<bool, _>("created") => Upserted::Created,
        Some(_) => Upserted::Updated,
    })
}

/// Declare the schedules a process owns: upsert each; with `prune`, also
/// delete every schedule not in the set. One transaction. Returns the
/// names pruned.
pub async fn sync(
    conn: &mut PgConnection,
    schedules: &[Schedule],
    prune: bool,
) -> Result<Vec<String>, ControlError> {
    use sqlx::Connection;
    for s in schedules {
        s.validate()?;
    }
    let mut tx = conn.begin().await?;
    for s in schedules {
        upsert(&mut tx, s).await?;
    }
    let pruned = if prune {
        let names: Vec<&str> = schedules.iter().map(|s| s.name.as_str()).collect();
        sqlx::query_scalar(include_str!("../sql/cron_prune.sql"))
            .bind(names)
            .fetch_all(&mut *tx)
            .await?
    } else {
        Vec::new()
    };
    tx.commit().await?;
    Ok(pruned)
}

/// Delete a schedule; false when there was none of that name.
pub async fn remove(conn: &mut PgConnection, name: &str) -> Result<bool, ControlError> {
    check_name(name)?;
    let gone: Option<String> = sqlx::query_scalar(include_str!("../sql/cron_remove.sql"))
        .bind(name)
        .fetch_optional(conn)
        .await?;
    Ok(gone.is_some())
}

/// Pause (`false`) or resume (`true`); false when there is no such
/// schedule. Ticks of the pause are not fired on resume.
pub async fn set_enabled(
    conn: &mut PgConnection,
    name: &str,
    enabled: bool,
) -> Result<bool, ControlError> {
    check_name(name)?;
    let done: Option<String> = sqlx::query_scalar(include_str!("../sql/cron_set_enabled.sql"))
        .bind(name)
        .bind(enabled)
        .fetch_optional(conn)
        .await?;
    Ok(done.is_some())
}

/// Every schedule (or only the enabled ones), by name.
pub async fn list(
    conn: &mut PgConnection,
    enabled_only: bool,
) -> Result<Vec<Stored>, ControlError> {
    let rows = sqlx::query(include_str!("../sql/cron_list.sql"))
        .bind(enabled_only)
        .fetch_all(conn)
        .await?;
    Ok(rows
        .into_iter()
        .map(|r| {
            let missed = match r.get::<String, _>("missed_policy").as_str() {
                "catch_up" => Missed::CatchUp {
                    limit: r.get::<i32, _>("catch_up_limit").max(1) as u32,
                },
                _ => Missed::Skip,
            };
            let mut warnings = Vec::new();
            let mut time = |column: &str| -> Option<DateTime<Utc>> {
                let t: Option<awa_core::DbTime> = r.get(column);
                if let Some(w) = t.as_ref().and_then(|t| t.warning(column)) {
                    warnings.push(w);
                }
                t.and_then(|t| t.time())
            };
            let fire_from = time("fire_from").unwrap_or(DateTime::<Utc>::MAX_UTC);
            let last_tick = time("last_tick");
            let last_enqueued_at = time("last_enqueued_at");
            let error_since = time("error_since");
            Stored {
                schedule: Schedule {
                    name: r.get("name"),
                    cron: r.get("cron_expr"),
                    timezone: r.get("timezone"),
                    queue: r.get("queue"),
                    kind: r.get("kind"),
                    args: r.get("args"),
                    priority: r.get("priority"),
                    max_attempts: r.get("max_attempts"),
                    metadata: r.get("metadata"),
                    missed,
                },
                enabled: r.get("enabled"),
                fire_from,
                last_tick,
                last_job_id: r.get("last_job_id"),
                last_enqueued_at,
                error: r.get("error"),
                error_since,
                warnings,
            }
        })
        .collect())
}

/// Record why schedule `name` could not fire (see `sql/cron_record_error.sql`);
/// true when this is news (no error before, or a different one), so the
/// caller logs each error once and the row is not rewritten every pass.
/// The text is bounded like any stored error (`awa_core::bounds::error_text`).
pub async fn record_error(
    conn: &mut PgConnection,
    name: &str,
    error: &str,
) -> Result<bool, ControlError> {
    let news: Option<String> = sqlx::query_scalar(include_str!("../sql/cron_record_error.sql"))
        .bind(name)
        .bind(awa_core::bounds::error_text(error).as_ref())
        .fetch_optional(conn)
        .await?;
    Ok(news.is_some())
}

/// The guard of one fire, in the transaction that enqueued `job_id` for
/// `tick` (see `sql/cron_fire.sql`): true when this transaction fires the
/// tick; false when it must roll back (fired already, paused, changed).
pub async fn record_fire(
    conn: &mut PgConnection,
    stored: &Stored,
    tick: DateTime<Utc>,
    job_id: i64,
) -> Result<bool, ControlError> {
    let won: Option<String> = sqlx::query_scalar(include_str!("../sql/cron_fire.sql"))
        .bind(&stored.schedule.name)
        .bind(tick)
        .bind(job_id)
        .bind(&stored.schedule.cron)
        .bind(&stored.schedule.timezone)
        .fetch_optional(conn)
        .await?;
    Ok(won.is_some())
}

/// Record a manual run's job; false when the schedule is gone.
pub async fn record_run_now(
    conn: &mut PgConnection,
    name: &str,
    job_id: i64,
) -> Result<bool, ControlError> {
    let done: Option<String> = sqlx::query_scalar(include_str!("../sql/cron_run_now.sql"))
        .bind(name)
        .bind(job_id)
        .fetch_optional(conn)
        .await?;
    Ok(done.is_some())
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    fn utc(y: i32, mo: u32, d: u32, h: u32, mi: u32, s: u32) -> DateTime<Utc> {
        Utc.with_ymd_and_hms(y, mo, d, h, mi, s).unwrap()
    }

    #[test]
    fn bad_input_is_refused_with_what_was_wrong() {
        let ok = Schedule::new("nightly", "0 3 * * *", "reports", "build_report");
        assert!(ok.validate().is_ok());
        let cases: Vec<(Schedule, &str)> = vec![
            (
                Schedule {
                    cron: "61 * * * *".into(),
                    ..ok.clone()
                },
                "61 * * * *",
            ),
            (
                Schedule {
                    cron: "0 0 30 2 *".into(),
                    ..ok.clone()
                },
                "never fire",
            ),
            (
                Schedule {
                    cron: "* * *".into(),
                    ..ok.clone()
                },
                "3 fields",
            ),
            (
                Schedule {
                    cron: "0 0 0 1 1 * 2030".into(),
                    ..ok.clone()
                },
                "7 fields",
            ),
            (
                Schedule {
                    timezone: "Mars/Olympus".into(),
                    ..ok.clone()
                },
                "Mars/Olympus",
            ),
            (
                Schedule {
                    name: "has space".into(),
                    ..ok.clone()
                },
                "has space",
            ),
            (
                Schedule {
                    name: String::new(),
                    ..ok.clone()
                },
                "schedule name",
            ),
            (
                Schedule {
                    queue: "Bad Queue".into(),
                    ..ok.clone()
                },
                "Bad Queue",
            ),
            (
                Schedule {
                    kind: " ".into(),
                    ..ok.clone()
                },
                "kind",
            ),
            (
                Schedule {
                    priority: 9,
                    ..ok.clone()
                },
                "priority",
            ),
            (
                Schedule {
                    missed: Missed::CatchUp { limit: 0 },
                    ..ok.clone()
                },
                "catch-up",
            ),
            (
                Schedule {
                    args: serde_json::json!({"a": "\u{0}"}),
                    ..ok.clone()
                },
                "NUL",
            ),
            (
                Schedule {
                    metadata: Some(serde_json::json!({"m": "\u{0}"})),
                    ..ok.clone()
                },
                "NUL",
            ),
        ];
        for (s, quoted) in cases {
            let err = s.validate().expect_err("refused").to_string();
            assert!(err.contains(quoted), "{err:?} should mention {quoted:?}");
        }
        for alias in [
            "@hourly",
            "@daily",
            "@weekly",
            "@monthly",
            "@yearly",
            "*/5 * * * * *",
        ] {
            assert!(Ticks::parse(alias, "UTC").is_ok(), "{alias}");
        }
    }

    #[test]
    fn due_keeps_the_newest_ticks_oldest_first_with_bounded_work() {
        let every_minute = Ticks::parse("* * * * *", "UTC").unwrap();
        let after = utc(2026, 1, 1, 0, 0, 0);
        let now = utc(2026, 1, 1, 3, 0, 30);
        assert_eq!(
            every_minute.due(after, now, 1),
            vec![utc(2026, 1, 1, 3, 0, 0)]
        );
        assert_eq!(
            every_minute.due(after, now, 3),
            vec![
                utc(2026, 1, 1, 2, 58, 0),
                utc(2026, 1, 1, 2, 59, 0),
                utc(2026, 1, 1, 3, 0, 0)
            ]
        );
        // Exclusive of `after`, inclusive of `now`.
        assert_eq!(
            every_minute.due(utc(2026, 1, 1, 3, 0, 0), now, 5),
            Vec::<DateTime<Utc>>::new()
        );
        assert_eq!(
            every_minute.due(utc(2026, 1, 1, 2, 59, 0), utc(2026, 1, 1, 3, 0, 0), 5),
            vec![utc(2026, 1, 1, 3, 0, 0)]
        );
        // Years of downtime cost `keep` steps, not one per missed tick.
        let far = every_minute.due(utc(2000, 1, 1, 0, 0, 0), now, 2);
        assert_eq!(far.len(), 2);
    }

    #[test]
    fn ticks_are_whole_seconds_whatever_the_fraction_of_now() {
        let at = |s: u32, nanos: u32| {
            utc(2026, 1, 1, 12, 0, s) + chrono::Duration::nanoseconds(nanos.into())
        };
        let every_second = Ticks::parse("* * * * * *", "UTC").unwrap();
        let every_minute = Ticks::parse("* * * * *", "UTC").unwrap();
        // Two passes inside the second of a tick see the same tick, and
        // once it is fired (it is `after`), nothing more.
        for now in [at(0, 415_276_000), at(0, 957_347_000), at(0, 999_999_999)] {
            assert_eq!(
                every_minute.due(at(0, 0) - chrono::Duration::minutes(1), now, 5),
                vec![at(0, 0)]
            );
            assert_eq!(
                every_minute.due(at(0, 0), now, 5),
                Vec::<DateTime<Utc>>::new()
            );
            assert_eq!(
                every_second.due(at(0, 0), now, 5),
                Vec::<DateTime<Utc>>::new()
            );
        }
        assert_eq!(
            every_second.due(at(0, 0), at(2, 1), 5),
            vec![at(1, 0), at(2, 0)]
        );
        // A fractional `after` (fire_from is the database's now()) does not
        // admit the tick of its own second, and loses no later one.
        assert_eq!(
            every_second.due(at(0, 300), at(2, 0), 5),
            vec![at(1, 0), at(2, 0)]
        );
        assert_eq!(every_second.next_after(at(0, 629_382_547)), Some(at(1, 0)));
        // What `awa cron add '0 3 * * *'` reports.
        let nightly = Stored {
            schedule: Schedule::new("n", "0 3 * * *", "q", "k"),
            enabled: true,
            fire_from: utc(2026, 1, 1, 3, 0, 0) + chrono::Duration::nanoseconds(629_382_547),
            last_tick: None,
            last_job_id: None,
            last_enqueued_at: None,
            error: None,
            error_since: None,
            warnings: Vec::new(),
        };
        assert_eq!(
            nightly.next_fire(nightly.fire_from),
            Some(utc(2026, 1, 2, 3, 0, 0))
        );
        // A tick of the current second not fired yet is still next.
        let fresh = Stored {
            schedule: Schedule::new("s", "* * * * * *", "q", "k"),
            fire_from: at(0, 0) - chrono::Duration::seconds(5),
            ..nightly.clone()
        };
        assert_eq!(fresh.next_fire(at(0, 629_382_547)), Some(at(0, 0)));
    }

    #[test]
    fn daylight_saving_days_fire_once_as_documented() {
        // New York, 2026: clocks go 02:00 -> 03:00 on March 8 and
        // 02:00 -> 01:00 on November 1.
        let at_0230 = Ticks::parse("30 2 * * *", "America/New_York").unwrap();
        let spring = at_0230.due(utc(2026, 3, 7, 12, 0, 0), utc(2026, 3, 8, 12, 0, 0), 10);
        // 02:30 does not exist: once, at 03:00 EDT (07:00 UTC).
        assert_eq!(spring, vec![utc(2026, 3, 8, 7, 0, 0)]);
        let at_0130 = Ticks::parse("30 1 * * *", "America/New_York").unwrap();
        let fall = at_0130.due(utc(2026, 10, 31, 12, 0, 0), utc(2026, 11, 1, 12, 0, 0), 10);
        // 01:30 happens twice: once, the first time (EDT, 05:30 UTC).
        assert_eq!(fall, vec![utc(2026, 11, 1, 5, 30, 0)]);
        // An hourly schedule keeps its hours by the clock: 23 on spring day.
        let hourly = Ticks::parse("@hourly", "America/New_York").unwrap();
        let day = hourly.due(utc(2026, 3, 8, 5, 0, 0), utc(2026, 3, 9, 4, 0, 0), 100);
        assert_eq!(day.len(), 23, "{day:?}");
    }
}
