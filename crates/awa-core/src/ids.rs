//! Small typed numbers. A `RunLease` is what makes a write to a live
//! attempt safe: every mutation carries `(JobId, RunLease)` and the planes
//! reject a lease that is no longer current.

// Re-exported by the `awa` client: every public item is documented.
#![warn(missing_docs)]

use crate::InvalidInput;
use std::fmt;

/// A job's id, unique within a substrate.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize)]
#[serde(transparent)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct JobId(pub i64);

impl fmt::Display for JobId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

/// Incremented on every claim of a job; names one attempt uniquely.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize)]
#[serde(transparent)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct RunLease(pub i64);

impl fmt::Display for RunLease {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

/// A newtype over `i64` that is `i64` to sqlx: bound, decoded and put in
/// arrays as its number. Written out rather than derived: sqlx's derives
/// need its `derive` feature, whose proc-macro crate compiles a second,
/// host copy of sqlx-postgres, tokio, OpenSSL and more (about 100 s of CPU
/// in every clean build, docs/development.md "Compile once").
macro_rules! sqlx_transparent_i64 {
    ($ty:ident) => {
        impl<DB: sqlx::Database> sqlx::Type<DB> for $ty
        where
            i64: sqlx::Type<DB>,
        {
            fn type_info() -> DB::TypeInfo {
                <i64 as sqlx::Type<DB>>::type_info()
            }

            fn compatible(ty: &DB::TypeInfo) -> bool {
                <i64 as sqlx::Type<DB>>::compatible(ty)
            }
        }

        impl<'q, DB: sqlx::Database> sqlx::Encode<'q, DB> for $ty
        where
            i64: sqlx::Encode<'q, DB>,
        {
            fn encode_by_ref(
                &self,
                buf: &mut <DB as sqlx::Database>::ArgumentBuffer,
            ) -> Result<sqlx::encode::IsNull, sqlx::error::BoxDynError> {
                <i64 as sqlx::Encode<'q, DB>>::encode_by_ref(&self.0, buf)
            }

            fn produces(&self) -> Option<DB::TypeInfo> {
                <i64 as sqlx::Encode<'q, DB>>::produces(&self.0)
            }

            fn size_hint(&self) -> usize {
                <i64 as sqlx::Encode<'q, DB>>::size_hint(&self.0)
            }
        }

        impl<'r, DB: sqlx::Database> sqlx::Decode<'r, DB> for $ty
        where
            i64: sqlx::Decode<'r, DB>,
        {
            fn decode(
                value: <DB as sqlx::Database>::ValueRef<'r>,
            ) -> Result<Self, sqlx::error::BoxDynError> {
                <i64 as sqlx::Decode<'r, DB>>::decode(value).map($ty)
            }
        }

        impl sqlx::postgres::PgHasArrayType for $ty {
            fn array_type_info() -> sqlx::postgres::PgTypeInfo {
                <i64 as sqlx::postgres::PgHasArrayType>::array_type_info()
            }
        }
    };
}

sqlx_transparent_i64!(JobId);
sqlx_transparent_i64!(RunLease);

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
