//! Temporary clusters run from local PostgreSQL server binaries.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Read as _, Seek as _, SeekFrom};
use std::os::unix::fs::MetadataExt as _;
use std::os::unix::process::CommandExt as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant, SystemTime};

use nix::errno::Errno;
use nix::sys::signal::{self, Signal};
use nix::unistd::{Pid, User};

use crate::bins::is_executable;
use crate::sql::{self};
use crate::{HarnessError, keeper, pdeathsig};

const DIR_PREFIX: &str = "awa-pg-";
const READY_TIMEOUT: Duration = Duration::from_secs(30);
const STOP_TIMEOUT: Duration = Duration::from_secs(5);
const PORT_ATTEMPTS: u32 = 5;

/// The unprivileged account the server runs as when we are root, because
/// postgres refuses to run as root.
#[derive(Debug, Clone)]
struct RunAs {
    name: String,
    uid: u32,
    gid: u32,
}

fn run_as() -> Result<Option<RunAs>, HarnessError> {
    if !nix::unistd::geteuid().is_root() {
        return Ok(None);
    }
    for name in ["postgres", "nobody"] {
        if let Ok(Some(user)) = User::from_name(name) {
            return Ok(Some(RunAs {
                name: name.to_owned(),
                uid: user.uid.as_raw(),
                gid: user.gid.as_raw(),
            }));
        }
    }
    Err(HarnessError::ClusterStart(
        "running as root, and there is neither a `postgres` nor a `nobody` user to run the \
         server as (PostgreSQL refuses to run as root)"
            .into(),
    ))
}

/// Where the cluster directory goes: the usual temp dir, unless the server's
/// account could not reach it (e.g. TMPDIR under root's 0700 home).
fn temp_base(run_as: Option<&RunAs>) -> Result<PathBuf, HarnessError> {
    let base = std::env::temp_dir();
    let Some(user) = run_as else {
        return Ok(base);
    };
    for candidate in [base, PathBuf::from("/tmp")] {
        if traversable_by(&candidate, user) {
            return Ok(candidate);
        }
    }
    Err(HarnessError::ClusterStart(format!(
        "neither {} nor /tmp can be reached by the `{}` user the server must run as; \
         point TMPDIR at a directory every user can traverse",
        std::env::temp_dir().display(),
        user.name
    )))
}

fn traversable_by(path: &Path, user: &RunAs) -> bool {
    let Ok(path) = fs::canonicalize(path) else {
        return false;
    };
    path.ancestors().all(|dir| {
        fs::metadata(dir).is_ok_and(|m| {
            let mode = m.mode();
            if m.uid() == user.uid {
                mode & 0o100 != 0
            } else if m.gid() == user.gid {
                mode & 0o010 != 0
            } else {
                mode & 0o001 != 0
            }
        })
    })
}

fn chown_recursive(path: &Path, user: &RunAs) -> io::Result<()> {
    std::os::unix::fs::lchown(path, Some(user.uid), Some(user.gid))?;
    if fs::symlink_metadata(path)?.is_dir() {
        for entry in fs::read_dir(path)? {
            chown_recursive(&entry?.path(), user)?;
        }
    }
    Ok(())
}

/// Names the process a cluster directory belongs to. The server's own
/// `postmaster.pid` is not enough: a server stopped by the parent-death
/// signal removes it on the way out, leaving a directory nobody owns.
const OWNER_FILE: &str = "awa-owner.pid";

/// Removes cluster directories left behind by processes that died without
/// cleaning up (killed, or on platforms without a parent-death signal).
/// Best effort: anything unexpected is left alone.
fn sweep_stale(base: &Path) {
    let Ok(entries) = fs::read_dir(base) else {
        return;
    };
    for entry in entries.flatten() {
        let is_ours = entry
            .file_name()
            .to_str()
            .is_some_and(|n| n.starts_with(DIR_PREFIX));
        if !is_ours || !entry.file_type().is_ok_and(|t| t.is_dir()) {
            continue;
        }
        let dir = entry.path();
        // PIDs are reused (pid_max is often 32768 and tests spawn many
        // processes), so a live PID must also be the same process: the
        // owner by its start time, the server by its data directory.
        let owner_alive = read_owner(&dir.join(OWNER_FILE))
            .map(|(pid, started)| process_alive(pid) && started == start_time(pid));
        let data = dir.join("data");
        let server_alive = read_pid(&data.join("postmaster.pid"))
            .map(|pid| process_alive(pid) && runs_in(pid, &data));
        let stale = match (owner_alive, server_alive) {
            (_, Some(true)) => false,
            (Some(owner_alive), _) => !owner_alive,
            (None, Some(false)) => true,
            // No owner recorded yet and no server: a start in progress if
            // young, debris if old.
            (None, None) => entry
                .metadata()
                .and_then(|m| m.modified())
                .ok()
                .and_then(|t| SystemTime::now().duration_since(t).ok())
                .is_some_and(|age| age > Duration::from_secs(3600)),
        };
        if stale {
            match fs::remove_dir_all(&dir) {
                Ok(()) => {
                    tracing::debug!(dir = %dir.display(), "removed a stale cluster directory")
                }
                Err(e) => {
                    tracing::debug!(dir = %dir.display(), error = %e, "could not remove a stale cluster directory");
                }
            }
        }
    }
}

/// The owner file: our pid, then (where the platform tells) our start time.
fn read_owner(path: &Path) -> Option<(i32, Option<u64>)> {
    let text = fs::read_to_string(path).ok()?;
    let mut lines = text.lines();
    let pid = lines.next()?.trim().parse().ok()?;
    let started = lines.next().and_then(|l| l.trim().parse().ok());
    Some((pid, started))
}

/// A process's start time in clock ticks since boot (Linux, field 22 of
/// /proc/PID/stat); None where unknown. Together with the pid it names one
/// process for good.
fn start_time(pid: i32) -> Option<u64> {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) is in parentheses and may hold spaces.
    let rest = &stat[stat.rfind(')')? + 1..];
    rest.split_whitespace().nth(19)?.parse().ok()
}

/// Whether process `pid` runs with `data_dir` on its command line (a
/// postmaster started by us does: `postgres -D <dir>`). Where /proc is not
/// there to ask, assume it does.
fn runs_in(pid: i32, data_dir: &Path) -> bool {
    match fs::read(format!("/proc/{pid}/cmdline")) {
        Ok(cmdline) => {
            let want = data_dir.as_os_str().as_encoded_bytes();
            cmdline.windows(want.len().max(1)).any(|w| w == want)
        }
        Err(_) => !Path::new("/proc/self").exists(),
    }
}

fn read_pid(path: &Path) -> Option<i32> {
    fs::read_to_string(path)
        .ok()?
        .lines()
        .next()?
        .trim()
        .parse()
        .ok()
        .filter(|&pid| pid > 0)
}

fn process_alive(pid: i32) -> bool {
    // EPERM means it exists but belongs to someone else.
    !matches!(signal::kill(Pid::from_raw(pid), None), Err(Errno::ESRCH))
}

fn apply_user(cmd: &mut Command, run_as: Option<&RunAs>) {
    if let Some(user) = run_as {
        cmd.uid(user.uid).gid(user.gid);
    }
}

/// A temporary cluster: a `postgres` child process and the directory holding
/// its data and log. Stopping the process and deleting the directory happen
/// on drop.
#[derive(Debug)]
pub(crate) struct LocalCluster {
    /// Behind a lock so that a shared handle can restart the server.
    child: std::sync::Mutex<Option<Child>>,
    port: u16,
    bin_dir: PathBuf,
    data_dir: PathBuf,
    log_path: PathBuf,
    // Last, so the directory outlives everything that refers into it.
    dir: Option<tempfile::TempDir>,
}

enum Startup {
    PortInUse,
    Failed(String),
}

impl LocalCluster {
    pub(crate) async fn start(
        bin_dir: &Path,
        settings: &[(String, String)],
    ) -> Result<Self, HarnessError> {
        let run_as = run_as()?;
        let prepared = {
            let run_as = run_as.clone();
            tokio::task::spawn_blocking(move || prepare_dir(run_as.as_ref()))
                .await
                .map_err(|e| {
                    HarnessError::ClusterStart(format!("preparing the directory: {e}"))
                })??
        };
        let mut cluster = LocalCluster {
            child: std::sync::Mutex::new(None),
            port: 0,
            bin_dir: bin_dir.to_owned(),
            data_dir: prepared.path().join("data"),
            log_path: prepared.path().join("postgres.log"),
            dir: Some(prepared),
        };
        cluster.initdb(run_as.as_ref()).await?;
        cluster.launch(settings, run_as.as_ref()).await?;
        tracing::info!(
            port = cluster.port,
            bin_dir = %cluster.bin_dir.display(),
            data_dir = %cluster.data_dir.display(),
            run_as = run_as.as_ref().map(|u| u.name.as_str()),
            "started a temporary PostgreSQL cluster"
        );
        Ok(cluster)
    }

    /// A streaming standby of `primary`, made the way an operator makes
    /// one: `pg_basebackup -R` (a copy of the running primary plus
    /// `standby.signal` and `primary_conninfo`), then a postmaster on
    /// `port` (a free one when `None`; a fixed port may be the port of a
    /// dead primary, so a host list in a URL stays valid). Returns once it
    /// accepts (read-only) connections.
    pub(crate) async fn start_standby(
        primary: &LocalCluster,
        settings: &[(String, String)],
        port: Option<u16>,
    ) -> Result<Self, HarnessError> {
        let run_as = run_as()?;
        let prepared = {
            let run_as = run_as.clone();
            tokio::task::spawn_blocking(move || prepare_dir(run_as.as_ref()))
                .await
                .map_err(|e| {
                    HarnessError::ClusterStart(format!("preparing the directory: {e}"))
                })??
        };
        let mut cluster = LocalCluster {
            child: std::sync::Mutex::new(None),
            port: 0,
            bin_dir: primary.bin_dir.clone(),
            data_dir: prepared.path().join("data"),
            log_path: prepared.path().join("postgres.log"),
            dir: Some(prepared),
        };
        let mut cmd = Command::new(cluster.tool("pg_basebackup"));
        cmd.arg("-D")
            .arg(&cluster.data_dir)
            .args(["-h", "127.0.0.1", "-p"])
            .arg(primary.port.to_string())
            // -R: standby.signal and primary_conninfo; -X stream: the WAL
            // written meanwhile comes along; -c fast: no wait for the next
            // checkpoint.
            .args(["-U", "postgres", "-w", "-R", "-X", "stream", "-c", "fast"])
            .arg("--no-sync");
        cluster
            .run_tool(cmd, run_as.as_ref(), "pg_basebackup")
            .await?;
        match port {
            Some(port) => cluster.launch_on(port, settings, run_as.as_ref()).await?,
            None => cluster.launch(settings, run_as.as_ref()).await?,
        }
        tracing::info!(
            port = cluster.port,
            primary_port = primary.port,
            data_dir = %cluster.data_dir.display(),
            "started a streaming standby"
        );
        Ok(cluster)
    }

    pub(crate) fn port(&self) -> u16 {
        self.port
    }

    /// A client tool of the same installation as `postgres`: beside it in
    /// the binary directory, else beside the file it links to (a PATH
    /// directory may hold links to only some of the binaries, as Debian's
    /// /usr/local/bin can), else on PATH.
    fn tool(&self, name: &str) -> PathBuf {
        let beside = self.bin_dir.join(name);
        if is_executable(&beside) {
            return beside;
        }
        fs::canonicalize(self.bin_dir.join("postgres"))
            .ok()
            .and_then(|real| Some(real.parent()?.join(name)))
            .filter(|p| is_executable(p))
            .unwrap_or_else(|| PathBuf::from(name))
    }

    /// Runs one of the server's tools (as the server's account) to the end;
    /// its output goes into the error when it fails.
    async fn run_tool(
        &self,
        mut cmd: Command,
        run_as: Option<&RunAs>,
        what: &str,
    ) -> Result<(), HarnessError> {
        cmd.current_dir(self.dir())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        apply_user(&mut cmd, run_as);
        pdeathsig::die_with_parent(&mut cmd);
        let child = keeper::spawn(cmd)
            .await
            .map_err(|e| HarnessError::io(format!("running {what}"), e))?;
        let output = tokio::task::spawn_blocking(move || child.wait_with_output())
            .await
            .map_err(|e| HarnessError::ClusterStart(format!("waiting for {what}: {e}")))?
            .map_err(|e| HarnessError::io(format!("waiting for {what}"), e))?;
        if !output.status.success() {
            return Err(HarnessError::ClusterStart(format!(
                "{what} failed ({}):\n{}{}",
                output.status,
                String::from_utf8_lossy(&output.stderr),
                String::from_utf8_lossy(&output.stdout),
            )));
        }
        Ok(())
    }

    /// SIGKILL of the postmaster alone, as when its machine or container
    /// dies: nothing is flushed, no shutdown runs, and the cluster stays
    /// down. Its orphaned backends notice the postmaster's death and exit
    /// without acknowledging anything more (a commit waiting for a
    /// synchronous standby is never acknowledged).
    pub(crate) fn kill(&self) {
        let Some(mut child) = self.child().take() else {
            return;
        };
        let _ = child.kill();
        let _ = child.wait();
        tracing::info!(port = self.port, "killed the postmaster (SIGKILL)");
    }

    /// `pg_ctl promote`: a standby leaves recovery and becomes a primary on
    /// a new timeline. Returns once it accepts writes.
    pub(crate) async fn promote(&self) -> Result<(), HarnessError> {
        let run_as = run_as()?;
        let mut cmd = Command::new(self.tool("pg_ctl"));
        cmd.arg("promote")
            .arg("-D")
            .arg(&self.data_dir)
            .args(["-w", "-t"])
            .arg(READY_TIMEOUT.as_secs().to_string());
        self.run_tool(cmd, run_as.as_ref(), "pg_ctl promote")
            .await?;
        tracing::info!(port = self.port, "promoted the standby");
        Ok(())
    }

    pub(crate) fn url(&self) -> String {
        format!("postgres://postgres@127.0.0.1:{}/postgres", self.port)
    }

    pub(crate) fn log_path(&self) -> &Path {
        &self.log_path
    }

    fn dir(&self) -> &Path {
        self.dir
            .as_ref()
            .map_or_else(|| Path::new("/"), |d| d.path())
    }

    async fn initdb(&mut self, run_as: Option<&RunAs>) -> Result<(), HarnessError> {
        let initdb = self.bin_dir.join("initdb");
        let mut cmd = Command::new(&initdb);
        cmd.arg("-D")
            .arg(&self.data_dir)
            .args(["-A", "trust", "-U", "postgres", "-E", "UTF8"])
            .args(["--locale=C", "--no-sync", "--no-instructions"]);
        self.run_tool(cmd, run_as, &initdb.display().to_string())
            .await
    }

    async fn launch(
        &mut self,
        settings: &[(String, String)],
        run_as: Option<&RunAs>,
    ) -> Result<(), HarnessError> {
        for attempt in 1..=PORT_ATTEMPTS {
            let port = free_port()?;
            let log_start = self.spawn_postgres(port, settings, run_as).await?;
            self.port = port;

            match self.wait_ready(log_start).await {
                Ok(()) => return Ok(()),
                Err(Startup::PortInUse) if attempt < PORT_ATTEMPTS => {
                    tracing::debug!(port, "port taken before postgres could bind it; retrying");
                    self.stop();
                }
                Err(Startup::PortInUse) => {
                    return Err(HarnessError::ClusterStart(format!(
                        "every port tried was already in use; see {}",
                        self.log_path.display()
                    )));
                }
                Err(Startup::Failed(message)) => {
                    self.stop();
                    return Err(HarnessError::ClusterStart(message));
                }
            }
        }
        unreachable!("the last attempt returns")
    }

    /// Starts the server on exactly `port`, which must be free.
    async fn launch_on(
        &mut self,
        port: u16,
        settings: &[(String, String)],
        run_as: Option<&RunAs>,
    ) -> Result<(), HarnessError> {
        let log_start = self.spawn_postgres(port, settings, run_as).await?;
        self.port = port;
        match self.wait_ready(log_start).await {
            Ok(()) => Ok(()),
            Err(Startup::PortInUse) => {
                self.stop();
                Err(HarnessError::ClusterStart(format!(
                    "port {port} is in use by another process"
                )))
            }
            Err(Startup::Failed(message)) => {
                self.stop();
                Err(HarnessError::ClusterStart(message))
            }
        }
    }

    /// What `pg_ctl restart -m immediate` does: SIGQUIT to the postmaster
    /// (every backend dies at once, nothing is flushed or checkpointed),
    /// then a fresh postmaster on the same port and data directory, which
    /// runs crash recovery. Returns once it accepts connections again.
    pub(crate) async fn restart_immediate(
        &self,
        settings: &[(String, String)],
    ) -> Result<(), HarnessError> {
        let run_as = run_as()?;
        self.stop();
        let log_start = self
            .spawn_postgres(self.port, settings, run_as.as_ref())
            .await?;
        match self.wait_ready(log_start).await {
            Ok(()) => {
                tracing::info!(
                    port = self.port,
                    "restarted the temporary cluster (immediate)"
                );
                Ok(())
            }
            Err(Startup::PortInUse) => {
                self.stop();
                Err(HarnessError::ClusterStart(format!(
                    "port {} was taken by someone else while the cluster restarted",
                    self.port
                )))
            }
            Err(Startup::Failed(message)) => {
                self.stop();
                Err(HarnessError::ClusterStart(message))
            }
        }
    }

    /// Starts `postgres` on `port` and records it as our child. Returns the
    /// log offset its output starts at.
    async fn spawn_postgres(
        &self,
        port: u16,
        settings: &[(String, String)],
        run_as: Option<&RunAs>,
    ) -> Result<u64, HarnessError> {
        // Unix sockets are a convenience for psql; a path too long for
        // sun_path or one the list syntax would misread just turns them off.
        let socket_dir = self.dir().to_str().unwrap_or("").to_owned();
        let socket_dir =
            if socket_dir.len() > 80 || socket_dir.contains([',', ' ', '"', '\'', '\\']) {
                String::new()
            } else {
                socket_dir
            };
        let log_start = fs::metadata(&self.log_path).map_or(0, |m| m.len());
        let log = OpenOptions::new()
            .append(true)
            .open(&self.log_path)
            .map_err(|e| HarnessError::io("opening the server log", e))?;
        let log_err = log
            .try_clone()
            .map_err(|e| HarnessError::io("opening the server log", e))?;

        let mut cmd = Command::new(self.bin_dir.join("postgres"));
        cmd.arg("-D")
            .arg(&self.data_dir)
            .arg("-p")
            .arg(port.to_string())
            .args(["-c", "listen_addresses=127.0.0.1"])
            .arg("-c")
            .arg(format!("unix_socket_directories={socket_dir}"));
        for (name, value) in settings {
            cmd.arg("-c").arg(format!("{name}={value}"));
        }
        cmd.current_dir(self.dir())
            .stdin(Stdio::null())
            .stdout(log)
            .stderr(log_err)
            // Keep terminal signals (Ctrl-C) meant for us away from the
            // server; it goes when we go, via the death signal or drop.
            .process_group(0);
        apply_user(&mut cmd, run_as);
        pdeathsig::die_with_parent(&mut cmd);

        let child = keeper::spawn(cmd)
            .await
            .map_err(|e| HarnessError::io("starting postgres", e))?;
        *self.child() = Some(child);
        Ok(log_start)
    }

    fn child(&self) -> std::sync::MutexGuard<'_, Option<Child>> {
        // A panic while holding the guard leaves nothing half-done.
        self.child
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// How the child ended, if it has; `None` while it runs.
    fn exit_status(&self) -> Option<String> {
        let mut child = self.child();
        let exited = match child.as_mut().map(Child::try_wait) {
            Some(Ok(Some(status))) => Some(status.to_string()),
            Some(Ok(None)) => None,
            Some(Err(e)) => Some(format!("unknown status ({e})")),
            None => Some("unknown status".to_owned()),
        };
        if exited.is_some() {
            *child = None;
        }
        exited
    }

    async fn wait_ready(&self, log_start: u64) -> Result<(), Startup> {
        let url = self.url();
        let deadline = Instant::now() + READY_TIMEOUT;
        loop {
            if let Some(status) = self.exit_status() {
                let log = read_log_from(&self.log_path, log_start);
                if log.contains("Address already in use") {
                    return Err(Startup::PortInUse);
                }
                return Err(Startup::Failed(format!(
                    "postgres exited during startup with {status}; the end of {} reads:\n{}",
                    self.log_path.display(),
                    tail(&log, 30)
                )));
            }

            let last_error = match sql::connect(&url, Duration::from_secs(2)).await {
                Ok(conn) => {
                    crate::testdb::close_quietly(conn).await;
                    return Ok(());
                }
                Err(e) => e,
            };
            if Instant::now() >= deadline {
                let log = read_log_from(&self.log_path, log_start);
                return Err(Startup::Failed(format!(
                    "postgres did not accept connections on port {} within {} s \
                     (last error: {last_error}); the end of {} reads:\n{}",
                    self.port,
                    READY_TIMEOUT.as_secs(),
                    self.log_path.display(),
                    tail(&log, 30)
                )));
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Immediate shutdown (SIGQUIT): the data is about to be deleted, so
    /// there is nothing worth a shutdown checkpoint. SIGKILL if it lingers.
    fn stop(&self) {
        let Some(mut child) = self.child().take() else {
            return;
        };
        if !matches!(child.try_wait(), Ok(None)) {
            return;
        }
        if let Ok(pid) = i32::try_from(child.id()) {
            let _ = signal::kill(Pid::from_raw(pid), Signal::SIGQUIT);
        }
        let deadline = Instant::now() + STOP_TIMEOUT;
        loop {
            match child.try_wait() {
                Ok(None) if Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(10));
                }
                Ok(Some(_)) => return,
                _ => {
                    tracing::warn!(port = self.port, "postgres ignored SIGQUIT; killing it");
                    let _ = child.kill();
                    let _ = child.wait();
                    return;
                }
            }
        }
    }
}

impl Drop for LocalCluster {
    fn drop(&mut self) {
        self.stop();
        if let Some(dir) = self.dir.take() {
            let path = dir.path().to_owned();
            match dir.close() {
                Ok(()) => tracing::debug!(dir = %path.display(), "removed the temporary cluster"),
                Err(e) => {
                    tracing::warn!(dir = %path.display(), error = %e, "could not remove the temporary cluster directory");
                }
            }
        }
    }
}

fn prepare_dir(run_as: Option<&RunAs>) -> Result<tempfile::TempDir, HarnessError> {
    let base = temp_base(run_as)?;
    sweep_stale(&base);
    let dir = tempfile::Builder::new()
        .prefix(DIR_PREFIX)
        .tempdir_in(&base)
        .map_err(|e| HarnessError::io(format!("creating a directory in {}", base.display()), e))?;
    fs::write(
        dir.path().join(OWNER_FILE),
        match start_time(std::process::id() as i32) {
            Some(started) => format!("{}\n{started}\n", std::process::id()),
            None => format!("{}\n", std::process::id()),
        },
    )
    .map_err(|e| HarnessError::io("recording the cluster's owner", e))?;
    File::create(dir.path().join("postgres.log"))
        .map_err(|e| HarnessError::io("creating the server log", e))?;
    if let Some(user) = run_as {
        chown_recursive(dir.path(), user).map_err(|e| {
            HarnessError::io(
                format!(
                    "handing {} to the `{}` user",
                    dir.path().display(),
                    user.name
                ),
                e,
            )
        })?;
    }
    Ok(dir)
}

fn free_port() -> Result<u16, HarnessError> {
    // The port is free when we look; someone may take it before postgres
    // binds it, which `launch` handles by trying again.
    std::net::TcpListener::bind(("127.0.0.1", 0))
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .map_err(|e| HarnessError::io("finding a free port", e))
}

fn read_log_from(path: &Path, offset: u64) -> String {
    let mut text = String::new();
    if let Ok(mut file) = File::open(path) {
        let _ = file.seek(SeekFrom::Start(offset));
        let mut bytes = Vec::new();
        let _ = file.read_to_end(&mut bytes);
        text = String::from_utf8_lossy(&bytes).into_owned();
    }
    text
}

fn tail(text: &str, lines: usize) -> String {
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tail_keeps_last_lines() {
        assert_eq!(tail("a\nb\nc", 2), "b\nc");
        assert_eq!(tail("a", 5), "a");
    }
}
