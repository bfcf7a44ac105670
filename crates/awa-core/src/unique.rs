//! Uniqueness said the way users think: a key spec.
//!
//! A job enqueued with a [`Unique`] spec is unique by its kind plus any of
//! its queue, its whole args or chosen top-level fields of its args,
//! optionally per window of a period ("one per args per 10 minutes"), and
//! optionally still after it finished in chosen final states, until its
//! window ends. The key itself is derived in SQL, by
//! `{schema}.unique_derive` (awa-ready), from the JSON form of this spec
//! ([`Unique::to_json`]), so every producer gets the same key for the same
//! job; this type only says what to send and checks it first. See ADR 10
//! and `docs/sql-producer.md` ("Unique specs").

use crate::{InvalidInput, JobState, bounds};
use std::time::Duration;

/// A unique key spec. The kind is always part of the key.
///
/// ```
/// use awa_core::{JobState, Unique};
/// use std::time::Duration;
///
/// // One job per kind and args every 10 minutes, completed ones included.
/// let spec = Unique::by_args().period(Duration::from_secs(600));
/// assert_eq!(
///     spec.to_json(),
///     serde_json::json!({"by": ["args"], "period": 600, "states": ["completed"]})
/// );
/// // One unfinished job per tenant and queue, whatever else the args say.
/// let spec = Unique::by_fields(["tenant"]).with_queue();
/// assert_eq!(spec.to_json(), serde_json::json!({"by": ["queue", "args.tenant"]}));
/// // Failed jobs keep the key for the period too.
/// let spec = Unique::by_args()
///     .period(Duration::from_secs(3600))
///     .states([JobState::Completed, JobState::Failed]);
/// assert!(spec.validate().is_ok());
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Default, serde::Serialize)]
pub struct Unique {
    /// The queue is part of the key.
    pub by_queue: bool,
    /// The whole args are part of the key.
    pub by_args: bool,
    /// These top-level fields of the args are part of the key (a missing
    /// field and JSON null are the same value).
    pub fields: Vec<String>,
    /// One job per window of this length (whole seconds, windows aligned to
    /// the Unix epoch, by the enqueueing transaction's start time). `None`:
    /// no period, the key holds while the job is unfinished.
    pub period: Option<Duration>,
    /// Final states (completed, failed, cancelled) in which a finished job
    /// keeps the key until its window ends; a dead-lettered job counts as
    /// failed. `None`: completed when there is a period, none without.
    /// Unfinished jobs always hold their key.
    pub states: Option<Vec<JobState>>,
}

impl Unique {
    /// Most bytes of one named args field.
    pub const MAX_FIELD_LEN: usize = 255;

    /// Unique by kind alone: one unfinished job of the kind (per window,
    /// with [`Unique::period`]).
    pub fn by_kind() -> Self {
        Self::default()
    }

    /// Unique by kind and the whole args.
    pub fn by_args() -> Self {
        Self {
            by_args: true,
            ..Self::default()
        }
    }

    /// Unique by kind and these top-level fields of the args.
    pub fn by_fields<I, S>(fields: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        Self {
            fields: fields.into_iter().map(Into::into).collect(),
            ..Self::default()
        }
    }

    /// The queue is part of the key too.
    pub fn with_queue(mut self) -> Self {
        self.by_queue = true;
        self
    }

    /// One more top-level field of the args is part of the key.
    pub fn with_field(mut self, field: impl Into<String>) -> Self {
        self.fields.push(field.into());
        self
    }

    /// One job per window of `period` (whole seconds, 1 s to 366 days).
    pub fn period(mut self, period: Duration) -> Self {
        self.period = Some(period);
        self
    }

    /// The final states in which a finished job keeps the key until its
    /// window ends (completed, failed, cancelled; empty: none).
    pub fn states<I: IntoIterator<Item = JobState>>(mut self, states: I) -> Self {
        self.states = Some(states.into_iter().collect());
        self
    }

    /// Check what the database would refuse, with a message that says
    /// what to change.
    pub fn validate(&self) -> Result<(), InvalidInput> {
        for field in &self.fields {
            if field.is_empty() || field.len() > Self::MAX_FIELD_LEN {
                return Err(InvalidInput::Name {
                    what: "unique args field",
                    value: field.clone(),
                    why: "a field name must be 1 to 255 bytes".into(),
                });
            }
        }
        if let Some(period) = self.period {
            bounds::UNIQUE_PERIOD.check(period)?;
            if period.subsec_nanos() != 0 {
                return Err(InvalidInput::Name {
                    what: "unique period",
                    value: bounds::format_duration(period),
                    why: "it must be whole seconds (windows are counted in seconds)".into(),
                });
            }
        }
        let states = self.states.as_deref().unwrap_or_default();
        for state in states {
            if !matches!(
                state,
                JobState::Completed | JobState::Failed | JobState::Cancelled
            ) {
                return Err(InvalidInput::Name {
                    what: "unique state",
                    value: state.to_string(),
                    why: "name final states that keep the key until the period ends: \
                          completed, failed (also dead-lettered jobs) or cancelled; \
                          unfinished jobs always hold their key"
                        .into(),
                });
            }
        }
        if !states.is_empty() && self.period.is_none() {
            return Err(InvalidInput::Name {
                what: "unique spec",
                value: self.describe(),
                why: "keeping the key after the job finished needs a period \
                      (how long to keep it); give one, or leave the states out"
                    .into(),
            });
        }
        Ok(())
    }

    /// The spec as `awa.enqueue` takes it: `{"by": [...], "period": secs,
    /// "states": [...]}`, members left out when not set.
    pub fn to_json(&self) -> serde_json::Value {
        let mut out = serde_json::Map::new();
        let mut by: Vec<String> = Vec::new();
        if self.by_queue {
            by.push("queue".into());
        }
        if self.by_args {
            by.push("args".into());
        }
        by.extend(self.fields.iter().map(|f| format!("args.{f}")));
        if !by.is_empty() {
            out.insert("by".into(), by.into());
        }
        if let Some(period) = self.period {
            out.insert("period".into(), period.as_secs().into());
        }
        let states = match (&self.states, self.period) {
            (Some(states), _) => Some(states.clone()),
            (None, Some(_)) => Some(vec![JobState::Completed]),
            (None, None) => None,
        };
        if let Some(states) = states {
            let names: Vec<&str> = states.iter().map(|s| s.as_str()).collect();
            out.insert("states".into(), names.into());
        }
        serde_json::Value::Object(out)
    }

    /// A short human form: `kind, queue and args.tenant per 10m (kept
    /// after completed)`.
    pub fn describe(&self) -> String {
        let mut parts = vec!["kind".to_string()];
        if self.by_queue {
            parts.push("queue".into());
        }
        if self.by_args {
            parts.push("args".into());
        }
        parts.extend(self.fields.iter().map(|f| format!("args.{f}")));
        let mut out = match parts.split_last() {
            Some((last, [])) => last.clone(),
            Some((last, rest)) => format!("{} and {last}", rest.join(", ")),
            None => unreachable!("kind is always a part"),
        };
        if let Some(period) = self.period {
            out.push_str(&format!(" per {}", bounds::format_duration(period)));
        }
        if let Some(serde_json::Value::Array(states)) = self.to_json().get("states")
            && !states.is_empty()
        {
            let names: Vec<&str> = states.iter().filter_map(|s| s.as_str()).collect();
            out.push_str(&format!(" (kept after {})", names.join(", ")));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_json_form_names_what_was_chosen() {
        assert_eq!(Unique::by_kind().to_json(), serde_json::json!({}));
        assert_eq!(
            Unique::by_fields(["tenant", "user"]).with_queue().to_json(),
            serde_json::json!({"by": ["queue", "args.tenant", "args.user"]})
        );
        assert_eq!(
            Unique::by_args()
                .period(Duration::from_secs(60))
                .states([])
                .to_json(),
            serde_json::json!({"by": ["args"], "period": 60, "states": []})
        );
        assert_eq!(
            Unique::by_args()
                .period(Duration::from_secs(600))
                .states([JobState::Completed, JobState::Cancelled])
                .describe(),
            "kind and args per 10m (kept after completed, cancelled)"
        );
        assert_eq!(Unique::by_kind().describe(), "kind");
    }

    #[test]
    fn bad_specs_are_refused_with_what_to_change() {
        let refused = |u: Unique| u.validate().unwrap_err().to_string();
        assert!(refused(Unique::by_fields([""])).contains("1 to 255 bytes"));
        assert!(refused(Unique::by_fields(["x".repeat(256)])).contains("1 to 255 bytes"));
        assert!(refused(Unique::by_args().period(Duration::ZERO)).contains("unique period"));
        assert!(
            refused(Unique::by_args().period(Duration::from_secs(367 * 86_400)))
                .contains("unique period")
        );
        assert!(
            refused(Unique::by_args().period(Duration::from_millis(1500)))
                .contains("whole seconds")
        );
        assert!(
            refused(
                Unique::by_args()
                    .period(Duration::from_secs(60))
                    .states([JobState::Running])
            )
            .contains("unfinished jobs always hold")
        );
        assert!(
            refused(Unique::by_args().states([JobState::Completed])).contains("needs a period")
        );
        assert!(
            Unique::by_args()
                .period(Duration::from_secs(366 * 86_400))
                .states([JobState::Failed])
                .validate()
                .is_ok()
        );
    }
}
