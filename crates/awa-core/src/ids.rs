//! Small typed numbers. A `RunLease` is what makes a write to a live
//! attempt safe: every mutation carries `(JobId, RunLease)` and the planes
//! reject a lease that is no longer current.

// Re-exported by the `awa` client: every public item is documented.
#![warn(missing_docs)]

use crate::InvalidInput;
use std::fmt;

/// A job's id, unique within a substrate.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, sqlx::Type,
)]
#[serde(transparent)]
#[sqlx(transparent)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct JobId(pub i64);

impl fmt::Display for JobId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

/// Incremented on every claim of a job; names one attempt uniquely.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, sqlx::Type,
)]
#[serde(transparent)]
#[sqlx(transparent)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct RunLease(pub i64);

impl fmt::Display for RunLease {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

/// The attempt number; the first run of a job is attempt 1.
pub type Attempt = i32;

/// Job priority: 1 runs first, 4 last; the default is 3, which leaves two
/// levels for more urgent work and one for background work
/// (`docs/adr/0012-priority-1-runs-first.md`).
///
/// A small range keeps the number of lanes per queue small, which keeps a
/// claim to a handful of index probes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize)]
#[serde(transparent)]
pub struct Priority(i16);

impl Priority {
    /// The lowest priority: runs last.
    pub const MIN: i16 = crate::bounds::PRIORITY.min as i16;
    /// The highest priority: runs first.
    pub const MAX: i16 = crate::bounds::PRIORITY.max as i16;
    /// The priority of a job that names none.
    pub const DEFAULT: Priority = Priority(3);

    /// `value` as a priority, refused outside [`Priority::MIN`] ..=
    /// [`Priority::MAX`].
    pub fn new(value: i64) -> Result<Self, InvalidInput> {
        let value = crate::bounds::PRIORITY.check(value)?;
        Ok(Self(value as i16))
    }

    /// The number, 1 to 4.
    pub fn get(self) -> i16 {
        self.0
    }
}

impl Default for Priority {
    fn default() -> Self {
        Self::DEFAULT
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn priority_range() {
        assert!(Priority::new(0).is_err());
        assert!(Priority::new(-1).is_err());
        assert!(Priority::new(5).is_err());
        assert_eq!(Priority::new(4).unwrap().get(), 4);
        assert_eq!(Priority::default().get(), 3);
    }
}
