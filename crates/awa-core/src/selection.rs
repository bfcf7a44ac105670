//! Which jobs a bulk action applies to (`awa job retry --queue Q --state
//! failed`, `awa job cancel --queue Q`, the dashboard's bulk buttons, the
//! clients): one queue, optionally a state, a kind and what the args
//! contain. Checked once here, before anything is read or written.

use crate::{InvalidInput, JobState, NewJob, QueueName};

/// The action a selection is for: each accepts other states.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SelectionFor {
    /// Put terminal jobs back as fresh work: `failed` or `cancelled`
    /// (dead letters have `awa dlq retry`), one of them named.
    Retry,
    /// Cancel unfinished jobs: any unfinished state, or all of them.
    Cancel,
}

/// One queue's jobs, narrowed by state, kind and args containment.
#[derive(Debug, Clone, PartialEq)]
pub struct JobSelection {
    pub queue: QueueName,
    pub state: Option<JobState>,
    pub kind: Option<String>,
    /// jsonb containment: `{"user": 42}` matches args holding that key
    /// with that value (and anything else). Must be a JSON object or
    /// array.
    pub args_contains: Option<serde_json::Value>,
}

impl JobSelection {
    /// Check the selection for `action`.
    pub fn validate(&self, action: SelectionFor) -> Result<(), InvalidInput> {
        if let Some(kind) = &self.kind {
            NewJob::check_kind(kind)?;
        }
        if let Some(args) = &self.args_contains {
            check_containment(args)?;
        }
        match (action, self.state) {
            (SelectionFor::Retry, Some(JobState::Failed | JobState::Cancelled)) => Ok(()),
            (SelectionFor::Retry, other) => Err(InvalidInput::Choice {
                what: "the state of jobs to retry",
                value: other.map_or("any".into(), |s| s.as_str().to_string()),
                why: "name failed or cancelled (dead-lettered jobs: `awa dlq retry`)",
            }),
            (SelectionFor::Cancel, Some(s)) if s.is_terminal() => Err(InvalidInput::Choice {
                what: "the state of jobs to cancel",
                value: s.as_str().to_string(),
                why: "only unfinished jobs (available, scheduled, retryable, snoozed, running) \
                      can be cancelled",
            }),
            (SelectionFor::Cancel, _) => Ok(()),
        }
    }
}

/// A containment filter must be an object or an array: a bare scalar
/// would match args that *are* that scalar, never what was meant.
pub fn check_containment(value: &serde_json::Value) -> Result<(), InvalidInput> {
    if value.is_object() || value.is_array() {
        Ok(())
    } else {
        Err(InvalidInput::Choice {
            what: "an args filter",
            value: value.to_string(),
            why: "give a JSON object such as {\"user\": 42} (jsonb containment)",
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sel(state: Option<JobState>) -> JobSelection {
        JobSelection {
            queue: QueueName::new("q").unwrap(),
            state,
            kind: None,
            args_contains: None,
        }
    }

    #[test]
    fn each_action_takes_its_own_states() {
        use JobState::*;
        for s in [Failed, Cancelled] {
            assert!(sel(Some(s)).validate(SelectionFor::Retry).is_ok());
            assert!(sel(Some(s)).validate(SelectionFor::Cancel).is_err());
        }
        for s in [Available, Scheduled, Retryable, Snoozed, Running] {
            assert!(sel(Some(s)).validate(SelectionFor::Retry).is_err());
            assert!(sel(Some(s)).validate(SelectionFor::Cancel).is_ok());
        }
        assert!(sel(None).validate(SelectionFor::Retry).is_err());
        assert!(sel(None).validate(SelectionFor::Cancel).is_ok());
        assert!(sel(Some(Completed)).validate(SelectionFor::Cancel).is_err());
        assert!(
            sel(Some(DeadLettered))
                .validate(SelectionFor::Retry)
                .is_err()
        );
    }

    #[test]
    fn args_filters_are_objects_or_arrays() {
        let mut s = sel(None);
        s.args_contains = Some(serde_json::json!(42));
        assert!(s.validate(SelectionFor::Cancel).is_err());
        s.args_contains = Some(serde_json::json!({"user": 42}));
        assert!(s.validate(SelectionFor::Cancel).is_ok());
        s.kind = Some(String::new());
        assert!(s.validate(SelectionFor::Cancel).is_err());
    }
}
