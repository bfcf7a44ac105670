//! A clean stop is quiet: every long-running command (`worker run`, `maint
//! run`, `serve`) stopped with SIGTERM exits 0 and logs no warning or
//! error at the default verbosity (which shows Awa's warnings). A
//! background task that outlives the pool it reads from (the storage
//! routing follower did) would log one on every shutdown.

use crate::common;

use common::{migrated_db, spawn_awa};
use std::time::Duration;

/// Each command is stopped at a few different moments after its start, so
/// a background task's 1 s cadence lands on the shutdown at least once.
const STOPS: [u64; 4] = [1500, 2000, 2600, 3300];

fn assert_quiet_stop(url: &str, args: &[&str], after: Duration) {
    let running = spawn_awa(url, args);
    std::thread::sleep(after);
    running.terminate();
    let run = running.finish();
    assert_eq!(run.code, Some(0), "{args:?} stops cleanly: {run:#?}");
    let noisy: Vec<&str> = run
        .stderr
        .lines()
        .filter(|l| l.contains("WARN") || l.contains("ERROR") || l.contains("error"))
        .collect();
    assert!(
        noisy.is_empty(),
        "{args:?} stopped after {after:?} logged:\n{}",
        noisy.join("\n")
    );
}

#[tokio::test]
async fn sigterm_stops_every_long_running_command_without_a_warning() {
    let db = migrated_db().await;
    let url = db.url();
    for ms in STOPS {
        let after = Duration::from_millis(ms);
        assert_quiet_stop(
            url,
            &["worker", "run", "--queue", "q", "--handler", "noop"],
            after,
        );
        assert_quiet_stop(url, &["maint", "run"], after);
        assert_quiet_stop(url, &["serve", "--listen", "127.0.0.1:0"], after);
    }
}
