//! Every SQL function the runtime role may EXECUTE enforces the bounds of
//! `awa_core::bounds`: called as the runtime role with each bounded
//! argument at its limits it works (in a transaction that is rolled back),
//! and just outside them it is refused with the expected SQLSTATE and a
//! hint, changing nothing (a fingerprint of every row and sequence of both
//! substrates, before and after).
//!
//! The functions are enumerated from the catalog (`has_function_privilege`
//! for the role on schemas `awa` and `side`), so a new runtime function
//! without a row in `MATRIX` fails this test: give it its out-of-range
//! calls, or say why it takes no bounded argument.
//!
//! The reported instance: `SELECT awa.rescue_stale(interval '0 s', 1000)`
//! while healthy jobs ran made them all retryable.

use crate::common::fingerprint;
use awa_core::bounds::{
    self, CLAIM_BATCH, LIST_LIMIT, MAINT_LIMIT, PRIORITY, PRIORITY_AGING_STORED,
    PRUNE_LOCK_TIMEOUT, RESCUE_AFTER, ROTATE_INTERVAL,
};
use awa_core::{NewJob, QueueName, SchemaName};
use awa_exec::{ExecPlane, Frontier, PgExecPlane};
use awa_ready::{PgReadyPlane, ReadyPlane};
use sqlx::postgres::PgConnectOptions;
use sqlx::{ConnectOptions, Connection, PgConnection};
use std::collections::BTreeMap;
use std::str::FromStr;
use std::time::Duration;

/// What a function's row says.
enum Row {
    /// Calls at the bounds, which must work, and calls outside them, which
    /// must be refused with a SQLSTATE. Arguments are SQL text in which
    /// `{s}` is the substrate, `{q}`, `{l}`, `{c}` its queue, lease and
    /// claim slot counts.
    Bounded {
        ok: Vec<String>,
        refused: Vec<(String, &'static str)>,
    },
    /// No argument has a bound (an id that may name nothing, no argument at
    /// all, a pure formatter): why.
    Unbounded(&'static str),
}

/// An interval literal of exactly `d` (PostgreSQL keeps microseconds).
fn iv(d: Duration) -> String {
    format!(
        "make_interval(secs => {}::double precision / 1000000)",
        d.as_micros()
    )
}

const MICRO: Duration = Duration::from_micros(1);

fn ok_and_refused(ok: &[&str], refused: &[(&str, &'static str)]) -> Row {
    Row::Bounded {
        ok: ok.iter().map(|s| s.to_string()).collect(),
        refused: refused.iter().map(|(a, c)| (a.to_string(), *c)).collect(),
    }
}

/// Out-of-range values of a count bound: min - 1, max + 1 and NULL.
fn counts(b: bounds::CountBound, call: impl Fn(&str) -> String) -> Vec<(String, &'static str)> {
    vec![
        (call(&(b.min - 1).to_string()), "22023"),
        (call(&(b.max + 1).to_string()), "22023"),
        (call("NULL"), "22023"),
    ]
}

/// Out-of-range values of a duration bound: zero, negative, min - 1 us,
/// max + 1 us (and NULL when `null_refused`).
fn durations(
    b: bounds::DurationBound,
    null_refused: bool,
    call: impl Fn(&str) -> String,
) -> Vec<(String, &'static str)> {
    let mut out = vec![
        (call("interval '0 s'"), "22023"),
        (call("interval '-1 day'"), "22023"),
        (call(&iv(b.max + MICRO)), "22023"),
    ];
    if b.min > Duration::ZERO {
        out.push((call(&iv(b.min - MICRO)), "22023"));
    }
    if null_refused {
        out.push((call("NULL"), "22023"));
    }
    out
}

/// Slots and rings out of range for a function of (ring, slot): an
/// unknown ring, NULL, slot -1 and slot = the ring's count.
fn slots(call: impl Fn(&str, &str) -> String) -> Vec<(String, &'static str)> {
    vec![
        (call("'nope'", "0"), "22023"),
        (call("NULL", "0"), "22023"),
        (call("'queue'", "-1"), "22023"),
        (call("'queue'", "{q}"), "22023"),
        (call("'lease'", "{l}"), "22023"),
        (call("'claim'", "{c}"), "22023"),
        (call("'claim'", "NULL"), "22023"),
    ]
}

fn queue_slots(call: impl Fn(&str) -> String) -> Vec<(String, &'static str)> {
    vec![
        (call("-1"), "22023"),
        (call("{q}"), "22023"),
        (call("NULL"), "22023"),
    ]
}

/// Arrays of one job for enqueue / enqueue_local, with one field replaced.
fn enqueue_args(queue: &str, priority: &str, max_attempts: &str) -> String {
    enqueue_at(queue, priority, max_attempts, "NULL")
}

/// The same with a run_at (SQL text of a timestamptz).
fn enqueue_at(queue: &str, priority: &str, max_attempts: &str, run_at: &str) -> String {
    format!(
        "ARRAY[{queue}]::text[], ARRAY['k'], ARRAY['{{}}'::jsonb], ARRAY[{priority}]::smallint[], \
         ARRAY[{run_at}]::timestamptz[], ARRAY[{max_attempts}]::integer[], ARRAY[NULL::text], ARRAY[NULL::jsonb]"
    )
}

/// Times just inside awa_core::time::WRITABLE, and outside it: infinite,
/// a microsecond past either end, the extremes PostgreSQL accepts.
const TIMES_OK: &[&str] = &[
    "'1970-01-01 00:00:00+00'",
    "'9999-12-31 23:59:59.999999+00'",
];
const TIMES_REFUSED: &[&str] = &[
    "'infinity'",
    "'-infinity'",
    "'10000-01-01 00:00:00+00'",
    "'1969-12-31 23:59:59.999999+00'",
    "'294276-12-31 23:59:59.999999+00'",
    "'4714-11-24 00:00:00+00 BC'",
];

/// Arrays of one job for ready_append, with fields replaced.
fn append_args(id: &str, priority: &str, attempt: &str, max: &str, lease: &str) -> String {
    append_created(id, priority, attempt, max, lease, "now()")
}

/// The same with a created_at (SQL text of a timestamptz).
fn append_created(
    id: &str,
    priority: &str,
    attempt: &str,
    max: &str,
    lease: &str,
    created: &str,
) -> String {
    format!(
        "ARRAY[{id}]::bigint[], ARRAY['q'], ARRAY[{priority}]::smallint[], ARRAY['k'], \
         ARRAY['{{}}'::jsonb], ARRAY[{attempt}]::integer[], ARRAY[{max}]::integer[], \
         ARRAY[{lease}]::bigint[], ARRAY[{created}]::timestamptz[], ARRAY[NULL::text], ARRAY[NULL::jsonb]"
    )
}

/// Arrays of one job for deferred_schedule, with fields replaced.
fn schedule_args(priority: &str, max: &str, run_at: &str) -> String {
    format!(
        "ARRAY[999999]::bigint[], ARRAY['q'], ARRAY[{priority}]::smallint[], ARRAY['k'], \
         ARRAY['{{}}'::jsonb], ARRAY[{max}]::integer[], ARRAY[{run_at}]::timestamptz[], \
         ARRAY[NULL::text], ARRAY[NULL::jsonb]"
    )
}

/// Arrays of one attempt for finish / finish_pass (a token that names
/// nothing, so an accepted call changes nothing either).
fn finish_args(outcome: &str, delay: &str, error: &str) -> String {
    format!(
        "ARRAY[999999]::bigint[], ARRAY[1]::bigint[], ARRAY[0], ARRAY[999999]::bigint[], ARRAY[1], \
         ARRAY[{outcome}]::text[], ARRAY[{delay}]::interval[], ARRAY[{error}]::text[]"
    )
}

fn text_of(bytes: usize) -> String {
    format!("repeat('x', {bytes})")
}

/// The specification: every runtime function, by name.
fn matrix() -> BTreeMap<&'static str, Row> {
    let mut m = BTreeMap::new();
    let error_max = bounds::MAX_ERROR_BYTES;
    let delay_max = bounds::MAX_HANDLER_DELAY;

    // Ready plane.
    for f in ["enqueue", "enqueue_local"] {
        let call = |args: String| args;
        m.insert(
            f,
            Row::Bounded {
                ok: vec![
                    call(enqueue_args("'q'", &PRIORITY.min.to_string(), "1")),
                    call(enqueue_args("'q'", &PRIORITY.max.to_string(), "1000")),
                    call(enqueue_at("'q'", "2", "NULL", TIMES_OK[0])),
                    call(enqueue_at("'q'", "2", "NULL", TIMES_OK[1])),
                ],
                // The producer contract's SQLSTATEs (docs/sql-producer.md).
                refused: vec![
                    (
                        enqueue_args("'q'", &(PRIORITY.min - 1).to_string(), "NULL"),
                        "23514",
                    ),
                    (
                        enqueue_args("'q'", &(PRIORITY.max + 1).to_string(), "NULL"),
                        "23514",
                    ),
                    (enqueue_args("'q'", "NULL", "NULL"), "23502"),
                    (
                        enqueue_args("'q'", "2", &(bounds::MAX_ATTEMPTS.min - 1).to_string()),
                        "23514",
                    ),
                    (
                        enqueue_args("'q'", "2", &(bounds::MAX_ATTEMPTS.max + 1).to_string()),
                        "23514",
                    ),
                    (enqueue_args("NULL", "2", "NULL"), "23502"),
                    (enqueue_at("'q'", "2", "NULL", "'infinity'"), "23514"),
                    (enqueue_at("'q'", "2", "NULL", "'-infinity'"), "23514"),
                    (
                        enqueue_at("'q'", "2", "NULL", "'10000-01-01 00:00:00+00'"),
                        "23514",
                    ),
                    (
                        enqueue_at("'q'", "2", "NULL", "'1969-12-31 23:59:59.999999+00'"),
                        "23514",
                    ),
                    (
                        enqueue_at("'q'", "2", "NULL", "'294276-12-31 23:59:59.999999+00'"),
                        "23514",
                    ),
                    (
                        enqueue_at("'q'", "2", "NULL", "'4714-11-24 00:00:00+00 BC'"),
                        "23514",
                    ),
                    (
                        "ARRAY['q', 'q'], ARRAY['k'], ARRAY['{}'::jsonb], ARRAY[2]::smallint[], \
                         ARRAY[NULL::timestamptz], ARRAY[NULL::integer], ARRAY[NULL::text], \
                         ARRAY[NULL::jsonb]"
                            .into(),
                        "22023",
                    ),
                ],
            },
        );
    }
    // The public producer's optional trace context (one per call).
    if let Some(Row::Bounded { ok, refused }) = m.get_mut("enqueue") {
        let with = |tp: &str, ts: &str| {
            format!(
                "{}, NULL, {tp}, {ts}",
                enqueue_args("'q'", &PRIORITY.min.to_string(), "1")
            )
        };
        let tp = "'00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01'";
        ok.push(with(tp, "NULL"));
        ok.push(with(tp, "''"));
        ok.push(with(tp, &text_of(512)));
        ok.push(format!(
            "{}, p_traceparent => {tp}",
            enqueue_args("'q'", "2", "NULL")
        ));
        for bad in [
            "'01-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01'",
            "'00-0AF7651916CD43DD8448EB211C80319C-b7ad6b7169203331-01'",
            "'00-00000000000000000000000000000000-b7ad6b7169203331-01'",
            "'00-0af7651916cd43dd8448eb211c80319c-0000000000000000-01'",
            "'00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331'",
            "''",
        ] {
            refused.push((with(bad, "NULL"), "22023"));
        }
        refused.push((with(tp, &text_of(513)), "22023"));
        refused.push((with("NULL", "'k=v'"), "22023"));
    }
    m.insert(
        "ready_append",
        Row::Bounded {
            ok: vec![
                append_args("999991", "1", "0", "1", "0"),
                append_args("999992", "4", "0", "1000", "0"),
                append_created("999994", "2", "0", "1", "0", TIMES_OK[0]),
                append_created("999995", "2", "0", "1", "0", TIMES_OK[1]),
            ],
            refused: vec![
                (append_args("999993", "0", "0", "1", "0"), "22023"),
                (append_args("999993", "5", "0", "1", "0"), "22023"),
                (append_args("999993", "NULL", "0", "1", "0"), "22023"),
                (append_args("999993", "2", "0", "0", "0"), "22023"),
                (append_args("999993", "2", "0", "1001", "0"), "22023"),
                (append_args("999993", "2", "-1", "1", "0"), "22023"),
                (append_args("999993", "2", "0", "1", "-1"), "22023"),
                (append_args("NULL", "2", "0", "1", "0"), "22023"),
                (
                    append_created("999993", "2", "0", "1", "0", "NULL"),
                    "22023",
                ),
                (
                    append_created("999993", "2", "0", "1", "0", TIMES_REFUSED[0]),
                    "22023",
                ),
                (
                    append_created("999993", "2", "0", "1", "0", TIMES_REFUSED[1]),
                    "22023",
                ),
                (
                    append_created("999993", "2", "0", "1", "0", TIMES_REFUSED[2]),
                    "22023",
                ),
                (
                    append_created("999993", "2", "0", "1", "0", TIMES_REFUSED[3]),
                    "22023",
                ),
                (
                    append_created("999993", "2", "0", "1", "0", TIMES_REFUSED[4]),
                    "22023",
                ),
                (
                    append_created("999993", "2", "0", "1", "0", TIMES_REFUSED[5]),
                    "22023",
                ),
                (
                    "ARRAY[1, 2]::bigint[], ARRAY['q'], ARRAY[2]::smallint[], ARRAY['k'], \
                     ARRAY['{}'::jsonb], ARRAY[0], ARRAY[1], ARRAY[0]::bigint[], ARRAY[now()], \
                     ARRAY[NULL::text], ARRAY[NULL::jsonb]"
                        .into(),
                    "22023",
                ),
            ],
        },
    );
    let take = |limit: &str, aging: &str| format!("'q', {limit}, NULL, NULL, {aging}");
    let mut take_refused = counts(CLAIM_BATCH, |l| take(l, "NULL"));
    take_refused.extend(durations(PRIORITY_AGING_STORED, false, |a| take("1", a)));
    m.insert(
        "ready_take",
        Row::Bounded {
            ok: vec![
                take(&CLAIM_BATCH.min.to_string(), "NULL"),
                take(&CLAIM_BATCH.max.to_string(), &iv(PRIORITY_AGING_STORED.min)),
                take("1", &iv(PRIORITY_AGING_STORED.max)),
            ],
            refused: take_refused,
        },
    );
    // The halves of a take (ready_take calls them in turn) have its bounds.
    // ready_take_locked's lane arguments are what ready_lock returned in
    // the same transaction; made up, they move no more than the runtime
    // role's own UPDATE on lane_heads could. Here: no lane, nothing read.
    let mut lock_refused = counts(CLAIM_BATCH, |l| take(l, "NULL"));
    lock_refused.extend(durations(PRIORITY_AGING_STORED, false, |a| take("1", a)));
    m.insert(
        "ready_lock",
        Row::Bounded {
            ok: vec![
                take(&CLAIM_BATCH.min.to_string(), "NULL"),
                take(&CLAIM_BATCH.max.to_string(), &iv(PRIORITY_AGING_STORED.min)),
            ],
            refused: lock_refused,
        },
    );
    let locked = |limit: &str, aging: &str| {
        format!(
            "'q', {limit}, {aging}, 0, NULL, 0, 0, 1, 0, 0, '{{}}'::smallint[], \
             '{{}}'::smallint[], '{{}}'::bigint[], '{{}}'::bigint[]"
        )
    };
    let mut locked_refused = counts(CLAIM_BATCH, |l| locked(l, "NULL"));
    locked_refused.extend(durations(PRIORITY_AGING_STORED, false, |a| locked("1", a)));
    m.insert(
        "ready_take_locked",
        Row::Bounded {
            ok: vec![
                locked(&CLAIM_BATCH.min.to_string(), "NULL"),
                locked(&CLAIM_BATCH.max.to_string(), &iv(PRIORITY_AGING_STORED.max)),
            ],
            refused: locked_refused,
        },
    );
    m.insert(
        "ready_lift",
        Row::Unbounded(
            "reads the ledger, the seal and the lanes itself and moves a low_gen only past \
             generations it finds empty past the head: its arguments name lanes, nothing more",
        ),
    );
    m.insert(
        "unique_take",
        ok_and_refused(
            &["ARRAY['sql-bounds-key'], ARRAY[999999]::bigint[]"],
            &[("ARRAY['a', 'b'], ARRAY[999999]::bigint[]", "22023")],
        ),
    );
    m.insert(
        "enqueue_oversized",
        Row::Bounded {
            // Its only job is to refuse: every call raises.
            ok: vec![],
            refused: vec![("1, 'q', 'k', 2000000, 1048576".into(), "54000")],
        },
    );
    m.insert(
        "ready_slot_live",
        Row::Bounded {
            ok: vec!["0".into(), "{q} - 1".into()],
            refused: queue_slots(|s| s.to_string()),
        },
    );
    let relocate = |slot: &str, limit: &str| format!("{slot}, {limit}");
    let mut relocate_refused = queue_slots(|s| relocate(s, "1"));
    relocate_refused.extend(counts(MAINT_LIMIT, |l| relocate("1", l)));
    m.insert(
        "ready_relocate",
        Row::Bounded {
            ok: vec![
                relocate("1", &MAINT_LIMIT.min.to_string()),
                relocate("{q} - 1", &MAINT_LIMIT.max.to_string()),
            ],
            refused: relocate_refused,
        },
    );
    m.insert(
        "ready_tombstone",
        Row::Unbounded("a job id: one that names no waiting job cancels nothing"),
    );
    m.insert(
        "ready_seal",
        Row::Unbounded("no arguments: moves the queue ring's seal, proven from the catalog"),
    );

    // Deferred plane.
    m.insert(
        "deferred_schedule",
        Row::Bounded {
            ok: vec![
                schedule_args("1", "1", "now() + interval '1 hour'"),
                schedule_args("4", "1000", "now() + interval '1 hour'"),
                schedule_args("2", "1", TIMES_OK[1]),
            ],
            refused: vec![
                (schedule_args("0", "1", "now()"), "22023"),
                (schedule_args("5", "1", "now()"), "22023"),
                (schedule_args("2", "0", "now()"), "22023"),
                (schedule_args("2", "1001", "now()"), "22023"),
                (schedule_args("2", "1", "NULL"), "22023"),
                (schedule_args("2", "1", TIMES_REFUSED[0]), "22023"),
                (schedule_args("2", "1", TIMES_REFUSED[1]), "22023"),
                (schedule_args("2", "1", TIMES_REFUSED[2]), "22023"),
                (schedule_args("2", "1", TIMES_REFUSED[3]), "22023"),
                (schedule_args("2", "1", TIMES_REFUSED[4]), "22023"),
                (schedule_args("2", "1", TIMES_REFUSED[5]), "22023"),
                (
                    "ARRAY[1]::bigint[], ARRAY['q', 'q'], ARRAY[2]::smallint[], ARRAY['k'], \
                     ARRAY['{}'::jsonb], ARRAY[1], ARRAY[now()], ARRAY[NULL::text], ARRAY[NULL::jsonb]"
                        .into(),
                    "22023",
                ),
            ],
        },
    );
    m.insert(
        "deferred_promote",
        Row::Bounded {
            ok: vec![MAINT_LIMIT.min.to_string(), MAINT_LIMIT.max.to_string()],
            refused: counts(MAINT_LIMIT, |l| l.to_string()),
        },
    );

    // Execution plane.
    let claim = |limit: &str| format!("'q', {limit}, NULL, NULL, NULL");
    m.insert(
        "claim",
        Row::Bounded {
            ok: vec![
                claim(&CLAIM_BATCH.min.to_string()),
                claim(&CLAIM_BATCH.max.to_string()),
            ],
            refused: counts(CLAIM_BATCH, claim),
        },
    );
    m.insert(
        "limit_take",
        Row::Bounded {
            ok: vec![
                claim(&CLAIM_BATCH.min.to_string()),
                claim(&CLAIM_BATCH.max.to_string()),
            ],
            refused: counts(CLAIM_BATCH, claim),
        },
    );
    // A queue, an instant, a batch and its rows: it writes only the shares
    // and rate entries of the limits configured for the jobs it is given;
    // the instant is bounded like every time the runtime role writes.
    let record = |at: &str| format!("'q', {at}, 0, 1, '[]'");
    let mut record_refused: Vec<(String, &'static str)> =
        TIMES_REFUSED.iter().map(|t| (record(t), "22023")).collect();
    record_refused.push((record("NULL"), "22023"));
    m.insert(
        "limit_record",
        Row::Bounded {
            ok: vec![record("now()"), record(TIMES_OK[0]), record(TIMES_OK[1])],
            refused: record_refused,
        },
    );
    for f in ["finish", "finish_pass"] {
        m.insert(
            f,
            Row::Bounded {
                ok: vec![
                    finish_args("'retry'", &iv(Duration::ZERO), "NULL"),
                    finish_args("'snooze'", &iv(delay_max), &text_of(error_max)),
                    finish_args("'fail'", "NULL", &text_of(error_max)),
                ],
                refused: vec![
                    (
                        finish_args("'retry'", &iv(delay_max + MICRO), "NULL"),
                        "22023",
                    ),
                    (
                        finish_args("'retry'", "interval '-1 second'", "NULL"),
                        "22023",
                    ),
                    (
                        finish_args("'fail'", "NULL", &text_of(error_max + 1)),
                        "22023",
                    ),
                    (finish_args("'nope'", "NULL", "NULL"), "22023"),
                    (finish_args("NULL", "NULL", "NULL"), "22023"),
                    (
                        "ARRAY[1, 2]::bigint[], ARRAY[1]::bigint[], ARRAY[0], ARRAY[1]::bigint[], \
                         ARRAY[1], ARRAY['complete'], ARRAY[NULL::interval], ARRAY[NULL::text]"
                            .into(),
                        "22023",
                    ),
                ],
            },
        );
    }
    let beat = |percent: &str, message: &str| {
        format!("999999, 1, 0, 999999, 1, {percent}::smallint, {message}, NULL")
    };
    m.insert(
        "heartbeat",
        Row::Bounded {
            ok: vec![beat("0", "NULL"), beat("100", &text_of(error_max))],
            refused: vec![
                (beat("-1", "NULL"), "22023"),
                (beat("101", "NULL"), "22023"),
                (beat("50", &text_of(error_max + 1)), "22023"),
            ],
        },
    );
    m.insert(
        "cancel_job",
        Row::Unbounded("a job id: one that names no unfinished job cancels nothing"),
    );
    m.insert(
        "exec_slot_live",
        Row::Bounded {
            ok: vec![
                "'queue', 0".into(),
                "'lease', {l} - 1".into(),
                "'claim', {c} - 1".into(),
            ],
            refused: slots(|r, s| format!("{r}, {s}")),
        },
    );
    let rescue = |stale: &str, limit: &str| format!("{stale}, {limit}");
    let mut rescue_refused = durations(RESCUE_AFTER, true, |d| rescue(d, "1000"));
    rescue_refused.extend(counts(MAINT_LIMIT, |l| rescue(&iv(RESCUE_AFTER.max), l)));
    m.insert(
        "rescue_stale",
        Row::Bounded {
            ok: vec![
                rescue(&iv(RESCUE_AFTER.min), &MAINT_LIMIT.min.to_string()),
                rescue(&iv(RESCUE_AFTER.max), &MAINT_LIMIT.max.to_string()),
            ],
            refused: rescue_refused,
        },
    );
    let park = |ring: &str, slot: &str, limit: &str| format!("{ring}, {slot}, {limit}");
    let mut park_refused = slots(|r, s| park(r, s, "1"));
    park_refused.extend(counts(MAINT_LIMIT, |l| park("'claim'", "1", l)));
    m.insert(
        "exec_park",
        Row::Bounded {
            ok: vec![
                park("'claim'", "1", &MAINT_LIMIT.min.to_string()),
                park("'queue'", "{q} - 1", &MAINT_LIMIT.max.to_string()),
            ],
            refused: park_refused,
        },
    );

    m.insert(
        "claim_floor_advance",
        Row::Unbounded(
            "no arguments: moves the claim floor to what it proves closed, nothing else",
        ),
    );

    // DLQ.
    m.insert(
        "dlq_retry",
        ok_and_refused(
            &["999999, NULL, false", "NULL, NULL, true", "NULL, 'q', true"],
            &[
                ("999999, NULL, true", "22023"),
                ("NULL, NULL, false", "22023"),
                ("NULL, NULL, NULL", "22023"),
                ("999999, 'q', false", "22023"),
            ],
        ),
    );

    // History.
    m.insert("routed_jobs", Row::Unbounded("no arguments: a read"));
    m.insert(
        "terminal_job",
        Row::Unbounded("a job id: a read that finds nothing for an id that names nothing"),
    );
    let page = |limit: &str| format!("NULL, NULL, NULL, NULL, NULL, {limit}");
    m.insert(
        "jobs_page",
        Row::Bounded {
            ok: vec![
                page(&LIST_LIMIT.min.to_string()),
                page(&LIST_LIMIT.max.to_string()),
            ],
            refused: counts(LIST_LIMIT, page),
        },
    );
    m.insert(
        "job_body",
        Row::Unbounded("a pure formatter of a job's body: no bound, no write"),
    );
    m.insert(
        "failure_retry",
        Row::Unbounded("job ids: one that names no kept failure retries nothing"),
    );
    m.insert(
        "claim_batch_whole",
        Row::Unbounded("a read of one claim batch by its primary key, writes nothing"),
    );
    m.insert(
        "attempt_push",
        Row::Unbounded(
            "a pure function: returns the records with one more (the latest 25 kept), writes \
             nothing; finish passes it an error already bounded",
        ),
    );
    // Uniqueness: pure functions of their arguments, nothing written; a
    // malformed spec is refused (unique_specs.rs).
    m.insert(
        "unique_derive",
        Row::Unbounded("a pure function: derives a key from a spec, writes nothing"),
    );
    m.insert(
        "unique_held",
        Row::Unbounded("a pure predicate over a key row's hold, writes nothing"),
    );
    m.insert(
        "history_retire_slot",
        Row::Bounded {
            ok: vec!["1".into(), "{q} - 1".into()],
            refused: queue_slots(|s| s.to_string()),
        },
    );

    // Rings.
    for f in [
        "ring_slot_empty",
        "ring_slot_live",
        "ring_slot_sealed_at",
        "ring_slot_fresh",
    ] {
        m.insert(
            f,
            Row::Bounded {
                ok: vec![
                    "'queue', 0".into(),
                    "'lease', {l} - 1".into(),
                    "'claim', {c} - 1".into(),
                ],
                refused: slots(|r, s| format!("{r}, {s}")),
            },
        );
    }
    for f in ["ring_families", "ring_slot_count"] {
        m.insert(
            f,
            ok_and_refused(
                &["'queue'", "'lease'", "'claim'"],
                &[("'nope'", "22023"), ("NULL", "22023")],
            ),
        );
    }
    m.insert(
        "ring_rotate",
        ok_and_refused(
            &["'claim', 'sql-bounds'"],
            &[("'nope', 'x'", "22023"), ("NULL, 'x'", "22023")],
        ),
    );
    let prune = |ring: &str, lock: &str, rotate: &str| format!("{ring}, {lock}, {rotate}");
    let ms = |d: Duration| d.as_millis().to_string();
    let mut prune_refused = vec![
        (prune("'nope'", "200", &iv(ROTATE_INTERVAL.min)), "22023"),
        (prune("'queue'", "0", &iv(ROTATE_INTERVAL.min)), "22023"),
        (
            prune(
                "'queue'",
                &(PRUNE_LOCK_TIMEOUT.max.as_millis() + 1).to_string(),
                &iv(ROTATE_INTERVAL.min),
            ),
            "22023",
        ),
        (prune("'queue'", "NULL", &iv(ROTATE_INTERVAL.min)), "22023"),
    ];
    prune_refused.extend(durations(ROTATE_INTERVAL, true, |d| {
        prune("'queue'", "200", d)
    }));
    m.insert(
        "ring_prune",
        Row::Bounded {
            ok: vec![
                prune(
                    "'claim'",
                    &ms(PRUNE_LOCK_TIMEOUT.min),
                    &iv(ROTATE_INTERVAL.min),
                ),
                prune(
                    "'queue'",
                    &ms(PRUNE_LOCK_TIMEOUT.max),
                    &iv(ROTATE_INTERVAL.max),
                ),
            ],
            refused: prune_refused,
        },
    );
    let transfer = |from: &str, limit: &str| format!("{from}, {limit}");
    let mut transfer_refused = counts(MAINT_LIMIT, |l| transfer("'{other}'", l));
    transfer_refused.extend([
        (transfer("'{s}'", "1"), "22023"),
        (transfer("NULL", "1"), "22023"),
        (transfer("'nosuch'", "1"), "3F000"),
    ]);
    m.insert(
        "storage_transfer_in",
        Row::Bounded {
            ok: vec![
                transfer("'{other}'", &MAINT_LIMIT.min.to_string()),
                transfer("'{other}'", &MAINT_LIMIT.max.to_string()),
            ],
            refused: transfer_refused,
        },
    );
    m
}

fn ident(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}

/// Slot counts of substrate `schema`: (queue, lease, claim).
async fn slot_counts(admin: &mut PgConnection, schema: &str) -> (i32, i32, i32) {
    sqlx::query_as(sqlx::AssertSqlSafe(format!(
        "SELECT queue_slot_count, lease_slot_count, claim_slot_count FROM {}.substrate_info",
        ident(schema)
    )))
    .fetch_one(admin)
    .await
    .unwrap()
}

#[tokio::test]
async fn every_runtime_function_refuses_arguments_out_of_bounds() {
    let db = awa_maint::migrated_test_db().await.unwrap();
    let mut admin = PgConnection::connect(db.url()).await.unwrap();
    awa_maint::substrate::prepare(
        &mut admin,
        &awa_core::SubstrateShape {
            schema: SchemaName::new("side").unwrap(),
            slots: awa_core::SlotCounts::new(4, 4, 4).unwrap(),
        },
        false,
    )
    .await
    .unwrap();
    let role = format!("{}_rt", db.name());
    sqlx::raw_sql(sqlx::AssertSqlSafe(format!(
        "CREATE ROLE {role} LOGIN PASSWORD 'runtime'"
    )))
    .execute(&mut admin)
    .await
    .unwrap();
    for schema in ["awa", "side"] {
        awa_maint::substrate::grant_runtime_role(
            &mut admin,
            &role,
            &SchemaName::new(schema).unwrap(),
        )
        .await
        .unwrap();
    }
    let mut rt = PgConnectOptions::from_str(db.url())
        .unwrap()
        .username(&role)
        .password("runtime")
        .connect()
        .await
        .unwrap();

    // Work in every state a bad call could damage: waiting jobs, running
    // ones (with a heartbeat), a scheduled one, in both substrates.
    let q = QueueName::new("q").unwrap();
    for schema in ["awa", "side"] {
        let schema = SchemaName::new(schema).unwrap();
        let mut later = NewJob::new(q.clone(), "k", serde_json::json!({}));
        later.run_at = Some(chrono::Utc::now() + chrono::Duration::hours(1));
        let mut jobs: Vec<NewJob> = (0..8)
            .map(|i| NewJob::new(q.clone(), "k", serde_json::json!({ "i": i })))
            .collect();
        jobs.push(later);
        PgReadyPlane::new(schema.clone())
            .enqueue(&mut rt, &jobs)
            .await
            .unwrap();
        let exec = PgExecPlane::new(schema.clone());
        let mut frontier = Frontier::default();
        let mut running = Vec::new();
        for _ in 0..200 {
            running.extend(
                exec.claim(&mut rt, &q, 4, &mut frontier, None)
                    .await
                    .unwrap(),
            );
            if running.len() >= 4 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        assert_eq!(running.len(), 4);
        assert!(
            exec.heartbeat(&mut rt, &running[0].token, &Default::default())
                .await
                .unwrap()
        );
    }

    let functions: Vec<(String, String)> = sqlx::query_as(
        "SELECT DISTINCT n.nspname::text, p.proname::text
           FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
          WHERE n.nspname IN ('awa', 'side') AND has_function_privilege($1, p.oid, 'EXECUTE')
          ORDER BY 1, 2",
    )
    .bind(&role)
    .fetch_all(&mut admin)
    .await
    .unwrap();
    assert!(
        functions.iter().any(|(_, f)| f == "rescue_stale")
            && functions.iter().any(|(s, _)| s == "side"),
        "{functions:?}"
    );
    let matrix = matrix();
    let mut failures = Vec::new();
    for (name, row) in &matrix {
        match row {
            Row::Unbounded(why) if why.trim().is_empty() => {
                failures.push(format!("{name}: say why it has no bounded argument"))
            }
            Row::Bounded { refused, .. } if refused.is_empty() => {
                failures.push(format!("{name}: a bounded row needs out-of-range calls"))
            }
            _ => {}
        }
    }
    let unlisted: Vec<_> = functions
        .iter()
        .filter(|(_, f)| !matrix.contains_key(f.as_str()))
        .map(|(s, f)| format!("{s}.{f}"))
        .collect();
    if !unlisted.is_empty() {
        failures.push(format!(
            "runtime functions without a row in MATRIX (give each its out-of-range calls, \
             or say why it has no bounded argument): {unlisted:?}"
        ));
    }
    let both = ["awa", "side"];
    let mut refusals = 0;
    for (schema, function) in &functions {
        let Some(Row::Bounded { ok, refused }) = matrix.get(function.as_str()) else {
            continue;
        };
        let other = if schema == "awa" { "side" } else { "awa" };
        let (q, l, c) = slot_counts(&mut admin, schema).await;
        let call = |args: &str| {
            let args = args
                .replace("{s}", schema)
                .replace("{other}", other)
                .replace("{q}", &q.to_string())
                .replace("{l}", &l.to_string())
                .replace("{c}", &c.to_string());
            format!(
                "SELECT * FROM {}.{}({args})",
                ident(schema),
                ident(function)
            )
        };
        for args in ok {
            let sql = call(args);
            let mut tx = rt.begin().await.unwrap();
            let result = sqlx::raw_sql(sqlx::AssertSqlSafe(sql.clone()))
                .execute(&mut *tx)
                .await;
            tx.rollback().await.unwrap();
            if let Err(err) = result {
                failures.push(format!("{sql}: at the bound, refused: {err}"));
            }
        }
        let before = fingerprint(&mut admin, &both).await;
        for (args, code) in refused {
            let sql = call(args);
            match sqlx::raw_sql(sqlx::AssertSqlSafe(sql.clone()))
                .execute(&mut rt)
                .await
            {
                Ok(_) => failures.push(format!("{sql}: accepted, want SQLSTATE {code}")),
                Err(err) => {
                    let db_err = err.as_database_error();
                    let got = db_err.and_then(|e| e.code()).map(|c| c.into_owned());
                    let hint = db_err
                        .and_then(|e| e.try_downcast_ref::<sqlx::postgres::PgDatabaseError>())
                        .and_then(|e| e.hint())
                        .map(str::to_string);
                    if got.as_deref() != Some(*code) {
                        failures.push(format!("{sql}: {err}, want SQLSTATE {code}"));
                    } else if hint.is_none() {
                        failures.push(format!("{sql}: refused without a hint: {err}"));
                    } else {
                        refusals += 1;
                    }
                }
            }
        }
        let after = fingerprint(&mut admin, &both).await;
        if after != before {
            let changed: Vec<_> = after
                .iter()
                .zip(&before)
                .filter(|(a, b)| a != b)
                .map(|(a, _)| a.0.clone())
                .collect();
            failures.push(format!(
                "{schema}.{function}: refused calls changed {changed:?}"
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    assert!(refusals > 150, "only {refusals} refusals checked");
    rt.close().await.unwrap();
    sqlx::raw_sql(sqlx::AssertSqlSafe(format!(
        "DROP OWNED BY {role}; DROP ROLE {role}"
    )))
    .execute(&mut admin)
    .await
    .unwrap();
}
