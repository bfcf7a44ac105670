//! Periodic jobs against real PostgreSQL, with an injected clock: every
//! tick of several schedules over a simulated week (a daylight-saving
//! change in New York included) fires exactly once; `skip` and `catch_up`
//! after a 3-hour outage; pause, resume and redefinition do not fire the
//! ticks in between; a racing second firer never fires a tick twice; bad
//! input writes nothing.

use awa_control::cron::{self, Missed, Schedule, Ticks};
use awa_core::SchemaName;
use chrono::{DateTime, Duration, TimeZone, Utc};
use std::collections::BTreeMap;

fn utc(y: i32, mo: u32, d: u32, h: u32, mi: u32) -> DateTime<Utc> {
    Utc.with_ymd_and_hms(y, mo, d, h, mi, 0).unwrap()
}

fn schema() -> SchemaName {
    SchemaName::default_schema()
}

/// Put a schedule's fire_from at `at`, as if created then.
async fn created_at(pool: &sqlx::PgPool, name: &str, at: DateTime<Utc>) {
    sqlx::query("UPDATE awa.cron_jobs SET fire_from = $2 WHERE name = $1")
        .bind(name)
        .bind(at)
        .execute(pool)
        .await
        .unwrap();
}

/// The jobs the schedules enqueued: schedule -> ticks (from metadata).
async fn fired_jobs(pool: &sqlx::PgPool) -> BTreeMap<String, Vec<DateTime<Utc>>> {
    let rows: Vec<(String, String)> = sqlx::query_as(
        "SELECT metadata->'awa_cron'->>'schedule', metadata->'awa_cron'->>'tick'
           FROM awa.jobs WHERE metadata ? 'awa_cron' ORDER BY id",
    )
    .fetch_all(pool)
    .await
    .unwrap();
    let mut out: BTreeMap<String, Vec<DateTime<Utc>>> = BTreeMap::new();
    for (name, tick) in rows {
        let tick = DateTime::parse_from_rfc3339(&tick)
            .unwrap()
            .with_timezone(&Utc);
        out.entry(name).or_default().push(tick);
    }
    out
}

#[tokio::test]
async fn every_tick_of_a_simulated_week_fires_exactly_once() {
    let db = awa_maint::migrated_test_db().await.unwrap();
    let pool = db.pool().await.unwrap();
    let start = utc(2026, 3, 5, 0, 0); // the week holds New York's spring forward (March 8)
    let end = start + Duration::days(7);
    let schedules = [
        Schedule::new("every-15-min", "*/15 * * * *", "cron", "tick"),
        Schedule {
            timezone: "America/New_York".into(),
            ..Schedule::new("ny-0230", "30 2 * * *", "cron", "tick")
        },
        Schedule {
            timezone: "America/New_York".into(),
            ..Schedule::new("ny-hourly", "@hourly", "cron", "tick")
        },
        Schedule {
            timezone: "Europe/Berlin".into(),
            ..Schedule::new("berlin-weekdays", "0 9 * * MON-FRI", "cron", "tick")
        },
    ];
    let mut conn = pool.acquire().await.unwrap();
    for s in &schedules {
        assert_eq!(
            cron::upsert(&mut conn, s).await.unwrap(),
            cron::Upserted::Created
        );
        created_at(&pool, &s.name, start).await;
    }
    // The leader passes every 7 minutes of simulated time (slower than
    // the fastest schedule at times: skip still fires each tick once
    // as long as passes come at least once per tick interval; 7 < 15).
    let mut now = start;
    while now <= end {
        awa_maint::cron::fire_due(&pool, &schema(), now)
            .await
            .unwrap();
        now += Duration::minutes(7);
    }
    let fired = fired_jobs(&pool).await;
    for s in &schedules {
        let ticks = Ticks::parse(&s.cron, &s.timezone).unwrap();
        let mut want = Vec::new();
        let mut t = start;
        while let Some(next) = ticks.next_after(t) {
            if next > now - Duration::minutes(7) {
                break;
            }
            want.push(next);
            t = next;
        }
        assert_eq!(
            fired.get(&s.name).cloned().unwrap_or_default(),
            want,
            "{}",
            s.name
        );
    }
    // Counted independently of the library: 4 per hour for 7 days; 02:30
    // in New York once a day (March 8 at 03:00 EDT, the time after the
    // gap); hourly in New York once per hour of real time (the short
    // local day has 23, and the window is 168 real hours); 5 weekday
    // mornings in Berlin.
    assert_eq!(fired["every-15-min"].len(), 7 * 24 * 4);
    assert_eq!(fired["ny-0230"].len(), 7);
    assert!(fired["ny-0230"].contains(&utc(2026, 3, 8, 7, 0)));
    assert_eq!(fired["ny-hourly"].len(), 7 * 24);
    assert_eq!(fired["berlin-weekdays"].len(), 5);
    // Each job names its tick, and the schedule remembers the last one.
    let stored = cron::list(&mut conn, false).await.unwrap();
    let fifteen = stored
        .iter()
        .find(|s| s.schedule.name == "every-15-min")
        .unwrap();
    assert_eq!(fifteen.last_tick, fired["every-15-min"].last().copied());
    assert!(fifteen.last_job_id.is_some());
}

#[tokio::test]
async fn the_fall_back_day_fires_a_repeated_time_once() {
    let db = awa_maint::migrated_test_db().await.unwrap();
    let pool = db.pool().await.unwrap();
    let mut conn = pool.acquire().await.unwrap();
    let s = Schedule {
        timezone: "America/New_York".into(),
        ..Schedule::new("ny-0130", "30 1 * * *", "cron", "tick")
    };
    cron::upsert(&mut conn, &s).await.unwrap();
    let start = utc(2026, 10, 31, 12, 0);
    created_at(&pool, &s.name, start).await;
    let mut now = start;
    while now < utc(2026, 11, 2, 12, 0) {
        awa_maint::cron::fire_due(&pool, &schema(), now)
            .await
            .unwrap();
        now += Duration::minutes(10);
    }
    // November 1: 01:30 EDT (05:30 UTC) fires, 01:30 EST (06:30) does
    // not; November 2 fires at 01:30 EST.
    assert_eq!(
        fired_jobs(&pool).await["ny-0130"],
        vec![utc(2026, 11, 1, 5, 30), utc(2026, 11, 2, 6, 30)]
    );
}

#[tokio::test]
async fn after_a_three_hour_outage_skip_fires_the_latest_tick_and_catch_up_the_latest_n() {
    let db = awa_maint::migrated_test_db().await.unwrap();
    let pool = db.pool().await.unwrap();
    let mut conn = pool.acquire().await.unwrap();
    let start = utc(2026, 6, 1, 0, 0);
    let skip = Schedule::new("skip", "*/10 * * * *", "cron", "tick");
    let catch_up = Schedule {
        missed: Missed::CatchUp { limit: 5 },
        ..Schedule::new("catch-up", "*/10 * * * *", "cron", "tick")
    };
    let all = Schedule {
        missed: Missed::CatchUp { limit: 100 },
        ..Schedule::new("catch-up-all", "*/10 * * * *", "cron", "tick")
    };
    for s in [&skip, &catch_up, &all] {
        cron::upsert(&mut conn, s).await.unwrap();
        created_at(&pool, &s.name, start).await;
    }
    awa_maint::cron::fire_due(&pool, &schema(), start + Duration::minutes(1))
        .await
        .unwrap();
    // Nothing runs from 00:01 to 03:05; the tick at 00:00 is not after
    // the creation time, so nothing fired yet.
    let back = start + Duration::minutes(185);
    let fired = awa_maint::cron::fire_due(&pool, &schema(), back)
        .await
        .unwrap();
    let by: BTreeMap<_, Vec<_>> = fired.iter().fold(BTreeMap::new(), |mut m, f| {
        m.entry(f.schedule.clone())
            .or_insert_with(Vec::new)
            .push(f.tick);
        m
    });
    assert_eq!(by["skip"], vec![utc(2026, 6, 1, 3, 0)]);
    assert_eq!(
        by["catch-up"],
        (0..5)
            .map(|i| utc(2026, 6, 1, 2, 20) + Duration::minutes(10 * i))
            .collect::<Vec<_>>()
    );
    // 00:10 .. 03:00: all 18 missed ticks, oldest first.
    assert_eq!(by["catch-up-all"].len(), 18);
    assert_eq!(by["catch-up-all"][0], utc(2026, 6, 1, 0, 10));
    // A second pass at the same instant fires nothing more.
    assert!(
        awa_maint::cron::fire_due(&pool, &schema(), back)
            .await
            .unwrap()
            .is_empty()
    );
}

#[tokio::test]
async fn pause_resume_and_redefinition_do_not_fire_the_ticks_in_between() {
    let db = awa_maint::migrated_test_db().await.unwrap();
    let pool = db.pool().await.unwrap();
    let mut conn = pool.acquire().await.unwrap();
    let s = Schedule {
        missed: Missed::CatchUp { limit: 1000 },
        ..Schedule::new("report", "* * * * *", "cron", "tick")
    };
    cron::upsert(&mut conn, &s).await.unwrap();
    // Unchanged on a second identical upsert.
    assert_eq!(
        cron::upsert(&mut conn, &s).await.unwrap(),
        cron::Upserted::Unchanged
    );
    assert!(cron::set_enabled(&mut conn, "report", false).await.unwrap());
    let now = Utc::now() + Duration::minutes(30);
    assert!(
        awa_maint::cron::fire_due(&pool, &schema(), now)
            .await
            .unwrap()
            .is_empty()
    );
    assert!(cron::set_enabled(&mut conn, "report", true).await.unwrap());
    // Resumed now: the half hour "ahead" has ticks after the resume only.
    let fired = awa_maint::cron::fire_due(&pool, &schema(), now)
        .await
        .unwrap();
    assert!(fired.len() <= 31, "{}", fired.len());
    assert!(fired.iter().all(|f| f.tick > now - Duration::minutes(31)));
    // Redefining moves fire_from to now: the next pass fires only new ticks.
    let hourly = Schedule {
        cron: "0 * * * *".into(),
        ..s.clone()
    };
    assert_eq!(
        cron::upsert(&mut conn, &hourly).await.unwrap(),
        cron::Upserted::Updated
    );
    let stored = cron::list(&mut conn, false).await.unwrap().remove(0);
    assert!(stored.fire_from > Utc::now() - Duration::minutes(1));
    assert!(!cron::set_enabled(&mut conn, "no-such", true).await.unwrap());
    assert!(cron::remove(&mut conn, "report").await.unwrap());
    assert!(!cron::remove(&mut conn, "report").await.unwrap());
}

#[tokio::test]
async fn two_firers_racing_on_one_tick_fire_it_once() {
    let db = awa_maint::migrated_test_db().await.unwrap();
    let pool = db.pool().await.unwrap();
    let mut conn = pool.acquire().await.unwrap();
    let start = utc(2026, 6, 1, 0, 0);
    let s = Schedule {
        missed: Missed::CatchUp { limit: 50 },
        ..Schedule::new("race", "* * * * *", "cron", "tick")
    };
    cron::upsert(&mut conn, &s).await.unwrap();
    created_at(&pool, "race", start).await;
    let at = start + Duration::minutes(40);
    let firers: Vec<_> = (0..4)
        .map(|_| {
            let pool = pool.clone();
            tokio::spawn(async move { awa_maint::cron::fire_due(&pool, &schema(), at).await })
        })
        .collect();
    let mut total = 0;
    for f in firers {
        total += f.await.unwrap().unwrap().len();
    }
    let ticks = &fired_jobs(&pool).await["race"];
    assert_eq!(ticks.len(), 40, "{ticks:?}");
    assert_eq!(total, 40);
    let mut sorted = ticks.clone();
    sorted.sort();
    sorted.dedup();
    assert_eq!(sorted.len(), 40, "a tick fired twice");
}

#[tokio::test]
async fn bad_schedules_write_nothing_and_run_now_enqueues_a_manual_job() {
    let db = awa_maint::migrated_test_db().await.unwrap();
    let pool = db.pool().await.unwrap();
    let mut conn = pool.acquire().await.unwrap();
    for bad in [
        Schedule::new("x", "not a cron", "cron", "tick"),
        Schedule {
            timezone: "Nowhere/Land".into(),
            ..Schedule::new("x", "* * * * *", "cron", "tick")
        },
        Schedule::new("bad name!", "* * * * *", "cron", "tick"),
        Schedule::new("x", "* * * * *", "Bad Queue", "tick"),
        Schedule {
            metadata: Some(serde_json::json!([1, 2])),
            ..Schedule::new("x", "* * * * *", "cron", "tick")
        },
    ] {
        let err = cron::upsert(&mut conn, &bad).await.expect_err("refused");
        assert!(
            matches!(err, awa_control::ControlError::Invalid(_)),
            "{err}"
        );
    }
    let sync = [
        Schedule::new("a", "@daily", "cron", "tick"),
        Schedule::new("b", "@hourly", "cron", "tick"),
    ];
    assert!(
        cron::sync(&mut conn, &sync, false)
            .await
            .unwrap()
            .is_empty()
    );
    assert_eq!(
        cron::sync(&mut conn, &sync[..1], true).await.unwrap(),
        vec!["b".to_string()]
    );
    let names: Vec<String> = cron::list(&mut conn, false)
        .await
        .unwrap()
        .into_iter()
        .map(|s| s.schedule.name)
        .collect();
    assert_eq!(names, vec!["a"]);
    let job = awa_maint::cron::run_now(&pool, &schema(), "a")
        .await
        .unwrap()
        .unwrap();
    let manual: bool = sqlx::query_scalar(
        "SELECT (metadata->'awa_cron'->>'manual')::boolean FROM awa.jobs WHERE id = $1",
    )
    .bind(job.0)
    .fetch_one(&pool)
    .await
    .unwrap();
    assert!(manual);
    assert!(
        awa_maint::cron::run_now(&pool, &schema(), "zzz")
            .await
            .unwrap()
            .is_none()
    );
}

// ---------------------------------------------------------------------------
// Ticks are whole seconds, each fired once, whatever the pass cadence and
// the clock's fractions: a property over random sub-second instants.
// ---------------------------------------------------------------------------

/// Jobs per tick of `schedule`: the whole second each job's recorded tick
/// falls in, and how many jobs name that second. A tick fired twice shows
/// up here even when the two jobs recorded different fractions of it.
async fn jobs_per_tick(pool: &sqlx::PgPool, schedule: &str) -> BTreeMap<DateTime<Utc>, i64> {
    let rows: Vec<(DateTime<Utc>, i64)> = sqlx::query_as(
        "SELECT date_trunc('second', (metadata->'awa_cron'->>'tick')::timestamptz), count(*)
           FROM awa.jobs WHERE metadata->'awa_cron'->>'schedule' = $1
          GROUP BY 1 ORDER BY 1",
    )
    .bind(schedule)
    .fetch_all(pool)
    .await
    .unwrap();
    rows.into_iter().collect()
}

/// The ticks recorded in `schedule`'s jobs, exactly as written.
async fn recorded_ticks(pool: &sqlx::PgPool, schedule: &str) -> Vec<DateTime<Utc>> {
    fired_jobs(pool).await.remove(schedule).unwrap_or_default()
}

/// One case: a schedule created at `start` (a random instant with a
/// random fraction), passes at `start + steps[0]`, `+ steps[1]`, ... (each
/// a random number of nanoseconds), under both missed-tick policies.
async fn cadence_case(
    pool: &sqlx::PgPool,
    case: usize,
    expr: &str,
    start: DateTime<Utc>,
    steps: &[i64],
) -> Result<(), String> {
    let mut conn = pool.acquire().await.map_err(|e| e.to_string())?;
    let skip = format!("skip-{case}");
    let catch_up = format!("catch-up-{case}");
    for (name, missed) in [
        (&skip, Missed::Skip),
        (&catch_up, Missed::CatchUp { limit: 1000 }),
    ] {
        let s = Schedule {
            missed,
            ..Schedule::new(name.as_str(), expr, "cron", "tick")
        };
        cron::upsert(&mut conn, &s)
            .await
            .map_err(|e| e.to_string())?;
        created_at(pool, name, start).await;
    }
    let ticks = Ticks::parse(expr, "UTC").unwrap();
    let mut now = start;
    for step in steps {
        now += Duration::nanoseconds(*step);
        awa_maint::cron::fire_due(pool, &schema(), now)
            .await
            .map_err(|e| e.to_string())?;
        // After each pass both schedules have fired the latest tick at or
        // before `now` (if any tick came after the creation).
        let latest = ticks.due(start, now, 1).first().copied();
        let stored = cron::list(&mut conn, false)
            .await
            .map_err(|e| e.to_string())?;
        for name in [&skip, &catch_up] {
            let last = stored
                .iter()
                .find(|s| &s.schedule.name == name)
                .and_then(|s| s.last_tick);
            if last != latest {
                return Err(format!(
                    "{name} at {now}: last tick {last:?}, want the latest due {latest:?}"
                ));
            }
        }
    }
    // Every tick of the expression in (start, now], each a whole second.
    let mut want = Vec::new();
    let mut t = start;
    while let Some(next) = ticks.next_after(t) {
        if next > now {
            break;
        }
        want.push(next);
        t = next;
    }
    for name in [&skip, &catch_up] {
        let per_tick = jobs_per_tick(pool, name).await;
        if let Some((tick, n)) = per_tick.iter().find(|(_, n)| **n != 1) {
            return Err(format!("{name}: {n} jobs for the tick {tick}"));
        }
        let recorded = recorded_ticks(pool, name).await;
        if let Some(t) = recorded.iter().find(|t| t.timestamp_subsec_nanos() != 0) {
            return Err(format!("{name}: tick {t} is not a whole second"));
        }
        if let Some(t) = recorded.iter().find(|t| !want.contains(t)) {
            return Err(format!("{name}: {t} is not a tick in ({start}, {now}]"));
        }
        if name == &catch_up && recorded != want {
            return Err(format!(
                "{name}: fired {recorded:?}, want every tick {want:?}"
            ));
        }
    }
    for name in [&skip, &catch_up] {
        cron::remove(&mut conn, name)
            .await
            .map_err(|e| e.to_string())?;
    }
    Ok(())
}

#[test]
fn each_whole_second_tick_fires_once_whatever_the_cadence_and_fractions() {
    use proptest::prelude::*;
    use proptest::test_runner::{Config, TestCaseError, TestRunner};
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let db = rt.block_on(awa_maint::migrated_test_db()).unwrap();
    let pool = rt.block_on(db.pool()).unwrap();
    let cases = std::env::var("AWA_CRON_PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(16);
    let mut runner = TestRunner::new(Config {
        cases,
        failure_persistence: None,
        ..Config::default()
    });
    let case = std::sync::atomic::AtomicUsize::new(0);
    let strategy = (
        prop_oneof![
            Just("* * * * * *"),
            Just("*/7 * * * * *"),
            Just("* * * * *"),
            Just("15,45 * * * * *"),
        ],
        // A start anywhere in a day of 2026, with any fraction.
        0i64..86_400,
        0i64..1_000_000_000,
        // Passes 1 ms to 2.5 s apart (16 cases by default; more with
        // AWA_CRON_PROPTEST_CASES=200), with any fraction: several inside
        // one second, and some slower than an every-second schedule.
        proptest::collection::vec(1_000_000i64..2_500_000_000, 5..40),
    );
    let result = runner.run(&strategy, |(expr, secs, nanos, steps)| {
        let n = case.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let start = utc(2026, 5, 1, 0, 0) + Duration::seconds(secs) + Duration::nanoseconds(nanos);
        rt.block_on(cadence_case(&pool, n, expr, start, &steps))
            .map_err(TestCaseError::fail)
    });
    if let Err(e) = result {
        panic!("{e}");
    }
}

// ---------------------------------------------------------------------------
// One schedule that cannot fire never silences the others.
// ---------------------------------------------------------------------------

/// Each schedule's recorded error, by name.
async fn errors(conn: &mut sqlx::PgConnection) -> BTreeMap<String, Option<String>> {
    cron::list(conn, false)
        .await
        .unwrap()
        .into_iter()
        .map(|s| (s.schedule.name, s.error))
        .collect()
}

async fn error_since(pool: &sqlx::PgPool, name: &str) -> Option<DateTime<Utc>> {
    sqlx::query_scalar("SELECT error_since FROM awa.cron_jobs WHERE name = $1")
        .bind(name)
        .fetch_one(pool)
        .await
        .unwrap()
}

#[tokio::test]
async fn a_schedule_that_cannot_fire_is_skipped_with_its_error_and_the_others_keep_firing() {
    let db = awa_maint::migrated_test_db().await.unwrap();
    let pool = db.pool().await.unwrap();
    let mut conn = pool.acquire().await.unwrap();
    let start = utc(2026, 6, 1, 0, 0);
    // Valid when written (5 KB of args)...
    let big = Schedule {
        args: serde_json::json!({ "blob": "x".repeat(5000) }),
        ..Schedule::new("a-big", "* * * * *", "cron", "tick")
    };
    let small = Schedule::new("b-small", "* * * * *", "cron", "tick");
    for s in [&big, &small] {
        cron::upsert(&mut conn, s).await.unwrap();
        created_at(&pool, &s.name, start).await;
    }
    // ...and rows no client validated: the runtime role may write
    // cron_jobs by SQL. Each sorts before b-small, so each is met first.
    for (name, expr, zone, queue, args) in [
        (
            "a-huge",
            "* * * * *",
            "UTC",
            "cron",
            "jsonb_build_object('blob', repeat('x', 3 * 1024 * 1024))",
        ),
        ("a-bad-expr", "not a cron", "UTC", "cron", "'{}'"),
        ("a-bad-zone", "* * * * *", "Mars/Olympus", "cron", "'{}'"),
        ("a-bad-queue", "* * * * *", "UTC", "Bad Queue", "'{}'"),
        ("a-never", "0 0 30 2 *", "UTC", "cron", "'{}'"),
    ] {
        sqlx::query(sqlx::AssertSqlSafe(format!(
            "INSERT INTO awa.cron_jobs (name, cron_expr, timezone, queue, kind, args, fire_from)
             VALUES ($1, $2, $3, $4, 'tick', {args}, $5)"
        )))
        .bind(name)
        .bind(expr)
        .bind(zone)
        .bind(queue)
        .bind(start)
        .execute(&pool)
        .await
        .unwrap();
    }
    // Then the operator lowers the size limit under a-big's args.
    sqlx::query("UPDATE awa.substrate_info SET max_job_bytes = 4096")
        .execute(&pool)
        .await
        .unwrap();

    let first = start + Duration::minutes(1) + Duration::milliseconds(250);
    let fired = awa_maint::cron::fire_due(&pool, &schema(), first)
        .await
        .expect("a pass with failing schedules still succeeds");
    let names: Vec<&str> = fired.iter().map(|f| f.schedule.as_str()).collect();
    assert_eq!(names, vec!["b-small"], "{fired:?}");
    let errs = errors(&mut conn).await;
    for (name, quoted) in [
        ("a-big", "over the limit of 4096"),
        ("a-huge", "over the limit"),
        ("a-bad-expr", "not a cron"),
        ("a-bad-zone", "Mars/Olympus"),
        ("a-bad-queue", "Bad Queue"),
        ("a-never", "never fire"),
    ] {
        let err = errs[name]
            .as_deref()
            .unwrap_or_else(|| panic!("{name}: no error recorded"));
        assert!(
            err.contains(quoted),
            "{name}: {err:?} should mention {quoted:?}"
        );
    }
    assert_eq!(errs["b-small"], None);
    let big_since = error_since(&pool, "a-big").await.expect("error_since");

    // Every later pass: b-small keeps firing; the errors stay, unrewritten.
    let second = first + Duration::minutes(1);
    let fired = awa_maint::cron::fire_due(&pool, &schema(), second)
        .await
        .unwrap();
    assert_eq!(fired.len(), 1, "{fired:?}");
    assert_eq!(fired[0].schedule, "b-small");
    assert_eq!(
        error_since(&pool, "a-big").await,
        Some(big_since),
        "rewritten every pass"
    );

    // Fixed (the limit raised again): a-big fires and its error clears;
    // the others still fail alone.
    sqlx::query("UPDATE awa.substrate_info SET max_job_bytes = 1048576")
        .execute(&pool)
        .await
        .unwrap();
    let third = second + Duration::minutes(1);
    let fired = awa_maint::cron::fire_due(&pool, &schema(), third)
        .await
        .unwrap();
    let mut names: Vec<&str> = fired.iter().map(|f| f.schedule.as_str()).collect();
    names.sort();
    assert_eq!(names, vec!["a-big", "b-small"], "{fired:?}");
    let errs = errors(&mut conn).await;
    assert_eq!(errs["a-big"], None);
    assert_eq!(error_since(&pool, "a-big").await, None);
    assert!(errs["a-huge"].is_some() && errs["a-bad-zone"].is_some());
    // Changing a schedule clears its error (it described the old one).
    let fixed = Schedule::new("a-bad-zone", "* * * * *", "cron", "tick");
    assert_eq!(
        cron::upsert(&mut conn, &fixed).await.unwrap(),
        cron::Upserted::Updated
    );
    assert_eq!(errors(&mut conn).await["a-bad-zone"], None);
    // b-small fired each tick once through all of it.
    assert_eq!(jobs_per_tick(&pool, "b-small").await.len(), 3);
}
