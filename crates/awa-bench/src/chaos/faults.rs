//! The faults a run injects, and how each one is done to the real thing.

use super::error::ChaosError;
use super::procs::Workers;
use super::servers::Servers;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Fault {
    /// SIGKILL a worker that is not the maintenance leader.
    KillWorker,
    /// SIGKILL the worker process holding maintenance leadership.
    KillLeader,
    /// `pg_ctl restart -m immediate` of the test cluster.
    RestartPostgres,
    /// SIGKILL of the primary's postmaster and `pg_ctl promote` of its
    /// synchronous standby (then a new standby for the next one).
    Failover,
}

impl Fault {
    pub fn name(self) -> &'static str {
        match self {
            Fault::KillWorker => "kill -9 worker",
            Fault::KillLeader => "kill -9 leader",
            Fault::RestartPostgres => "postgres immediate restart",
            Fault::Failover => "primary killed, standby promoted",
        }
    }
}

/// What came of one injection.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Injected {
    Done,
    Skipped(String),
}

/// How long to look for a leader to kill (one may just be starting).
const FIND_LEADER: Duration = Duration::from_secs(10);

pub async fn inject(
    fault: Fault,
    servers: &mut Servers,
    workers: &mut Workers,
    bin: &Path,
    url: &str,
    rotation: &mut usize,
) -> Result<Injected, ChaosError> {
    match fault {
        Fault::KillWorker => {
            let leader = leader_pid(bin, url).and_then(|pid| workers.slot_of(pid));
            let n = workers.len();
            let victim = (0..n)
                .map(|k| (*rotation + k) % n)
                .find(|&i| Some(i) != leader && workers.is_up(i));
            *rotation += 1;
            Ok(match victim.and_then(|i| workers.kill9(i)) {
                Some(pid) => {
                    tracing::info!(pid, "killed a worker with SIGKILL");
                    Injected::Done
                }
                None => Injected::Skipped("no running worker other than the leader".into()),
            })
        }
        Fault::KillLeader => {
            let deadline = Instant::now() + FIND_LEADER;
            loop {
                if let Some(i) = leader_pid(bin, url).and_then(|pid| workers.slot_of(pid))
                    && let Some(pid) = workers.kill9(i)
                {
                    tracing::info!(pid, "killed the maintenance leader with SIGKILL");
                    return Ok(Injected::Done);
                }
                if Instant::now() >= deadline {
                    return Ok(Injected::Skipped(format!(
                        "no worker held maintenance leadership for {} s",
                        FIND_LEADER.as_secs()
                    )));
                }
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        }
        Fault::RestartPostgres => {
            let server = &servers.primary;
            if !server.can_restart() {
                return Ok(Injected::Skipped(format!(
                    "the {:?} server is not ours to restart (unset DATABASE_URL to let the \
                     suite start its own cluster)",
                    server.kind()
                )));
            }
            server.restart_immediate().await?;
            tracing::info!("restarted postgres (immediate)");
            Ok(Injected::Done)
        }
        Fault::Failover => Ok(match servers.fail_over().await? {
            Some(()) => {
                tracing::info!("killed the primary and promoted its standby");
                Injected::Done
            }
            None => Injected::Skipped("no standby to promote".into()),
        }),
    }
}

/// The OS pid of the process holding maintenance leadership, as
/// `awa storage status` reports it; `None` when nobody holds it or the
/// database is unreachable right now.
fn leader_pid(bin: &Path, url: &str) -> Option<i64> {
    let out = Command::new(bin)
        .args(["--database-url", url, "--json", "storage", "status"])
        .env_remove("DATABASE_URL")
        .env("AWA_LOG", "error")
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .output()
        .ok()?;
    if !out.status.success() {
        return None;
    }
    let status: serde_json::Value = serde_json::from_slice(&out.stdout).ok()?;
    let leader = &status["maintenance"]["leader"];
    (leader["holding"] == true)
        .then(|| leader["pid"].as_i64())
        .flatten()
}
