//! Generated sequences.

use super::{Op, Ring};
use proptest::prelude::*;
use std::ops::Range;

pub fn ring() -> impl Strategy<Value = Ring> {
    prop_oneof![
        3 => Just(Ring::Queue),
        2 => Just(Ring::Claim),
        1 => Just(Ring::Lease),
    ]
}

pub fn op() -> impl Strategy<Value = Op> {
    op_with_late_writers(1)
}

/// Like [`op`], with the late-writer steps weighted `late` each (and
/// cancels and leader passes more frequent when `late` > 1, so a writer's
/// slot more often dies and retires while it is open).
pub fn op_with_late_writers(late: u32) -> impl Strategy<Value = Op> {
    let often = if late > 1 { 3 } else { 1 };
    // Weighted so that slots fill, die and get reclaimed within ~40 steps:
    // work is mostly finished, maintenance runs often.
    prop_oneof![
        6 => (1u8..=3).prop_map(Op::Enqueue),
        5 => (1u8..=4).prop_map(Op::Claim),
        5 => (0u8..8).prop_map(Op::Complete),
        1 => (0u8..8).prop_map(Op::Retry),
        1 => (0u8..8).prop_map(Op::Fail),
        2 * often => (0u8..8).prop_map(Op::Cancel),
        1 => (0u8..8).prop_map(Op::Heartbeat),
        2 => (0u8..8, 2u8..=4).prop_map(|(k, m)| Op::CompleteMany(k, m)),
        1 => (0u8..8, 2u8..=4).prop_map(|(k, m)| Op::FinishMany(k, m)),
        1 => (0u8..8).prop_map(Op::RescueOne),
        1 => (0u8..8).prop_map(Op::FinishStale),
        1 => Just(Op::Promote),
        1 => Just(Op::Rescue),
        3 => ring().prop_map(Op::Rotate),
        4 => ring().prop_map(Op::Prune),
        late => Just(Op::LateWriterBegin),
        late => Just(Op::LateWriterCommit),
        late => Just(Op::LateWriterRollback),
        1 => Just(Op::SnapshotOpen),
        1 => Just(Op::SnapshotClose),
        1 => Just(Op::LeaderCrash),
        1 => ring().prop_map(Op::RacingRotate),
        4 * often => Just(Op::Maintain),
    ]
}

/// A claim batch whose bodies are in two queue slots: jobs appended before
/// and after a rotation, one claim taking both, then (often) one call that
/// completes several of them.
pub fn spanning_batch() -> impl Strategy<Value = Vec<Op>> {
    (1u8..=2, 1u8..=2, 0u8..8, prop::option::of(2u8..=4)).prop_map(|(a, b, k, m)| {
        let mut ops = vec![
            Op::Enqueue(a),
            Op::Rotate(Ring::Queue),
            Op::Enqueue(b),
            Op::Claim(4),
        ];
        ops.extend(m.map(|m| Op::CompleteMany(k, m)));
        ops
    })
}

/// A sequence of `len` steps, each one op or (rarely) a spanning batch;
/// shrinks to fewer and simpler ones.
pub fn ops(len: Range<usize>) -> impl Strategy<Value = Vec<Op>> {
    let step = prop_oneof![
        24 => op().prop_map(|o| vec![o]),
        1 => spanning_batch(),
    ];
    prop::collection::vec(step, len).prop_map(|steps| steps.concat())
}

/// Sequences where late writers are frequent, built around one whose slot
/// has every chance to be sealed and retired while it is open: random ops,
/// `LateWriterBegin`, a few more, two leader passes, the commit, more ops, a
/// final leader pass.
pub fn ops_with_late_writers(len: Range<usize>) -> impl Strategy<Value = Vec<Op>> {
    let part = |n: usize| prop::collection::vec(op_with_late_writers(4), 0..n.max(1));
    let third = len.end / 3;
    (part(third), part(third / 2), part(third)).prop_map(|(before, during, after)| {
        let mut ops = before;
        ops.push(Op::LateWriterBegin);
        ops.extend(during);
        ops.extend([Op::Maintain, Op::Maintain, Op::LateWriterCommit]);
        ops.extend(after);
        ops.push(Op::Maintain);
        ops
    })
}

/// Cases to run: `var` from the environment, else `default`.
pub fn cases_from_env(var: &str, default: u32) -> u32 {
    std::env::var(var)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}
