//! The shape of a queue-storage substrate: how many slots each ring has.

use crate::{InvalidInput, SchemaName};

/// Ring sizes of one substrate. The same bounds are enforced again by the
/// SQL installer, which is the authority; these exist so the CLI can give
/// the error before opening a connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct SlotCounts {
    pub queue: i32,
    pub lease: i32,
    pub claim: i32,
}

impl SlotCounts {
    /// Fewer than 4 slots leaves no room between the slot being written,
    /// the ones draining and the one being reclaimed; more than 256 only
    /// multiplies catalog entries and planning time.
    pub const MIN: i32 = crate::bounds::SLOT_COUNT.min as i32;
    pub const MAX: i32 = crate::bounds::SLOT_COUNT.max as i32;
    pub const DEFAULT: SlotCounts = SlotCounts {
        queue: 16,
        lease: 8,
        claim: 8,
    };

    pub fn new(queue: i64, lease: i64, claim: i64) -> Result<Self, InvalidInput> {
        let check = |what: &'static str, value: i64| -> Result<i32, InvalidInput> {
            crate::bounds::CountBound {
                what,
                ..crate::bounds::SLOT_COUNT
            }
            .check(value)
            .map(|v| v as i32)
        };
        Ok(Self {
            queue: check("queue slot count", queue)?,
            lease: check("lease slot count", lease)?,
            claim: check("claim slot count", claim)?,
        })
    }
}

impl Default for SlotCounts {
    fn default() -> Self {
        Self::DEFAULT
    }
}

/// A substrate: a schema plus its ring sizes.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct SubstrateShape {
    pub schema: SchemaName,
    pub slots: SlotCounts,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slot_bounds() {
        assert!(SlotCounts::new(0, 8, 8).is_err());
        assert!(SlotCounts::new(1, 8, 8).is_err());
        assert!(SlotCounts::new(100_000, 8, 8).is_err());
        assert!(SlotCounts::new(16, 3, 8).is_err());
        assert_eq!(SlotCounts::new(16, 8, 8).unwrap(), SlotCounts::DEFAULT);
    }
}
