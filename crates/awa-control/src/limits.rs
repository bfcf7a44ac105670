//! Rate limits and global concurrency per queue, or per kind within a
//! queue (`awa queue configure --rate-limit`, `--global-concurrency`;
//! docs/adr/0015). Stored in `awa.queue_limits`; the claim enforces them
//! (`awa-exec` `limit_take.sql`).

use crate::ControlError;
use awa_core::{InvalidInput, QueueName, bounds};
use sqlx::{Connection, PgConnection, Row};
use std::time::Duration;

/// A path into a job's args naming its partition: `args.tenant` is the
/// field `tenant`, `args.a.b` the field `b` of the object `a`. Jobs whose
/// args lack it share one partition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ArgsPath(Vec<String>);

impl ArgsPath {
    /// Parse `args.<field>[.<field>...]`.
    pub fn parse(text: &str) -> Result<Self, InvalidInput> {
        let refuse = |why: &str| InvalidInput::Name {
            what: "partition path",
            value: text.to_string(),
            why: why.to_string(),
        };
        let rest = text
            .strip_prefix("args.")
            .ok_or_else(|| refuse("it must start with `args.`, e.g. args.tenant"))?;
        let fields: Vec<String> = rest.split('.').map(str::to_string).collect();
        if fields.iter().any(|f| f.is_empty() || f.len() > 64) {
            return Err(refuse("each field must be 1 to 64 characters"));
        }
        bounds::LIMIT_PATH.check(fields.len() as i64)?;
        Ok(Self(fields))
    }

    /// The fields, outermost first.
    pub fn fields(&self) -> &[String] {
        &self.0
    }
}

impl std::fmt::Display for ArgsPath {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "args.{}", self.0.join("."))
    }
}

/// At most `jobs` starts in any window of `period` (sliding).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RateLimit {
    pub jobs: u32,
    pub period: Duration,
    pub by: Option<ArgsPath>,
}

/// At most `jobs` running at once across every worker.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GlobalConcurrency {
    pub jobs: u32,
    pub by: Option<ArgsPath>,
}

/// A change to one queue's limits (or one kind's in it). `None` keeps a
/// limit as it is; `Some(None)` removes it.
#[derive(Debug, Clone, Default)]
pub struct LimitChange {
    /// Limit only this kind's jobs in the queue (None: every job).
    pub kind: Option<String>,
    pub rate: Option<Option<RateLimit>>,
    pub concurrency: Option<Option<GlobalConcurrency>>,
}

/// One configured limit row, as stored.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct QueueLimit {
    pub queue: String,
    /// The kind it applies to; `None` for every job of the queue.
    pub kind: Option<String>,
    /// At most this many starts in any window of `rate_period_secs`.
    pub rate_limit: Option<i32>,
    pub rate_period_secs: Option<f64>,
    /// The rate limit's partition path (`args.tenant`), if any.
    pub rate_limit_by: Option<String>,
    /// At most this many running at once, across every worker.
    pub global_concurrency: Option<i32>,
    /// The concurrency's partition path, if any.
    pub partition_by: Option<String>,
}

impl LimitChange {
    /// Check the bounds without a database (the table's CHECK constraints
    /// refuse the same values from any other caller).
    pub fn validate(&self) -> Result<(), InvalidInput> {
        if let Some(kind) = &self.kind {
            awa_core::NewJob::check_kind(kind)?;
        }
        if let Some(Some(rate)) = &self.rate {
            bounds::RATE_LIMIT.check(i64::from(rate.jobs))?;
            bounds::RATE_PERIOD.check(rate.period)?;
            if rate.period.subsec_nanos() != 0 {
                return Err(InvalidInput::Choice {
                    what: "rate limit period",
                    value: bounds::format_duration(rate.period),
                    why: "use whole seconds",
                });
            }
        }
        if let Some(Some(c)) = &self.concurrency {
            bounds::GLOBAL_CONCURRENCY.check(i64::from(c.jobs))?;
        }
        Ok(())
    }

    /// Apply the change in one transaction; returns the queue's limits
    /// after it.
    pub async fn apply(
        &self,
        conn: &mut PgConnection,
        queue: &QueueName,
    ) -> Result<Vec<QueueLimit>, ControlError> {
        self.validate()?;
        let kind = self.kind.clone().unwrap_or_default();
        let rate = self.rate.as_ref().and_then(|r| r.as_ref());
        let conc = self.concurrency.as_ref().and_then(|c| c.as_ref());
        let path = |p: Option<&ArgsPath>| p.map(|p| p.fields().to_vec());
        let mut tx = conn.begin().await?;
        sqlx::query(include_str!("../sql/limits_configure.sql"))
            .bind(queue.as_str())
            .bind(&kind)
            .bind(self.rate.is_some())
            .bind(rate.map(|r| r.jobs as i32))
            .bind(rate.map(|r| r.period.as_secs_f64()))
            .bind(path(rate.and_then(|r| r.by.as_ref())))
            .bind(self.concurrency.is_some())
            .bind(conc.map(|c| c.jobs as i32))
            .bind(path(conc.and_then(|c| c.by.as_ref())))
            .execute(&mut *tx)
            .await?;
        sqlx::query(include_str!("../sql/limits_prune.sql"))
            .bind(queue.as_str())
            .bind(&kind)
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        list(conn, Some(queue)).await
    }
}

/// Every configured limit (or one queue's), by queue and kind.
pub async fn list(
    conn: &mut PgConnection,
    queue: Option<&QueueName>,
) -> Result<Vec<QueueLimit>, ControlError> {
    let rows = sqlx::query(include_str!("../sql/limits_list.sql"))
        .bind(queue.map(QueueName::as_str))
        .fetch_all(conn)
        .await?;
    let dotted = |p: Option<Vec<String>>| p.map(|p| format!("args.{}", p.join(".")));
    Ok(rows
        .into_iter()
        .map(|row| {
            let kind: String = row.get("kind");
            QueueLimit {
                queue: row.get("queue"),
                kind: (!kind.is_empty()).then_some(kind),
                rate_limit: row.get("rate_max"),
                rate_period_secs: row.get("rate_period_secs"),
                rate_limit_by: dotted(row.get("rate_by")),
                global_concurrency: row.get("concurrency_max"),
                partition_by: dotted(row.get("concurrency_by")),
            }
        })
        .collect())
}

impl QueueLimit {
    /// `100/1m by args.tenant, 5 at once`: the one text rendering (CLI).
    pub fn describe(&self) -> String {
        let mut parts = Vec::new();
        if let (Some(n), Some(secs)) = (self.rate_limit, self.rate_period_secs) {
            let period = bounds::format_duration(Duration::from_secs_f64(secs));
            let mut s = format!("{n}/{period}");
            if let Some(by) = &self.rate_limit_by {
                s.push_str(&format!(" per {by}"));
            }
            parts.push(s);
        }
        if let Some(n) = self.global_concurrency {
            let mut s = format!("{n} at once");
            if let Some(by) = &self.partition_by {
                s.push_str(&format!(" per {by}"));
            }
            parts.push(s);
        }
        parts.join(", ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths() {
        assert_eq!(ArgsPath::parse("args.tenant").unwrap().fields(), ["tenant"]);
        assert_eq!(ArgsPath::parse("args.a.b").unwrap().to_string(), "args.a.b");
        for bad in ["tenant", "args.", "args..x", "args.a.b.c.d.e.f.g.h.i"] {
            assert!(ArgsPath::parse(bad).is_err(), "{bad}");
        }
    }
}
