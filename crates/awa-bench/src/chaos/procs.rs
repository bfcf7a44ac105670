//! Real `awa worker run` processes: started, killed with SIGKILL, restarted,
//! and stopped with SIGTERM, each with its output in a file of the run
//! directory.

use super::error::ChaosError;
use nix::sys::signal::{self, Signal};
use nix::unistd::Pid;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// One `awa` child process. Killed with SIGKILL if dropped while running.
#[derive(Debug)]
pub struct AwaProc {
    child: Child,
}

impl AwaProc {
    pub fn spawn(bin: &Path, url: &str, args: &[String], log: &Path) -> Result<Self, ChaosError> {
        let out = File::options()
            .create(true)
            .append(true)
            .open(log)
            .map_err(|e| ChaosError::io(format!("opening {}", log.display()), e))?;
        let err = out
            .try_clone()
            .map_err(|e| ChaosError::io(format!("opening {}", log.display()), e))?;
        let child = Command::new(bin)
            .arg("--database-url")
            .arg(url)
            .args(args)
            .env_remove("DATABASE_URL")
            .env(
                "AWA_LOG",
                std::env::var("AWA_CHAOS_WORKER_LOG").unwrap_or("warn".into()),
            )
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            .spawn()
            .map_err(|e| ChaosError::io(format!("starting {}", bin.display()), e))?;
        Ok(Self { child })
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    pub fn exited(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(Some(_)))
    }

    pub fn kill9(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// SIGTERM: the graceful shutdown.
    pub fn terminate(&self) {
        if let Ok(pid) = i32::try_from(self.child.id()) {
            let _ = signal::kill(Pid::from_raw(pid), Signal::SIGTERM);
        }
    }

    /// Waits up to `grace` for the exit. False if it did not exit in time
    /// (it is then killed).
    pub fn wait_exit(&mut self, grace: Duration) -> bool {
        let deadline = Instant::now() + grace;
        while Instant::now() < deadline {
            if self.exited() {
                return true;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        self.kill9();
        false
    }
}

impl Drop for AwaProc {
    fn drop(&mut self) {
        if !self.exited() {
            self.kill9();
        }
    }
}

/// A worker slot: the process now in it and when a killed one comes back.
#[derive(Debug)]
struct Slot {
    proc: Option<AwaProc>,
    back_at: Option<Instant>,
}

/// The worker processes of a run. Each slot always has a process, except
/// for a short pause after it is killed; a process that exits by itself is
/// counted and replaced.
#[derive(Debug)]
pub struct Workers {
    bin: PathBuf,
    url: String,
    dir: PathBuf,
    args: Vec<String>,
    slots: Vec<Slot>,
    pub unexpected_exits: usize,
}

/// How long a killed worker stays down: long enough for its jobs to be
/// orphaned, short enough to keep the load served.
const DOWN_FOR: Duration = Duration::from_millis(500);

impl Workers {
    pub fn start(
        bin: &Path,
        url: &str,
        dir: &Path,
        args: Vec<String>,
        count: usize,
    ) -> Result<Self, ChaosError> {
        let mut workers = Self {
            bin: bin.to_owned(),
            url: url.to_owned(),
            dir: dir.to_owned(),
            args,
            slots: Vec::new(),
            unexpected_exits: 0,
        };
        for i in 0..count {
            let proc = workers.spawn(i)?;
            workers.slots.push(Slot {
                proc: Some(proc),
                back_at: None,
            });
        }
        Ok(workers)
    }

    /// The execution log of slot `i`: every process in the slot appends to it.
    pub fn exec_log(dir: &Path, i: usize) -> PathBuf {
        dir.join(format!("exec-{i}.log"))
    }

    fn spawn(&self, i: usize) -> Result<AwaProc, ChaosError> {
        let mut args = vec!["worker".to_owned(), "run".to_owned()];
        args.extend(self.args.iter().cloned());
        args.push("--handler".into());
        args.push(format!("chaos:{}", Self::exec_log(&self.dir, i).display()));
        AwaProc::spawn(
            &self.bin,
            &self.url,
            &args,
            &self.dir.join(format!("worker-{i}.log")),
        )
    }

    pub fn len(&self) -> usize {
        self.slots.len()
    }

    /// The slot whose running process has OS pid `pid`.
    pub fn slot_of(&self, pid: i64) -> Option<usize> {
        self.slots
            .iter()
            .position(|s| s.proc.as_ref().is_some_and(|p| i64::from(p.pid()) == pid))
    }

    pub fn is_up(&self, i: usize) -> bool {
        self.slots[i].proc.is_some()
    }

    /// SIGKILL the process in slot `i`; it is replaced after a short pause.
    pub fn kill9(&mut self, i: usize) -> Option<u32> {
        let slot = &mut self.slots[i];
        let mut proc = slot.proc.take()?;
        let pid = proc.pid();
        proc.kill9();
        slot.back_at = Some(Instant::now() + DOWN_FOR);
        Some(pid)
    }

    /// Restarts killed workers whose pause is over and replaces any that
    /// exited on their own.
    pub fn supervise(&mut self) -> Result<(), ChaosError> {
        for i in 0..self.slots.len() {
            let exited = self.slots[i].proc.as_mut().is_some_and(AwaProc::exited);
            if exited {
                self.unexpected_exits += 1;
                tracing::warn!(slot = i, log = %self.dir.join(format!("worker-{i}.log")).display(), "a worker exited by itself; starting another");
                self.slots[i].proc = None;
                self.slots[i].back_at = Some(Instant::now());
            }
            let due = self.slots[i].back_at.is_some_and(|t| Instant::now() >= t);
            if due {
                let proc = self.spawn(i)?;
                self.slots[i].proc = Some(proc);
                self.slots[i].back_at = None;
            }
        }
        Ok(())
    }

    /// SIGTERM every worker at once, then wait up to `grace` for them all.
    /// Returns how many did not exit in time.
    pub fn stop(mut self, grace: Duration) -> usize {
        for proc in self.slots.iter().filter_map(|s| s.proc.as_ref()) {
            proc.terminate();
        }
        let deadline = Instant::now() + grace;
        let mut stuck = 0;
        for slot in &mut self.slots {
            if let Some(proc) = slot.proc.as_mut() {
                let left = deadline.saturating_duration_since(Instant::now());
                if !proc.wait_exit(left) {
                    stuck += 1;
                }
            }
        }
        stuck
    }
}
