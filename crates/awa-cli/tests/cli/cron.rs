//! `awa cron ...` as an operator runs it: each subcommand with text and
//! `--json`, each bad input refused with the problem quoted and nothing
//! written; and process tests, counting jobs per tick (the whole second a
//! job's recorded tick falls in, so two fires of one tick with different
//! fractions count twice): one `awa maint run` across a minute boundary
//! fires each tick of a per-minute and a per-second schedule once, on a
//! whole second; two maintenance candidates, a schedule every second, the
//! leader killed with -9 again and again: no tick fires twice, `catch_up`
//! leaves no gap, `skip` none beyond the failover bound.

use crate::common;

use common::{awa, migrated_db, spawn_awa};
use std::time::{Duration, Instant};

fn names(url: &str) -> Vec<String> {
    awa(url, &["cron", "list", "--json"])
        .json()
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["name"].as_str().unwrap().to_string())
        .collect()
}

#[tokio::test]
async fn each_subcommand_does_what_it_says() {
    let db = migrated_db().await;
    let url = db.url();
    let add = [
        "cron",
        "add",
        "nightly",
        "--cron",
        "0 3 * * *",
        "--timezone",
        "Europe/Berlin",
        "--queue",
        "reports",
        "--kind",
        "build_report",
        "--args",
        r#"{"full": true}"#,
        "--metadata",
        r#"{"team": "data"}"#,
        "--json",
    ];
    let out = awa(url, &add).json();
    assert_eq!(out["outcome"], "created");
    assert!(out["next_fire"].is_string(), "{out}");
    // The next fire is the tick itself, 03:00:00 in Berlin (01:00 or
    // 02:00 UTC), to the second.
    let next = chrono::DateTime::parse_from_rfc3339(out["next_fire"].as_str().unwrap())
        .unwrap()
        .to_utc();
    assert_eq!(
        next.format("%M:%S%.f").to_string(),
        "00:00",
        "{out} is not a whole-second tick"
    );
    assert!([1, 2].contains(&chrono::Timelike::hour(&next)), "{out}");
    // A taken name is refused without --replace; with it, unchanged.
    awa(url, &add).refused("already exists");
    let mut replace = add.to_vec();
    replace.push("--replace");
    assert_eq!(awa(url, &replace).json()["outcome"], "unchanged");

    let text = awa(url, &["cron", "list"]);
    assert!(
        text.ok() && text.stdout.contains("nightly") && text.stdout.contains("Europe/Berlin"),
        "{text:#?}"
    );
    let listed = awa(url, &["cron", "list", "--json"]).json();
    assert_eq!(listed[0]["cron"], "0 3 * * *");
    assert_eq!(listed[0]["enabled"], true);
    assert!(listed[0]["next_fire"].is_string());

    assert_eq!(
        awa(url, &["cron", "pause", "nightly", "--json"]).json()["outcome"],
        "paused"
    );
    let paused = awa(url, &["cron", "list", "--json"]).json();
    assert_eq!(paused[0]["enabled"], false);
    assert!(paused[0]["next_fire"].is_null());
    assert_eq!(
        awa(url, &["cron", "resume", "nightly", "--json"]).json()["outcome"],
        "resumed"
    );

    let ran = awa(url, &["cron", "run-now", "nightly", "--json"]).json();
    let id = ran["job_id"].as_i64().unwrap().to_string();
    let job = awa(url, &["job", "dump", &id, "--json"]).json();
    assert_eq!(job["kind"], "build_report");
    assert_eq!(job["queue"], "reports");
    assert_eq!(job["args"]["full"], true);
    assert_eq!(job["metadata"]["team"], "data");
    assert_eq!(job["metadata"]["awa_cron"]["manual"], true);
    let listed = awa(url, &["cron", "list", "--json"]).json();
    assert_eq!(listed[0]["last_job_id"].as_i64().unwrap().to_string(), id);

    assert_eq!(
        awa(url, &["cron", "remove", "nightly", "--json"]).json()["outcome"],
        "removed"
    );
    assert!(names(url).is_empty());
    for cmd in ["remove", "pause", "resume", "run-now"] {
        awa(url, &["cron", cmd, "nightly"]).refused("no schedule named \"nightly\"");
    }
}

#[tokio::test]
async fn bad_input_is_refused_quoting_the_problem_and_writes_nothing() {
    let db = migrated_db().await;
    let url = db.url();
    let base = |name: &'static str, extra: &[&'static str]| {
        let mut a = vec!["cron", "add", name, "--queue", "q", "--kind", "k"];
        if !extra.contains(&"--cron") {
            a.extend(["--cron", "* * * * *"]);
        }
        a.extend_from_slice(extra);
        a
    };
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (base("x", &["--cron", "61 * * * *"]), "61 * * * *"),
        (base("x", &["--cron", "* * *"]), "3 fields"),
        (base("x", &["--cron", "@sometimes"]), "@sometimes"),
        (base("x", &["--timezone", "Mars/Olympus"]), "Mars/Olympus"),
        (base("no spaces please", &[]), "no spaces please"),
        (
            vec![
                "cron",
                "add",
                "x",
                "--cron",
                "* * * * *",
                "--queue",
                "Bad Queue",
                "--kind",
                "k",
            ],
            "Bad Queue",
        ),
        (base("x", &["--priority", "7"]), "priority"),
        (base("x", &["--metadata", "[1]"]), "JSON object"),
        (base("x", &["--args", "{nope"]), "--args"),
        (
            base("x", &["--missed", "catch-up", "--catch-up-limit", "0"]),
            "catch-up limit",
        ),
        (base("x", &["--max-attempts", "0"]), "max attempts"),
    ];
    for (args, quoted) in cases {
        awa(url, &args).refused(quoted);
    }
    assert!(names(url).is_empty(), "a refused schedule was written");
}

#[tokio::test]
async fn a_schedule_that_cannot_fire_is_listed_with_why_and_the_others_keep_firing() {
    let db = migrated_db().await;
    let url = db.url();
    let blob = format!(r#"{{"blob": "{}"}}"#, "x".repeat(5000));
    for (name, args) in [("a-big", blob.as_str()), ("b-small", "{}")] {
        let add = awa(
            url,
            &[
                "cron",
                "add",
                name,
                "--cron",
                "* * * * * *",
                "--queue",
                "c",
                "--kind",
                "k",
                "--args",
                args,
            ],
        );
        assert!(add.ok(), "{add:#?}");
    }
    let configure = awa(url, &["storage", "configure", "--max-job-bytes", "4096"]);
    assert!(configure.ok(), "{configure:#?}");
    // Past the creation second, so a tick is due; one pass of every task.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let pass = awa(url, &["maint", "run", "--once"]);
    assert!(pass.ok(), "{pass:#?}");

    let listed = awa(url, &["cron", "list", "--json"]).json();
    let by = |name: &str| {
        listed
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["name"] == name)
            .unwrap()
            .clone()
    };
    let big = by("a-big");
    assert!(
        big["error"]
            .as_str()
            .unwrap()
            .contains("over the limit of 4096"),
        "{big}"
    );
    assert!(big["error_since"].is_string(), "{big}");
    assert!(big["last_tick"].is_null(), "{big}");
    let small = by("b-small");
    assert!(small["error"].is_null(), "{small}");
    assert!(
        small["last_tick"].is_string(),
        "b-small did not fire: {small}"
    );
    let text = awa(url, &["cron", "list"]);
    assert!(text.ok(), "{text:#?}");
    assert!(
        text.stdout.contains("a-big cannot fire") && text.stdout.contains("over the limit of 4096"),
        "{text:#?}"
    );
    assert!(!text.stdout.contains("b-small cannot fire"), "{text:#?}");
}

/// Jobs per tick of `schedule`: each whole second a job's recorded tick
/// falls in, with how many jobs name it; and whether every recorded tick
/// is a whole second.
async fn jobs_per_tick(
    pool: &sqlx::PgPool,
    schedule: &str,
) -> (Vec<(chrono::DateTime<chrono::Utc>, i64)>, bool) {
    let per_tick = sqlx::query_as(
        "SELECT date_trunc('second', (metadata->'awa_cron'->>'tick')::timestamptz), count(*)
           FROM awa.jobs WHERE metadata->'awa_cron'->>'schedule' = $1
          GROUP BY 1 ORDER BY 1",
    )
    .bind(schedule)
    .fetch_all(pool)
    .await
    .unwrap();
    let whole: bool = sqlx::query_scalar(
        "SELECT coalesce(bool_and(t = date_trunc('second', t)), true)
           FROM (SELECT (metadata->'awa_cron'->>'tick')::timestamptz AS t
                   FROM awa.jobs WHERE metadata->'awa_cron'->>'schedule' = $1) x",
    )
    .bind(schedule)
    .fetch_one(pool)
    .await
    .unwrap();
    (per_tick, whole)
}

#[tokio::test]
async fn one_leader_across_a_minute_boundary_fires_each_tick_once_on_a_whole_second() {
    let db = migrated_db().await;
    let url = db.url();
    let pool = db.pool().await.unwrap();
    for (name, expr) in [("each-minute", "* * * * *"), ("each-second", "* * * * * *")] {
        let add = awa(
            url,
            &[
                "cron", "add", name, "--cron", expr, "--queue", "ticks", "--kind", "tick",
            ],
        );
        assert!(add.ok(), "{add:#?}");
    }
    let leader = spawn_awa(url, &["maint", "run"]);
    // Run until 3 s past the next minute boundary (at most 63 s): the
    // cron task passes every 0.5 s, so several passes fall inside the
    // second of the minute's tick and of each second's tick.
    let now = chrono::Utc::now();
    use chrono::DurationRound;
    let boundary =
        now.duration_trunc(chrono::TimeDelta::minutes(1)).unwrap() + chrono::TimeDelta::minutes(1);
    let wait = (boundary - now + chrono::TimeDelta::seconds(3))
        .to_std()
        .unwrap();
    tokio::time::sleep(wait).await;
    leader.terminate();
    let run = leader.finish();
    assert!(run.ok(), "{run:#?}");

    let (minutes, whole) = jobs_per_tick(&pool, "each-minute").await;
    assert!(
        whole,
        "a minute tick that is not a whole second: {minutes:?}"
    );
    assert_eq!(
        minutes,
        vec![(boundary, 1)],
        "the minute's tick must fire once (jobs per tick)"
    );
    let (seconds, whole) = jobs_per_tick(&pool, "each-second").await;
    assert!(
        whole,
        "a second tick that is not a whole second: {seconds:?}"
    );
    let twice: Vec<_> = seconds.iter().filter(|(_, n)| *n != 1).collect();
    assert!(twice.is_empty(), "ticks fired more than once: {twice:?}");
    // The leader starts its tasks about 2 s after it starts; from then on
    // (skip) every second fires, give or take a slow pass on a loaded
    // machine.
    assert!(
        seconds.len() as u64 + 10 >= wait.as_secs(),
        "only {} seconds fired in {wait:?}",
        seconds.len()
    );
}

/// Ticks of `schedule` seen as jobs, in order, with duplicates kept.
async fn ticks(pool: &sqlx::PgPool, schedule: &str) -> Vec<chrono::DateTime<chrono::Utc>> {
    let rows: Vec<String> = sqlx::query_scalar(
        "SELECT metadata->'awa_cron'->>'tick' FROM awa.jobs
          WHERE metadata->'awa_cron'->>'schedule' = $1 ORDER BY 1",
    )
    .bind(schedule)
    .fetch_all(pool)
    .await
    .unwrap();
    rows.iter()
        .map(|t| chrono::DateTime::parse_from_rfc3339(t).unwrap().to_utc())
        .collect()
}

/// How long ticks may go unfired with `skip` while leadership moves after
/// a kill -9: the lock is released when the session ends, a candidate
/// retries every second and waits two check intervals (2 s) before
/// starting tasks, and the cron task runs every 0.5 s; 10 s leaves margin
/// for a loaded machine.
const FAILOVER_BOUND: i64 = 10;

#[tokio::test]
async fn killing_the_leader_again_and_again_never_fires_a_tick_twice() {
    let db = migrated_db().await;
    let url = db.url();
    let pool = db.pool().await.unwrap();
    for (name, missed) in [
        ("each-second-skip", "skip"),
        ("each-second-catch-up", "catch-up"),
    ] {
        let add = awa(
            url,
            &[
                "cron",
                "add",
                name,
                "--cron",
                "* * * * * *",
                "--queue",
                "ticks",
                "--kind",
                "tick",
                "--missed",
                missed,
                "--catch-up-limit",
                "100",
            ],
        );
        assert!(add.ok(), "{add:#?}");
    }
    let candidate = || spawn_awa(url, &["maint", "run"]);
    let mut candidates = vec![candidate(), candidate()];
    let started = Instant::now();
    let mut kills = 0;
    while started.elapsed() < Duration::from_secs(60) {
        tokio::time::sleep(Duration::from_secs(8)).await;
        let leader: Option<i32> =
            sqlx::query_scalar("SELECT pid FROM awa.maintenance_leader LIMIT 1")
                .fetch_optional(&pool)
                .await
                .unwrap();
        if let Some(pid) = leader
            && let Some(i) = candidates.iter().position(|c| c.pid() as i32 == pid)
        {
            let mut dead = candidates.remove(i);
            dead.kill9();
            kills += 1;
            candidates.push(candidate());
        }
    }
    // Let the last leader catch up, then stop everything.
    tokio::time::sleep(Duration::from_secs(6)).await;
    for c in &candidates {
        c.terminate();
    }
    for c in candidates {
        c.finish();
    }
    assert!(kills >= 3, "the leader was killed only {kills} times");

    for name in ["each-second-skip", "each-second-catch-up"] {
        let seen = ticks(&pool, name).await;
        assert!(seen.len() > 30, "{name}: only {} ticks", seen.len());
        // Jobs per tick, not distinct metadata: two fires of one second
        // with different fractions are one tick fired twice.
        let (per_tick, whole) = jobs_per_tick(&pool, name).await;
        assert!(whole, "{name}: a tick that is not a whole second");
        let twice: Vec<_> = per_tick.iter().filter(|(_, n)| *n != 1).collect();
        assert!(twice.is_empty(), "{name}: ticks fired twice: {twice:?}");
        let widest = seen
            .windows(2)
            .map(|w| (w[1] - w[0]).num_seconds())
            .max()
            .unwrap();
        if name.ends_with("catch-up") {
            assert_eq!(widest, 1, "{name}: catch_up left a gap of {widest} s");
        } else {
            assert!(widest <= FAILOVER_BOUND, "{name}: a gap of {widest} s");
        }
    }
}
