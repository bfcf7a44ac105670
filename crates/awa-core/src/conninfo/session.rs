//! libpq's `target_session_attrs`: which kind of server a session must land
//! on, and the rule that decides it from what the server says about itself.

/// What a new session learned about its server (`pg_is_in_recovery()` and
/// `transaction_read_only`), the two facts libpq decides on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SessionState {
    /// The server is a standby (in hot standby: recovery).
    pub in_recovery: bool,
    /// New transactions are read-only by default (a standby, or a primary
    /// with `default_transaction_read_only = on`).
    pub read_only: bool,
}

/// `target_session_attrs`, as libpq defines it (PostgreSQL 14+).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum TargetSession {
    /// Any server that accepts the connection (the default).
    #[default]
    Any,
    /// A session whose transactions are read-write by default.
    ReadWrite,
    /// The converse of `ReadWrite`.
    ReadOnly,
    /// A server not in hot standby.
    Primary,
    /// A server in hot standby.
    Standby,
    /// A standby if any listed host is one, else any server.
    PreferStandby,
}

impl TargetSession {
    pub const NAMES: [&'static str; 6] = [
        "any",
        "read-write",
        "read-only",
        "primary",
        "standby",
        "prefer-standby",
    ];

    /// The value as libpq spells it, or `None`.
    pub fn parse(value: &str) -> Option<Self> {
        Some(match value {
            "any" => Self::Any,
            "read-write" => Self::ReadWrite,
            "read-only" => Self::ReadOnly,
            "primary" => Self::Primary,
            "standby" => Self::Standby,
            "prefer-standby" => Self::PreferStandby,
            _ => return None,
        })
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Any => "any",
            Self::ReadWrite => "read-write",
            Self::ReadOnly => "read-only",
            Self::Primary => "primary",
            Self::Standby => "standby",
            Self::PreferStandby => "prefer-standby",
        }
    }

    /// Whether a new session must ask its server what it is before it may
    /// be used (everything but `any`).
    pub fn checks(self) -> bool {
        self != Self::Any
    }

    /// How many passes over the host list a connect makes: two for
    /// `prefer-standby` (standbys first, then anything), one otherwise.
    pub fn passes(self) -> usize {
        if self == Self::PreferStandby { 2 } else { 1 }
    }

    /// Whether a session in `state` is acceptable in pass `pass` (0-based)
    /// over the host list.
    pub fn accepts(self, state: SessionState, pass: usize) -> bool {
        match self {
            Self::Any => true,
            Self::ReadWrite => !state.read_only,
            Self::ReadOnly => state.read_only,
            Self::Primary => !state.in_recovery,
            Self::Standby => state.in_recovery,
            Self::PreferStandby => pass > 0 || state.in_recovery,
        }
    }

    /// What a refused session was, for messages ("a standby", ...).
    pub fn refusal(self, state: SessionState) -> &'static str {
        match (state.in_recovery, state.read_only) {
            (true, _) => "the server is a standby (in recovery)",
            (false, true) => "the server is a primary whose sessions are read-only by default",
            (false, false) => "the server is a primary that takes writes",
        }
    }
}

impl std::fmt::Display for TargetSession {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const PRIMARY: SessionState = SessionState {
        in_recovery: false,
        read_only: false,
    };
    const READ_ONLY_PRIMARY: SessionState = SessionState {
        in_recovery: false,
        read_only: true,
    };
    const STANDBY: SessionState = SessionState {
        in_recovery: true,
        read_only: true,
    };

    #[test]
    fn libpq_rules() {
        use TargetSession::*;
        let table = [
            (Any, [true, true, true]),
            (ReadWrite, [true, false, false]),
            (ReadOnly, [false, true, true]),
            (Primary, [true, true, false]),
            (Standby, [false, false, true]),
            (PreferStandby, [false, false, true]),
        ];
        for (target, want) in table {
            let got = [PRIMARY, READ_ONLY_PRIMARY, STANDBY].map(|s| target.accepts(s, 0));
            assert_eq!(got, want, "{target} in the first pass");
        }
        assert!(
            PreferStandby.accepts(PRIMARY, 1),
            "the second pass takes any"
        );
        assert_eq!(PreferStandby.passes(), 2);
        assert_eq!(ReadWrite.passes(), 1);
        for name in TargetSession::NAMES {
            assert_eq!(TargetSession::parse(name).unwrap().as_str(), name);
        }
        assert_eq!(TargetSession::parse("master"), None);
        assert_eq!(TargetSession::parse("READ-WRITE"), None);
    }
}
