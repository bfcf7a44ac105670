//! Leader election in-process: one leader at a time, and a leader whose lock
//! connection dies stops its tasks and steps down.

use async_trait::async_trait;
use awa_maint::MaintError;
use awa_maint::leader::{self, LeaderConfig, Role};
use awa_maint::tasks::{MaintTask, TaskOutcome};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::watch;

/// Records which candidate ran a pass, and when.
#[derive(Debug)]
struct Recorder {
    who: usize,
    log: Arc<Mutex<Vec<(usize, Instant)>>>,
}

#[async_trait]
impl MaintTask for Recorder {
    fn name(&self) -> &'static str {
        "recorder"
    }
    fn interval(&self) -> Duration {
        Duration::from_millis(20)
    }
    async fn run_once(&self, _pool: &sqlx::PgPool) -> Result<TaskOutcome, MaintError> {
        self.log.lock().unwrap().push((self.who, Instant::now()));
        Ok(TaskOutcome::Idle)
    }
}

async fn wait_role(rx: &mut watch::Receiver<Role>, want: Role, limit: Duration) -> bool {
    tokio::time::timeout(limit, rx.wait_for(|r| *r == want))
        .await
        .is_ok()
}

#[tokio::test]
async fn a_leader_that_loses_its_lock_connection_steps_down_and_another_leads() {
    let db = awa_maint::migrated_test_db().await.unwrap();
    let pool = db.pool().await.unwrap();
    let log = Arc::new(Mutex::new(Vec::new()));
    let (stop_tx, stop_rx) = watch::channel(false);
    let mut roles = Vec::new();
    let mut handles = Vec::new();
    for who in 0..2 {
        let (role_tx, role_rx) = watch::channel(Role::Candidate);
        let mut config = LeaderConfig::new();
        config.retry_interval = Duration::from_millis(200);
        config.check_interval = Duration::from_millis(200);
        let tasks: Vec<Arc<dyn MaintTask>> = vec![Arc::new(Recorder {
            who,
            log: log.clone(),
        })];
        handles.push(tokio::spawn(leader::run(
            config,
            pool.clone(),
            tasks,
            stop_rx.clone(),
            Some(role_tx),
        )));
        roles.push(role_rx);
    }
    // Exactly one leads.
    let deadline = Instant::now() + Duration::from_secs(10);
    let first = loop {
        let leading: Vec<usize> = (0..2)
            .filter(|i| *roles[*i].borrow() == Role::Leader)
            .collect();
        if leading.len() == 1 {
            break leading[0];
        }
        assert!(leading.len() < 2, "two leaders at once");
        assert!(Instant::now() < deadline, "nobody became leader");
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    let other = 1 - first;
    tokio::time::sleep(Duration::from_millis(200)).await;

    // Kill the leader's lock connection from outside.
    let backend: i32 = sqlx::query_scalar("SELECT backend_pid FROM awa.maintenance_leader")
        .fetch_one(&pool)
        .await
        .unwrap();
    let killed: bool = sqlx::query_scalar("SELECT pg_terminate_backend($1)")
        .bind(backend)
        .fetch_one(&pool)
        .await
        .unwrap();
    assert!(killed);
    let killed_at = Instant::now();
    assert!(
        wait_role(&mut roles[first], Role::Candidate, Duration::from_secs(5)).await,
        "the old leader stepped down"
    );
    let stepped_down_at = Instant::now();
    assert!(
        wait_role(&mut roles[other], Role::Leader, Duration::from_secs(10)).await,
        "the other took over"
    );

    // The old leader ran no pass after it stepped down, and the two never
    // ran passes in the same stretch of time.
    tokio::time::sleep(Duration::from_millis(200)).await;
    let log = log.lock().unwrap().clone();
    assert!(
        log.iter().any(|(w, _)| *w == other),
        "the new leader runs its tasks"
    );
    assert!(
        !log.iter().any(|(w, t)| *w == first && *t > stepped_down_at),
        "no task of the old leader ran after it stepped down"
    );
    let last_old = log
        .iter()
        .filter(|(w, _)| *w == first)
        .map(|(_, t)| *t)
        .max()
        .unwrap();
    let first_new = log
        .iter()
        .filter(|(w, _)| *w == other)
        .map(|(_, t)| *t)
        .min()
        .unwrap();
    assert!(
        last_old < first_new,
        "tasks never ran on two leaders at once"
    );
    eprintln!("hand-over took {:?}", first_new - killed_at);

    stop_tx.send(true).unwrap();
    for h in handles {
        h.await.unwrap().unwrap();
    }
}

/// A candidate told to stop stops at once, wherever it is: in the fencing
/// wait after winning the lock, or leading. Both consume the stop signal's
/// change inside one term of leadership; the candidate's loop then waited
/// for another change for its whole retry interval (a second by default:
/// every `awa worker run --exit-when-idle` ended a second late). Here the
/// retry interval is a minute, so a candidate that waits for it fails the
/// 10 s guard.
#[tokio::test]
async fn a_candidate_told_to_stop_stops_without_waiting_out_its_retry_interval() {
    let db = awa_maint::migrated_test_db().await.unwrap();
    let pool = db.pool().await.unwrap();
    for (name, check) in [
        ("in its fencing wait", Duration::from_secs(30)),
        ("while leading", Duration::from_millis(100)),
    ] {
        let (stop_tx, stop_rx) = watch::channel(false);
        let (role_tx, mut role_rx) = watch::channel(Role::Candidate);
        let mut config = LeaderConfig::new();
        config.retry_interval = Duration::from_secs(60);
        config.check_interval = check;
        let instance = config.instance_id;
        let tasks: Vec<Arc<dyn MaintTask>> = vec![Arc::new(Recorder {
            who: 0,
            log: Arc::new(Mutex::new(Vec::new())),
        })];
        let handle = tokio::spawn(leader::run(
            config,
            pool.clone(),
            tasks,
            stop_rx,
            Some(role_tx),
        ));
        // It holds the lock (the row is written before the fencing wait).
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let holder: Option<uuid::Uuid> =
                sqlx::query_scalar("SELECT instance_id FROM awa.maintenance_leader")
                    .fetch_optional(&pool)
                    .await
                    .unwrap();
            if holder == Some(instance) {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "{name}: the candidate never took the lock"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        if check < Duration::from_secs(1) {
            assert!(
                wait_role(&mut role_rx, Role::Leader, Duration::from_secs(10)).await,
                "{name}: the candidate never started leading"
            );
        } else {
            assert_eq!(*role_rx.borrow(), Role::Candidate, "{name}: still fencing");
        }
        stop_tx.send(true).unwrap();
        let ended = tokio::time::timeout(Duration::from_secs(10), handle).await;
        assert!(
            ended.is_ok(),
            "{name}: the candidate was still running 10 s after it was told to stop"
        );
        ended.unwrap().unwrap().unwrap();
    }
}
