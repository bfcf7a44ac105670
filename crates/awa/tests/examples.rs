//! The examples in `crates/awa/examples/` run as a new user would run them,
//! against a throwaway database: the producer enqueues in a transaction,
//! the worker runs both kinds and shuts down gracefully on SIGTERM. And
//! `docs/getting-started-rust.md` shows exactly these files, so the guide
//! cannot drift from code that is compiled and run.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Where cargo put the example binaries (`target/<profile>/examples/`),
/// built first: a test target does not rebuild examples, so an old binary
/// would otherwise be run against new code. (Once per test process; a
/// no-op when they are up to date.) `-p xtask` beside `awa` gives the
/// dependencies the suite's features (xtask/Cargo.toml), so this build
/// reuses the suite's instead of compiling them again with fewer features.
fn example(name: &str) -> PathBuf {
    static BUILT: std::sync::Once = std::sync::Once::new();
    BUILT.call_once(|| {
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        let status = Command::new(cargo)
            .args(["build", "-p", "awa", "-p", "xtask", "--examples"])
            .status()
            .unwrap();
        assert!(status.success(), "building the examples failed");
    });
    let exe = std::env::current_exe().unwrap();
    let profile_dir = exe.parent().and_then(Path::parent).unwrap();
    let path = profile_dir.join("examples").join(name);
    assert!(path.exists(), "no example binary at {}", path.display());
    path
}

async fn completed(pool: &sqlx::PgPool) -> i64 {
    sqlx::query_scalar("SELECT count(*) FROM awa.terminal_jobs WHERE state = 'completed'")
        .fetch_one(pool)
        .await
        .unwrap()
}

#[tokio::test]
async fn the_producer_and_worker_examples_run_end_to_end() {
    let db = awa::testing::test_db().await.unwrap();
    let pool = db.pool().await.unwrap();

    let out = Command::new(example("producer"))
        .env("DATABASE_URL", db.url())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "producer: {stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        stdout.matches("enqueued send_welcome as job").count(),
        3,
        "{stdout}"
    );

    let worker = Command::new(example("worker"))
        .env("DATABASE_URL", db.url())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let until = Instant::now() + Duration::from_secs(60);
    while completed(&pool).await < 5 {
        assert!(
            Instant::now() < until,
            "the worker did not complete the 5 jobs within 60 s"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let term = Command::new("kill")
        .args(["-TERM", &worker.id().to_string()])
        .status()
        .unwrap();
    assert!(term.success());
    let out = tokio::task::spawn_blocking(move || worker.wait_with_output())
        .await
        .unwrap()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "worker: {stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for line in [
        "welcome user1@example.com (user 1, attempt 1)",
        "welcome user3@example.com (user 3, attempt 1)",
        "resized a.png to 640 px",
        "resized b.png to 320 px",
        "stopped after 5 completed jobs",
    ] {
        assert!(stdout.contains(line), "missing {line:?} in:\n{stdout}");
    }
}

/// A `main` that returns an error prints it with `Debug`: each example, run
/// the ways a newcomer gets it wrong, must print what to do (not
/// `Error: Maint(NotMigrated)`, `Error: NotPresent` or a driver's struct).
#[tokio::test]
async fn errors_returned_from_main_read_as_messages() {
    let unmigrated = awa_harness::TestDb::empty().await.unwrap();
    for name in ["producer", "worker"] {
        for (how, url, says) in [
            (
                "an unmigrated database",
                Some(unmigrated.url()),
                "run `awa migrate`",
            ),
            ("no DATABASE_URL", None, "set DATABASE_URL"),
            (
                "nothing listening",
                Some("postgres://nobody:s3cretpw@127.0.0.1:1/app"),
                "could not connect to PostgreSQL",
            ),
        ] {
            let mut cmd = Command::new(example(name));
            cmd.env_remove("DATABASE_URL");
            if let Some(url) = url {
                cmd.env("DATABASE_URL", url);
            }
            let out = tokio::task::spawn_blocking(move || cmd.output())
                .await
                .unwrap()
                .unwrap();
            let stderr = String::from_utf8_lossy(&out.stderr);
            assert!(!out.status.success(), "{name} with {how}: {stderr}");
            assert!(
                stderr.contains(says),
                "{name} with {how} should say {says:?}: {stderr}"
            );
            for bare in ["NotMigrated", "Maint(", "NotPresent", "Io(", "s3cretpw"] {
                assert!(
                    !stderr.contains(bare),
                    "{name} with {how} printed {bare:?}: {stderr}"
                );
            }
        }
    }
}

#[test]
fn the_getting_started_guide_shows_the_examples_verbatim() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let guide = std::fs::read_to_string(root.join("../../docs/getting-started-rust.md")).unwrap();
    for file in [
        "shared/jobs.rs",
        "producer.rs",
        "worker.rs",
        "inline_test.rs",
    ] {
        let code = std::fs::read_to_string(root.join("examples").join(file)).unwrap();
        let block = format!("```rust\n{code}```");
        assert!(
            guide.contains(&block),
            "docs/getting-started-rust.md does not show examples/{file} as it is; paste it in a ```rust block"
        );
    }
}
