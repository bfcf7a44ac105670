//! Times as readers get them from the database, and the range of times
//! anything writes.
//!
//! PostgreSQL's `timestamptz` reaches from 4713 BC to 294276 AD and holds
//! `infinity` and `-infinity`; chrono's `DateTime<Utc>` reaches only about
//! 262,143 years either side of year 0, and sqlx's decoding of a value past
//! it panics (`NaiveDateTime + TimeDelta overflowed`) inside `Row::get`. So
//! every reader of a stored time decodes a [`DbTime`]: the time when chrono
//! can hold it, else its raw value as PostgreSQL prints it, never a panic.
//! Readers show the raw value with a warning (issue 36).
//!
//! What Awa writes is bounded much tighter, by [`WRITABLE`]: every time a
//! producer or the runtime role may pass to a SQL function (a job's
//! `run_at`, a scheduled or promoted job's times, a rate-limit admission)
//! is finite, at or after 1970-01-01T00:00:00Z and before
//! 10000-01-01T00:00:00Z, the range an RFC 3339 time can name.

use chrono::{DateTime, Utc};
use std::fmt;

/// A stored time as a reader shows it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum DbTime {
    /// A time chrono can hold (every time Awa writes is one).
    At(DateTime<Utc>),
    /// A value outside chrono's range, as PostgreSQL prints it in UTC:
    /// `infinity`, `-infinity`, `294276-12-31 23:59:59+00`.
    Raw(String),
}

impl DbTime {
    /// The time, when it is one.
    pub fn time(&self) -> Option<DateTime<Utc>> {
        match self {
            DbTime::At(t) => Some(*t),
            DbTime::Raw(_) => None,
        }
    }

    /// The raw value of a time no chrono type can hold.
    pub fn raw(&self) -> Option<&str> {
        match self {
            DbTime::At(_) => None,
            DbTime::Raw(r) => Some(r),
        }
    }

    /// RFC 3339 (`2026-12-01T10:00:00+00:00`), or the raw value.
    pub fn to_rfc3339(&self) -> String {
        match self {
            DbTime::At(t) => t.to_rfc3339(),
            DbTime::Raw(r) => r.clone(),
        }
    }

    /// `strftime`-formatted, or the raw value.
    pub fn format(&self, fmt: &str) -> String {
        match self {
            DbTime::At(t) => t.format(fmt).to_string(),
            DbTime::Raw(r) => r.clone(),
        }
    }

    /// The time, or for a raw value the nearest end of chrono's range
    /// (`-infinity` and years before chrono's: the earliest; the rest: the
    /// latest), for code that must go on with a time (a worker handing a
    /// claimed job to its handler).
    pub fn saturating(&self) -> DateTime<Utc> {
        match self {
            DbTime::At(t) => *t,
            DbTime::Raw(r) if r.starts_with('-') || r.ends_with("BC") => DateTime::<Utc>::MIN_UTC,
            DbTime::Raw(_) => DateTime::<Utc>::MAX_UTC,
        }
    }

    /// The warning a reader shows beside a raw value: `None` for a time.
    pub fn warning(&self, what: &str) -> Option<String> {
        self.raw().map(|raw| {
            format!(
                "{what} is {raw} in the database, outside the times Awa can show \
                 (shown raw; Awa writes times from 1970 to 9999 only)"
            )
        })
    }

    /// From microseconds since 2000-01-01T00:00:00Z (PostgreSQL's binary
    /// form), which every `i64` is.
    pub fn from_pg_micros(micros: i64) -> DbTime {
        const PG_EPOCH_UNIX_MICROS: i64 = 946_684_800_000_000;
        match micros {
            i64::MAX => return DbTime::Raw("infinity".into()),
            i64::MIN => return DbTime::Raw("-infinity".into()),
            _ => {}
        }
        if let Some(t) = micros
            .checked_add(PG_EPOCH_UNIX_MICROS)
            .and_then(DateTime::from_timestamp_micros)
        {
            return DbTime::At(t);
        }
        DbTime::Raw(pg_text(micros))
    }
}

/// PostgreSQL's own text of a time chrono cannot hold, in UTC.
fn pg_text(micros: i64) -> String {
    const DAY: i64 = 86_400_000_000;
    // Days since 1970-01-01 (PostgreSQL's epoch is 10,957 days later).
    let days = micros.div_euclid(DAY) + 10_957;
    let in_day = micros.rem_euclid(DAY);
    let (y, m, d) = civil_from_days(days);
    let (h, min, s, us) = (
        in_day / 3_600_000_000,
        in_day / 60_000_000 % 60,
        in_day / 1_000_000 % 60,
        in_day % 1_000_000,
    );
    let frac = if us == 0 {
        String::new()
    } else {
        format!(".{us:06}").trim_end_matches('0').to_string()
    };
    // Year 0 is 1 BC, as PostgreSQL prints it.
    let (year, era) = if y <= 0 { (1 - y, " BC") } else { (y, "") };
    format!("{year:04}-{m:02}-{d:02} {h:02}:{min:02}:{s:02}{frac}+00{era}")
}

/// Proleptic Gregorian (year, month, day) of a day count from 1970-01-01
/// (H. Hinnant's algorithm).
fn civil_from_days(z: i64) -> (i64, i64, i64) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

impl From<DateTime<Utc>> for DbTime {
    fn from(t: DateTime<Utc>) -> Self {
        DbTime::At(t)
    }
}

impl fmt::Display for DbTime {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DbTime::At(t) => t.fmt(f),
            DbTime::Raw(r) => f.write_str(r),
        }
    }
}

/// A time serializes as `DateTime<Utc>` does; a raw value as its text.
impl serde::Serialize for DbTime {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            DbTime::At(t) => t.serialize(s),
            DbTime::Raw(r) => s.serialize_str(r),
        }
    }
}

/// A string chrono reads is a time; any other string is kept raw.
impl<'de> serde::Deserialize<'de> for DbTime {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        Ok(match DateTime::parse_from_rfc3339(&text) {
            Ok(t) => DbTime::At(t.with_timezone(&Utc)),
            Err(_) => DbTime::Raw(text),
        })
    }
}

impl sqlx::Type<sqlx::Postgres> for DbTime {
    fn type_info() -> sqlx::postgres::PgTypeInfo {
        <DateTime<Utc> as sqlx::Type<sqlx::Postgres>>::type_info()
    }

    fn compatible(ty: &sqlx::postgres::PgTypeInfo) -> bool {
        <DateTime<Utc> as sqlx::Type<sqlx::Postgres>>::compatible(ty)
    }
}

/// Never fails on a `timestamptz`, whatever it holds.
impl<'r> sqlx::Decode<'r, sqlx::Postgres> for DbTime {
    fn decode(value: sqlx::postgres::PgValueRef<'r>) -> Result<Self, sqlx::error::BoxDynError> {
        match value.format() {
            sqlx::postgres::PgValueFormat::Binary => {
                let micros = <i64 as sqlx::Decode<sqlx::Postgres>>::decode(value)?;
                Ok(DbTime::from_pg_micros(micros))
            }
            sqlx::postgres::PgValueFormat::Text => {
                let text = value.as_str()?;
                Ok(
                    match <DateTime<Utc> as sqlx::Decode<sqlx::Postgres>>::decode(value) {
                        Ok(t) => DbTime::At(t),
                        Err(_) => DbTime::Raw(text.to_string()),
                    },
                )
            }
        }
    }
}

/// In the API document: a string, an RFC 3339 time, or (for a stored value
/// outside what Awa can show) PostgreSQL's raw text such as `infinity`.
#[cfg(feature = "openapi")]
impl utoipa::PartialSchema for DbTime {
    fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
        utoipa::openapi::schema::ObjectBuilder::new()
            .schema_type(utoipa::openapi::schema::Type::String)
            .description(Some(
                "An RFC 3339 time; a stored value outside the times Awa can show \
                 (infinity, -infinity, a year past 262143) is PostgreSQL's raw text, \
                 with a warning.",
            ))
            .examples(["2026-12-01T10:00:00.123456Z"])
            .into()
    }
}

#[cfg(feature = "openapi")]
impl utoipa::ToSchema for DbTime {}

/// A range of times: `start` inclusive, `end` exclusive.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TimeBound {
    pub start: DateTime<Utc>,
    pub end: DateTime<Utc>,
}

/// Every time a producer or the runtime role may write: finite, from
/// 1970-01-01T00:00:00Z, before 10000-01-01T00:00:00Z (the SQL functions
/// name the same literals: `'1970-01-01 00:00:00+00'` and
/// `'10000-01-01 00:00:00+00'`).
pub const WRITABLE: TimeBound = TimeBound {
    start: DateTime::UNIX_EPOCH,
    // 10000-01-01T00:00:00Z in seconds since the Unix epoch.
    end: match DateTime::from_timestamp(253_402_300_800, 0) {
        Some(t) => t,
        None => panic!("year 10000 is a chrono time"),
    },
};

impl TimeBound {
    /// `t` if it lies in the bound.
    pub fn check(
        &self,
        what: &'static str,
        t: DateTime<Utc>,
    ) -> Result<DateTime<Utc>, crate::InvalidInput> {
        if t >= self.start && t < self.end {
            Ok(t)
        } else {
            Err(crate::InvalidInput::TimeOutOfRange {
                what,
                value: t.to_rfc3339(),
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn raw_values_read_as_postgresql_prints_them() {
        assert_eq!(
            DbTime::from_pg_micros(i64::MAX),
            DbTime::Raw("infinity".into())
        );
        assert_eq!(
            DbTime::from_pg_micros(i64::MIN),
            DbTime::Raw("-infinity".into())
        );
        assert_eq!(
            DbTime::from_pg_micros(0).time().unwrap().to_rfc3339(),
            "2000-01-01T00:00:00+00:00"
        );
        // The largest and smallest values PostgreSQL accepts.
        assert_eq!(
            DbTime::from_pg_micros(9_223_371_331_199_999_999),
            DbTime::Raw("294276-12-31 23:59:59.999999+00".into())
        );
        // 4714-11-24 BC is within chrono's range.
        assert!(
            DbTime::from_pg_micros(-211_813_488_000_000_000)
                .time()
                .is_some()
        );
        // Past chrono's range, before and after year 0.
        let micros = |days: i64| (days - 10_957) * 86_400_000_000;
        assert_eq!(
            DbTime::from_pg_micros(micros(106_650_000)).raw(),
            Some("293967-10-14 00:00:00+00")
        );
        assert_eq!(civil_from_days(0), (1970, 1, 1));
        assert_eq!(civil_from_days(-719_528), (0, 1, 1));
        assert_eq!(
            pg_text(micros(-719_528) + 1_500_000),
            "0001-01-01 00:00:01.5+00 BC"
        );
        for micros in [
            i64::MIN + 1,
            -1,
            1,
            i64::MAX - 1,
            i64::MIN / 2,
            i64::MAX / 2,
        ] {
            let _ = DbTime::from_pg_micros(micros).to_rfc3339();
        }
    }

    #[test]
    fn json_is_the_chrono_form_or_the_raw_text() {
        let t = DateTime::from_timestamp(1_765_000_000, 123_000).unwrap();
        assert_eq!(
            serde_json::to_value(DbTime::At(t)).unwrap(),
            serde_json::to_value(t).unwrap()
        );
        assert_eq!(
            serde_json::to_value(DbTime::Raw("infinity".into())).unwrap(),
            serde_json::json!("infinity")
        );
        let back: DbTime = serde_json::from_value(serde_json::to_value(t).unwrap()).unwrap();
        assert_eq!(back, DbTime::At(t));
        let raw: DbTime = serde_json::from_value(serde_json::json!("-infinity")).unwrap();
        assert_eq!(raw.raw(), Some("-infinity"));
    }

    #[test]
    fn the_writable_range() {
        assert_eq!(WRITABLE.end.to_rfc3339(), "+10000-01-01T00:00:00+00:00");
        assert!(WRITABLE.check("t", WRITABLE.start).is_ok());
        assert!(WRITABLE.check("t", WRITABLE.end).is_err());
        assert!(
            WRITABLE
                .check("t", WRITABLE.end - chrono::Duration::microseconds(1))
                .is_ok()
        );
        assert!(
            WRITABLE
                .check("t", WRITABLE.start - chrono::Duration::microseconds(1))
                .is_err()
        );
    }
}
