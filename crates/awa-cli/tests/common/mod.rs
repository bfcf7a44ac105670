//! Running the built `awa` binary against a test database.

#![allow(dead_code)] // each test binary uses its own subset

use awa_harness::TestDb;
use std::io::Read;
use std::process::{Child, Command, Stdio};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// A fresh, migrated database of its own.
pub async fn migrated_db() -> TestDb {
    awa_maint::migrated_test_db()
        .await
        .expect("a migrated test database")
}

#[derive(Debug)]
pub struct Run {
    pub code: Option<i32>,
    pub stdout: String,
    pub stderr: String,
}

impl Run {
    pub fn ok(&self) -> bool {
        self.code == Some(0)
    }

    /// Parsed stdout of a successful `--json` run.
    pub fn json(&self) -> serde_json::Value {
        assert!(self.ok(), "expected success, got {self:#?}");
        serde_json::from_str(&self.stdout)
            .unwrap_or_else(|e| panic!("stdout is not JSON ({e}): {self:#?}"))
    }

    /// Assert a bad command line: exit code 2 (as clap's own refusals) and
    /// a message that mentions `needle` (case-insensitive).
    pub fn usage(&self, needle: &str) -> &Self {
        assert_eq!(self.code, Some(2), "expected exit code 2: {self:#?}");
        self.refused(needle)
    }

    /// Assert a refusal whose message mentions `needle` (case-insensitive).
    pub fn refused(&self, needle: &str) -> &Self {
        assert!(
            !self.ok() && self.code.is_some(),
            "expected a non-zero exit, got {self:#?}"
        );
        assert!(
            self.stderr.to_lowercase().contains(&needle.to_lowercase()),
            "stderr should mention {needle:?}: {self:#?}"
        );
        self
    }
}

const TIMEOUT: Duration = Duration::from_secs(120);

/// `awa --database-url URL ARGS...`, killed if it runs past two minutes.
pub fn awa(url: &str, args: &[&str]) -> Run {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_awa"));
    cmd.arg("--database-url").arg(url).args(args);
    run(cmd)
}

/// `worker run --queue QUEUE --handler HANDLER` and then `extra`: the
/// arguments most worker tests start with.
pub fn worker_run<'a>(queue: &'a str, handler: &'a str, extra: &[&'a str]) -> Vec<&'a str> {
    let mut args = vec!["worker", "run", "--queue", queue, "--handler", handler];
    args.extend_from_slice(extra);
    args
}

/// `awa job enqueue --queue Q --kind K --count N --json`, which must succeed.
pub fn enqueue(url: &str, queue: &str, kind: &str, count: usize) -> serde_json::Value {
    let count = count.to_string();
    awa(
        url,
        &[
            "job", "enqueue", "--queue", queue, "--kind", kind, "--count", &count, "--json",
        ],
    )
    .json()
}

/// `awa ARGS...` with no database configured at all.
pub fn awa_bare(args: &[&str]) -> Run {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_awa"));
    cmd.args(args);
    run(cmd)
}

/// `awa ARGS...` with `vars` set in its environment and no
/// `--database-url` flag.
pub fn awa_env(vars: &[(&str, &str)], args: &[&str]) -> Run {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_awa"));
    cmd.envs(vars.iter().copied()).args(args);
    run(cmd)
}

fn run(cmd: Command) -> Run {
    Running::start(cmd).finish()
}

/// `awa --database-url URL ARGS...` with `input` on its stdin.
pub fn awa_stdin(url: &str, args: &[&str], input: Vec<u8>) -> Run {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_awa"));
    cmd.arg("--database-url").arg(url).args(args);
    Running::start_with(cmd, Some(input)).finish()
}

/// `awa` started in the background, e.g. to be sent a signal.
pub fn spawn_awa(url: &str, args: &[&str]) -> Running {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_awa"));
    cmd.arg("--database-url").arg(url).args(args);
    Running::start(cmd)
}

/// `awa ARGS...` started in the background with `vars` set in its
/// environment (and no `--database-url` unless ARGS has one).
pub fn spawn_awa_env(vars: &[(&str, &str)], args: &[&str]) -> Running {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_awa"));
    cmd.envs(vars.iter().copied()).args(args);
    Running::start(cmd)
}

pub struct Running {
    child: Child,
    args: Vec<String>,
    stdout: JoinHandle<String>,
    stderr: JoinHandle<String>,
}

impl Running {
    fn start(cmd: Command) -> Self {
        Self::start_with(cmd, None)
    }

    fn start_with(mut cmd: Command, input: Option<Vec<u8>>) -> Self {
        // The caller's environment never leaks in; what a test set does.
        for var in [
            "DATABASE_URL",
            "AWA_LOG",
            "RUST_LOG",
            "NO_COLOR",
            "PGPASSWORD",
            "TRACEPARENT",
            "TRACESTATE",
        ] {
            if !cmd.get_envs().any(|(k, _)| k == var) {
                cmd.env_remove(var);
            }
        }
        cmd.stdin(if input.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
        let args = cmd
            .get_args()
            .map(|a| a.to_string_lossy().into_owned())
            .collect();
        let mut child = cmd.spawn().expect("start the awa binary");
        if let Some(input) = input {
            let mut stdin = child.stdin.take().expect("stdin");
            std::thread::spawn(move || {
                use std::io::Write;
                let _ = stdin.write_all(&input); // dropped: EOF
            });
        }
        // Drain both pipes while waiting, so large output cannot stall the child.
        let drain = |mut pipe: Box<dyn Read + Send>| {
            std::thread::spawn(move || {
                let mut s = String::new();
                let _ = pipe.read_to_string(&mut s);
                s
            })
        };
        let stdout = drain(Box::new(child.stdout.take().expect("stdout")));
        let stderr = drain(Box::new(child.stderr.take().expect("stderr")));
        Self {
            child,
            args,
            stdout,
            stderr,
        }
    }

    /// The child's OS process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Kill the child outright (SIGKILL): no cleanup, no goodbye.
    pub fn kill9(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// Whether the child has exited.
    pub fn exited(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(Some(_)))
    }

    /// Send SIGTERM to this child (and only it).
    pub fn terminate(&self) {
        let status = Command::new("kill")
            .arg("-TERM")
            .arg(self.child.id().to_string())
            .status()
            .expect("run kill");
        assert!(status.success(), "kill -TERM failed");
    }

    /// Send SIGINT to this child (and only it): Ctrl-C.
    pub fn interrupt(&self) {
        let status = Command::new("kill")
            .arg("-INT")
            .arg(self.child.id().to_string())
            .status()
            .expect("run kill");
        assert!(status.success(), "kill -INT failed");
    }

    /// Wait for exit, killing the child if it runs past two minutes.
    pub fn finish(mut self) -> Run {
        let deadline = Instant::now() + TIMEOUT;
        let status = loop {
            if let Some(status) = self.child.try_wait().expect("wait for awa") {
                break status;
            }
            if Instant::now() > deadline {
                let _ = self.child.kill();
                let _ = self.child.wait();
                panic!(
                    "awa {:?} ran longer than {TIMEOUT:?}; stderr: {}",
                    self.args,
                    self.stderr.join().unwrap_or_default()
                );
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        Run {
            code: status.code(),
            stdout: self.stdout.join().expect("stdout reader"),
            stderr: self.stderr.join().expect("stderr reader"),
        }
    }
}

/// `awa ARGS...` against `url` every way that asks for more output
/// (`-v`, `--json`, `AWA_LOG=trace`, `RUST_LOG=debug`), with the URL passed
/// as `--database-url` and as `DATABASE_URL`; each run with a label saying
/// how it was made. For checking that a secret never shows up.
pub fn awa_every_way(url: &str, args: &[&str]) -> Vec<(String, Run)> {
    let mut started = Vec::new();
    for (flags, env) in [
        (vec![], vec![]),
        (vec!["-v"], vec![]),
        (vec!["--json"], vec![]),
        (
            vec!["-v", "--json"],
            vec![("AWA_LOG", "trace"), ("RUST_LOG", "trace")],
        ),
        (vec![], vec![("RUST_LOG", "debug")]),
    ] {
        for as_env in [false, true] {
            let mut cmd = Command::new(env!("CARGO_BIN_EXE_awa"));
            cmd.envs(env.iter().copied());
            if as_env {
                cmd.env("DATABASE_URL", url);
            } else {
                cmd.arg("--database-url").arg(url);
            }
            cmd.args(&flags).args(args);
            let how = if as_env {
                "DATABASE_URL"
            } else {
                "--database-url"
            };
            // All at once: they are independent, and this is many runs.
            started.push((format!("{how}, {flags:?}, {env:?}"), Running::start(cmd)));
        }
    }
    started
        .into_iter()
        .map(|(how, running)| (how, running.finish()))
        .collect()
}

/// Fails when `secret` is anywhere in the run's stdout or stderr.
pub fn assert_hidden(secret: &str, how: &str, run: &Run) {
    assert!(
        !run.stdout.contains(secret) && !run.stderr.contains(secret),
        "{how}: {secret:?} was printed: {run:#?}"
    );
}

/// `url` with its user replaced by `role` (password `pw`), for tests that
/// run the binary as a role they created.
pub fn as_role(url: &str, role: &str) -> String {
    let (scheme, rest) = url.split_once("://").expect("a URL with a scheme");
    let host = rest.rsplit_once('@').map_or(rest, |(_, h)| h);
    format!("{scheme}://{role}:pw@{host}")
}
