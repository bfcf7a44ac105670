//! Which substrates a process writes to and reads from: the routing the
//! storage-transition state in the database decides (read and followed by
//! `awa_control::routing`), as plain data the planes can take.

use crate::SchemaName;
use std::fmt;

/// The phase of a storage transition (`awa.storage_transition_state.state`).
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "snake_case")]
pub enum Phase {
    #[default]
    Steady,
    Prepared,
    Mixed,
}

impl Phase {
    pub fn parse(text: &str) -> Option<Self> {
        match text {
            "steady" => Some(Self::Steady),
            "prepared" => Some(Self::Prepared),
            "mixed" => Some(Self::Mixed),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Steady => "steady",
            Self::Prepared => "prepared",
            Self::Mixed => "mixed",
        }
    }
}

impl fmt::Display for Phase {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A routing decision.
///
/// - steady: write `active`; read `active`.
/// - prepared: write `active`; read `active` and `target` (empty unless an
///   aborted move left work there).
/// - mixed: write `target`; read `active` (the old substrate, which only
///   drains) and `target`.
///
/// In every phase the reads also include the substrates still draining
/// (`awa.storage_draining`). `epoch` grows at every change in the database;
/// a fixed routing (an explicit schema) has epoch 0.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Routing {
    pub epoch: i64,
    pub phase: Phase,
    pub active: SchemaName,
    pub target: Option<SchemaName>,
    pub draining: Vec<SchemaName>,
    /// True when this routing was pinned to one substrate by the caller
    /// (`--schema`, `AWA_SCHEMA`, a builder setting), not read from the
    /// database.
    pub fixed: bool,
}

impl Routing {
    /// Everything to and from `schema` only.
    pub fn fixed(schema: SchemaName) -> Self {
        Self {
            epoch: 0,
            phase: Phase::Steady,
            active: schema,
            target: None,
            draining: Vec::new(),
            fixed: true,
        }
    }

    /// Where new work goes.
    pub fn write(&self) -> &SchemaName {
        match (self.phase, &self.target) {
            (Phase::Mixed, Some(target)) => target,
            _ => &self.active,
        }
    }

    /// Every substrate to claim from and maintain, each once: the active
    /// one, the target, then those still draining.
    pub fn reads(&self) -> Vec<SchemaName> {
        let mut out = vec![self.active.clone()];
        if let Some(target) = &self.target {
            out.push(target.clone());
        }
        for d in &self.draining {
            if !out.contains(d) {
                out.push(d.clone());
            }
        }
        out
    }

    /// Whether `schema` is read but no longer (or not yet) written: its
    /// deferred and dead-lettered jobs belong in [`Routing::write`].
    pub fn drains(&self, schema: &SchemaName) -> bool {
        schema != self.write() && self.reads().contains(schema)
    }
}

/// Steady on `awa`, as a fresh database has it (not fixed: a routed
/// client's first hint, replaced by the first read).
impl Default for Routing {
    fn default() -> Self {
        Self {
            epoch: 0,
            phase: Phase::Steady,
            active: SchemaName::default_schema(),
            target: None,
            draining: Vec::new(),
            fixed: false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(name: &str) -> SchemaName {
        SchemaName::new(name).unwrap()
    }

    #[test]
    fn each_phase_routes_as_documented() {
        let mut r = Routing {
            epoch: 3,
            phase: Phase::Steady,
            active: s("awa"),
            target: None,
            draining: vec![s("old")],
            fixed: false,
        };
        assert_eq!(r.write(), &s("awa"));
        assert_eq!(r.reads(), vec![s("awa"), s("old")]);
        assert!(r.drains(&s("old")) && !r.drains(&s("awa")));
        r.phase = Phase::Prepared;
        r.target = Some(s("next"));
        assert_eq!(r.write(), &s("awa"));
        assert_eq!(r.reads(), vec![s("awa"), s("next"), s("old")]);
        r.phase = Phase::Mixed;
        assert_eq!(r.write(), &s("next"));
        assert!(r.drains(&s("awa")) && !r.drains(&s("next")));
        // A draining entry that is also the target is read once.
        r.draining.push(s("next"));
        assert_eq!(r.reads(), vec![s("awa"), s("next"), s("old")]);
        let f = Routing::fixed(s("side"));
        assert_eq!((f.write(), f.reads()), (&s("side"), vec![s("side")]));
    }
}
