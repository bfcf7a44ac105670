//! Upgrades: version 1 brought up through every numbered step equals a
//! fresh install of the current sources (with a custom substrate and a
//! runtime role granted before the upgrade), released steps never change,
//! and work queued before an upgrade is still run after it.

use awa_maint::migrate::{self, LATEST_VERSION};
use sqlx::{Connection, PgConnection};

use crate::common;

/// Every released step's checksum. A released step is frozen: editing its
/// file fails here. Add a line when a new step is committed to `main`.
const RELEASED: &[(i32, &str)] = &[
    (
        1,
        "e8a74099a7e9c18c46f74ae6452d5b3fd7aaa9c7f81b85a2a9d4a45a7b1687dd",
    ),
    (
        2,
        "b91290862dad3386a966363fa49fbe3a0546caf5c6da4f88eed933e27652612e",
    ),
    (
        3,
        "ea8d103b27b79951ca3c74e7ab056b888d625bf1e66878cf010c7279c7c2f94c",
    ),
    (
        4,
        "4f0702eb1b145a61c1c57177fb98a1fffcd79bbebec1a14a2a0edad3d230e12a",
    ),
    (
        5,
        "831272e0400aedccadd5fcdbc6afaad4031a465eb05ec7366e526e7b123500bb",
    ),
    (
        6,
        "8073435e3951cafaf73e209638ad7cbaf98a132d6dbbde936e68615c6f98ac60",
    ),
    (
        7,
        "a6605484b64f4e2df8c61e5aad47fa2b5a56bda9a9799b214e607d66324e5b87",
    ),
    (
        8,
        "b2f41257d10eef375193830d1e276aa319c229b28b6c88e34efa706f004aca9b",
    ),
    (
        9,
        "857ad00f8bc435996dbf3fcf0f79267d644602a096e6a4291862fafb8d7ccf4e",
    ),
    (
        10,
        "27b558ed24a8108e95569b6deaec8e73b3551b949b4f85ac3e8d85783efd969e",
    ),
    (
        11,
        "3a5226d019f5fe072912f05dde78c2ff7ee274b1b5376fb9cedc4ab05f94540f",
    ),
    (
        12,
        "520e42c83f1263e9b8ed2de67881ec275b2a13f4c94cf10e96aecffdb1d1429a",
    ),
    (
        13,
        "dcdf0385ddd833a576c3b7e7df59b34f2759481bf0f90287e9148df4a0fbdbe7",
    ),
    (
        14,
        "76065ad8d57a9120be0b2c929ee490d625b286f2ec9c171456408511824d0a4e",
    ),
    (
        15,
        "1029e68bef1d97160fa65d757485035b29a75d5d17510b4c66ba77ec82cc3861",
    ),
    (
        16,
        "d79fbf2d5bad84e826846a5bd28e278e8ea104767c95031ebd6079ede03b6515",
    ),
    (
        17,
        "09418c97c612f38df8f7e7d8dd12b9814a5735289503803df4a153203c604487",
    ),
    (
        18,
        "d160444c4442dac670305021d1d3be1f05cc0a69e6c9449063a32228d5d8ff13",
    ),
    (
        19,
        "cd032999994318382cef16eddcdfecf73eaa540fa712d1099b5c331fc8c4f1fb",
    ),
    (
        20,
        "d21b1ee7eff18aa6df29dddddd45ee044fa8b7ce60462bb806194f7fe1aa3f45",
    ),
    (
        21,
        "d7aac60999495025113e3eb47d2f0eedc28c77be67d79a603c7f19d4df9692a0",
    ),
    (
        22,
        "5dfce134b0e8654ca9adea5a93880a27f500f9cd5ff5945d74729b5c983e8975",
    ),
];

#[test]
fn released_steps_are_frozen_and_every_step_is_released() {
    let steps = migrate::steps();
    let got: Vec<(i32, String)> = steps.iter().map(|m| (m.version, m.checksum())).collect();
    let want: Vec<(i32, String)> = RELEASED.iter().map(|(v, c)| (*v, c.to_string())).collect();
    assert_eq!(
        got, want,
        "a released migration step was edited, or a new step is missing from RELEASED \
         (never edit a released step: add a new one)"
    );
    assert_eq!(LATEST_VERSION as usize, steps.len());
}

#[test]
fn the_migrations_folder_holds_exactly_the_steps_in_order() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("migrations");
    let mut files: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap())
        .filter(|e| e.file_type().unwrap().is_file())
        .map(|e| e.file_name().into_string().unwrap())
        .collect();
    files.sort();
    let expected: Vec<String> = migrate::steps()
        .iter()
        .map(|m| format!("{:04}_{}.sql", m.version, m.description.replace(' ', "_")))
        .collect();
    assert_eq!(files, expected, "one file per step, numbered 1, 2, 3, ...");
    for m in migrate::steps() {
        let on_disk = std::fs::read_to_string(dir.join(format!(
            "{:04}_{}.sql",
            m.version,
            m.description.replace(' ', "_")
        )))
        .unwrap();
        assert_eq!(on_disk, m.sql, "step {} is the file's text", m.version);
    }
}

async fn snapshot(url: &str) -> Vec<String> {
    let mut conn = PgConnection::connect(url).await.unwrap();
    migrate::schema_snapshot(&mut conn).await.unwrap()
}

async fn exec(url: &str, sql: &str) {
    let mut conn = PgConnection::connect(url).await.unwrap();
    sqlx::raw_sql(sqlx::AssertSqlSafe(sql.to_string()))
        .execute(&mut conn)
        .await
        .unwrap();
}

async fn operate(url: &str) {
    let mut conn = PgConnection::connect(url).await.unwrap();
    migrate::draft::probe(&mut conn).await.unwrap();
}

/// Lines only in `a`, then lines only in `b`, for a readable failure.
fn difference(a: &[String], b: &[String]) -> String {
    let only = |x: &[String], y: &[String]| -> Vec<String> {
        x.iter().filter(|l| !y.contains(l)).cloned().collect()
    };
    format!(
        "only after the steps:\n  {}\nonly in a fresh install:\n  {}",
        only(a, b).join("\n  "),
        only(b, a).join("\n  ")
    )
}

#[tokio::test]
async fn every_step_from_version_1_reaches_a_fresh_install_and_keeps_the_work() {
    let upgraded = awa_harness::TestDb::empty().await.unwrap();

    // Version 1 as released, used: a custom substrate, the role, and work
    // waiting (runnable and scheduled) through the SQL producer contract.
    let report = migrate::migrate_to(upgraded.url(), 1).await.unwrap();
    assert_eq!(report.applied, vec![1]);
    operate(upgraded.url()).await;
    exec(
        upgraded.url(),
        "SELECT * FROM awa.enqueue(
             ARRAY['upgrade', 'upgrade', 'upgrade'], ARRAY['k', 'k', 'k'],
             ARRAY['{\"n\": 1}', '{\"n\": 2}', '{\"n\": 3}']::jsonb[],
             ARRAY[2, 2, 2]::smallint[],
             ARRAY[NULL, NULL, now() + interval '1 hour']::timestamptz[],
             ARRAY[NULL, NULL, NULL]::integer[], ARRAY['kept', NULL, NULL]::text[],
             ARRAY[NULL, NULL, NULL]::jsonb[])",
    )
    .await;

    // Every step, one at a time, each recorded.
    // (Empty while version 1 is the only step.)
    #[allow(clippy::reversed_empty_ranges)]
    for version in 2..=LATEST_VERSION {
        let report = migrate::migrate_to(upgraded.url(), version).await.unwrap();
        assert_eq!(report.applied, vec![version], "step {version}");
    }
    let again = migrate::migrate(upgraded.url()).await.unwrap();
    assert!(again.applied.is_empty(), "nothing left to apply");
    assert_eq!(again.from, Some(LATEST_VERSION));

    let fresh = awa_harness::TestDb::empty().await.unwrap();
    let report = migrate::migrate(fresh.url()).await.unwrap();
    assert_eq!(report.applied, vec![LATEST_VERSION]);
    operate(fresh.url()).await;
    exec(
        fresh.url(),
        "SELECT * FROM awa.enqueue(ARRAY['upgrade', 'upgrade', 'upgrade'], ARRAY['k', 'k', 'k'],
             ARRAY['{}', '{}', '{}']::jsonb[], ARRAY[2, 2, 2]::smallint[],
             ARRAY[NULL, NULL, now() + interval '1 hour']::timestamptz[],
             ARRAY[NULL, NULL, NULL]::integer[], ARRAY['kept', NULL, NULL]::text[],
             ARRAY[NULL, NULL, NULL]::jsonb[])",
    )
    .await;

    let (a, b) = (snapshot(upgraded.url()).await, snapshot(fresh.url()).await);
    assert!(
        a == b,
        "version 1 + every step differs from a fresh install of the sources \
         (write the missing step: `cargo xtask migration draft`):\n{}",
        difference(&a, &b)
    );

    // The work queued at version 1 runs on the current code.
    let pool = upgraded.pool().await.unwrap();
    let claimed = common::claim_all(&pool, "upgrade", 10, 2).await;
    assert_eq!(claimed.len(), 2, "the two runnable jobs");
    let batch: Vec<_> = claimed
        .iter()
        .map(|j| (j.token, awa_exec::Finish::Complete))
        .collect();
    let finished = common::finish_batch(&pool, &batch).await;
    assert_eq!(finished.len(), 2);
    let mut conn = pool.acquire().await.unwrap();
    let states: Vec<(String, i64)> = sqlx::query_as(
        "SELECT state::text, count(*) FROM awa.jobs WHERE queue = 'upgrade' GROUP BY 1 ORDER BY 1",
    )
    .fetch_all(&mut *conn)
    .await
    .unwrap();
    assert_eq!(
        states,
        vec![("completed".into(), 2), ("scheduled".into(), 1)],
        "completed after the upgrade; the scheduled one still waits"
    );
}

#[test]
fn printed_steps_cover_the_range_asked_and_refuse_others() {
    let all = migrate::steps_sql(0, LATEST_VERSION).unwrap();
    assert_eq!(
        all.matches("INSERT INTO awa.schema_version").count(),
        LATEST_VERSION as usize
    );
    assert_eq!(all.matches("BEGIN;").count(), LATEST_VERSION as usize);
    for (from, to) in [(-1, 1), (1, 1), (0, LATEST_VERSION + 1), (2, 1)] {
        assert!(
            migrate::steps_sql(from, to).is_err(),
            "--from {from} --to {to} is refused"
        );
    }
}
