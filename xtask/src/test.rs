//! `cargo xtask test`: the benchmark smoke run, the short chaos suite, the
//! whole suite (cargo-nextest when installed, else cargo test), the doc
//! tests, the Python suite and the release check; at the end, the time
//! each phase took.
//!
//! Two lines run side by side, because most of the suites wait on
//! PostgreSQL, on processes they started, or on sleeps, while compiling
//! keeps both cores busy:
//!
//! * here: the Rust suite (nextest builds every test binary, then runs
//!   eight tests at a time: `.config/nextest.toml`);
//! * beside it: the smoke run (`bench --quick`: only checks that every
//!   scenario runs and reports, never its speed), the chaos suite's short
//!   form, the doc tests, the Python client's wheel and its suite (pytest,
//!   `crates/awa-python/tests`) with `cargo doc` of the release check.
//!
//! The `awa` binary the chaos suite drives is built first, so that the
//! chaos suite does not wait on cargo's lock while the test binaries are
//! built; the doc tests, the wheel and `cargo doc` need the lock and get it
//! once nextest has built and runs its binaries (it needs the lock no
//! more). The release check's packaging comes last and reuses the wheel.
//!
//! The Rust and Python suites share one throwaway cluster (DATABASE_URL):
//! each test makes a database of its own there. The smoke run and the
//! chaos suite each get a private cluster (unless the caller set
//! DATABASE_URL, which they then use; chaos then skips the restart fault):
//! the chaos suite restarts its PostgreSQL, and the smoke run resets
//! cluster-wide statistics.

use crate::BoxError;
use awa_harness::PgServer;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The wall-clock time each phase took, and when it started, printed at
/// the end of the run, so a slow CI says where its time went. Shared by the
/// two lines of suites (see the module comment).
#[derive(Debug, Clone)]
struct Phases {
    began: Instant,
    done: Arc<Mutex<Vec<Phase>>>,
}

/// A phase's name, when it started (since the run began) and how long it took.
type Phase = (&'static str, Duration, Duration);

impl Phases {
    fn new() -> Self {
        Self {
            began: Instant::now(),
            done: Arc::default(),
        }
    }

    /// Runs `phase`, noting when it started and how long it took.
    fn time<T>(&self, name: &'static str, phase: impl FnOnce() -> T) -> T {
        let start = Instant::now();
        let out = phase();
        let (at, took) = (start - self.began, start.elapsed());
        self.done
            .lock()
            .expect("phases lock")
            .push((name, at, took));
        out
    }
}

impl Drop for Phases {
    /// The last clone (the run's own) prints the table.
    fn drop(&mut self) {
        if Arc::strong_count(&self.done) > 1 {
            return;
        }
        let mut done = self.done.lock().expect("phases lock");
        done.sort_by_key(|(_, at, _)| *at);
        println!("\nphase times (started at, took; phases overlap):");
        for (name, at, took) in done.iter() {
            println!(
                "  {name:<28} {:>7.1} s {:>7.1} s",
                at.as_secs_f64(),
                took.as_secs_f64()
            );
        }
        println!(
            "  {:<28} {:>17.1} s",
            "wall clock",
            self.began.elapsed().as_secs_f64()
        );
    }
}

pub async fn run(args: Vec<String>) -> Result<ExitCode, BoxError> {
    let phases = Phases::new();
    let user_url = std::env::var("DATABASE_URL")
        .ok()
        .filter(|u| !u.trim().is_empty());
    let server = PgServer::shared().await?;
    let url = server.url().to_string();

    let awa = match phases.time("build awa (for chaos)", crate::chaos::awa_binary) {
        Ok(awa) => awa,
        Err(err) => {
            eprintln!("error: the chaos suite's awa binary: {err}");
            return Ok(ExitCode::FAILURE);
        }
    };
    let beside = std::thread::spawn({
        let phases = phases.clone();
        let url = url.clone();
        move || beside(&phases, user_url.as_deref(), &awa, &url)
    });
    let rust = rust_suite(&phases, &args, &url);
    let beside = beside
        .join()
        .map_err(|_| "the side-by-side suites panicked")?;
    drop(server);
    let release = phases.time("release check (packages)", || {
        crate::release::check(
            beside.docs_ok,
            beside
                .wheel
                .as_ref()
                .map(|(venv, w)| (venv.as_path(), w.as_path())),
        )
    });
    Ok(if rust && beside.ok && release {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

/// What the suites beside the Rust suite found.
#[derive(Debug)]
struct Beside {
    /// Smoke run, chaos, doc tests and pytest all passed.
    ok: bool,
    /// `cargo doc` was warning-free.
    docs_ok: bool,
    /// The venv and the wheel built in it.
    wheel: Option<(PathBuf, PathBuf)>,
}

/// The suites that run beside the Rust suite, one after the other (see the
/// module comment). Every failure is said on stderr; each suite runs even
/// when an earlier one failed, so one run reports them all.
fn beside(phases: &Phases, user_url: Option<&str>, awa: &Path, url: &str) -> Beside {
    let exe = std::env::current_exe();
    let private = |cmd: &mut Command| {
        // Without the shared cluster's URL: see the module comment.
        match user_url {
            Some(url) => cmd.env("DATABASE_URL", url),
            None => cmd.env_remove("DATABASE_URL"),
        };
    };
    let mut ok = true;
    // The JSON document goes nowhere: the smoke run checks that every
    // scenario runs and reports, not what it measures.
    let smoke = phases.time("bench smoke (--quick)", || {
        let mut cmd = Command::new(exe.as_ref().ok()?);
        cmd.args(["bench", "--quick", "--json"])
            .stdout(Stdio::null());
        private(&mut cmd);
        cmd.status().ok()
    });
    if smoke.is_some_and(|s| s.success()) {
        println!("benchmark smoke run: every scenario ran");
    } else {
        eprintln!("error: the benchmark smoke run (cargo xtask bench --quick) failed");
        ok = false;
    }
    let chaos = phases.time("chaos (short form)", || {
        let mut cmd = Command::new(exe.as_ref().ok()?);
        cmd.arg("chaos").arg("--awa").arg(awa);
        private(&mut cmd);
        cmd.status().ok()
    });
    if !chaos.is_some_and(|s| s.success()) {
        eprintln!("error: the chaos suite (cargo xtask chaos) failed");
        ok = false;
    }
    // cargo-nextest does not run doctests: cargo test does (with plain
    // cargo test, the Rust suite ran them already).
    if nextest_installed() {
        let docs = phases.time("doc tests", || {
            Command::new(cargo())
                .args(["test", "--workspace", "--doc"])
                .env("DATABASE_URL", url)
                .status()
        });
        if !docs.is_ok_and(|s| s.success()) {
            eprintln!("error: the doc tests (cargo test --workspace --doc) failed");
            ok = false;
        }
    }
    let wheel = phases.time("python wheel", python_build);
    let docs = crate::release::DocCheck::start();
    ok &= phases.time("pytest (beside cargo doc)", || {
        wheel.as_ref().is_some_and(|(venv, _)| pytest(venv, url))
    });
    let docs_ok = phases.time("cargo doc (rest of)", || match docs {
        Ok(docs) => docs.finish(),
        Err(err) => {
            eprintln!("error: release check: {err}");
            false
        }
    });
    Beside { ok, docs_ok, wheel }
}

fn cargo() -> String {
    std::env::var("CARGO").unwrap_or_else(|_| "cargo".into())
}

fn nextest_installed() -> bool {
    Command::new(cargo())
        .args(["nextest", "--version"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// The Rust suite on the shared cluster: cargo-nextest when installed (it
/// runs tests side by side), else cargo test (doctests included). Either
/// way every failure is reported, not only the first failing binary's.
/// Building and running are two phases. True when it passed.
fn rust_suite(phases: &Phases, args: &[String], url: &str) -> bool {
    let nextest = nextest_installed();
    let suite = |build_only: bool| {
        let mut cmd = Command::new(cargo());
        if nextest {
            cmd.args(["nextest", "run", "--workspace"]);
        } else {
            cmd.args(["test", "--workspace"]);
        }
        // nextest refuses --no-fail-fast beside --no-run (there is nothing
        // to fail fast in a build).
        cmd.arg(if build_only {
            "--no-run"
        } else {
            "--no-fail-fast"
        });
        cmd.args(args).env("DATABASE_URL", url).status()
    };
    let built = phases.time("rust suite (build)", || suite(true));
    let status = match built {
        Ok(s) if s.success() => phases.time("rust suite (run)", || suite(false)),
        other => other,
    };
    if !status.is_ok_and(|s| s.success()) {
        eprintln!("error: the Rust suite failed");
        return false;
    }
    true
}

/// The Python client's environment: `target/py-venv` with the wheel built
/// and installed. The venv and the wheel's path; None on failure, said on
/// stderr.
fn python_build() -> Option<(PathBuf, PathBuf)> {
    let venv = match crate::python::ensure_venv() {
        Ok(venv) => venv,
        Err(err) => {
            eprintln!("error: the Python suite could not set up its environment: {err}");
            return None;
        }
    };
    match crate::python::install_wheel(&venv, false) {
        Ok(wheel) => Some((venv, wheel)),
        Err(err) => {
            eprintln!("error: the Python suite could not build the awa wheel: {err}");
            None
        }
    }
}

/// The Python client's suite (`crates/awa-python/tests`): pytest in
/// `venv` against the shared cluster (each test module makes a database
/// of its own there). False on any failure, said on stderr.
fn pytest(venv: &Path, url: &str) -> bool {
    let mut pytest = Command::new(crate::python::python(venv));
    pytest
        .args(["-m", "pytest", "-q", "-p", "no:cacheprovider"])
        .arg(crate::python::crate_dir().join("tests"))
        .env("DATABASE_URL", url);
    // The interop tests use the `awa` binary the Rust tests built, when
    // there is one (else `python -m awa`, the same CLI).
    let binary = crate::python::target_dir().join("debug/awa");
    if binary.exists() {
        pytest.env("AWA_BIN", binary);
    }
    let status = pytest.status();
    match status {
        Ok(s) if s.success() => true,
        Ok(s) => {
            eprintln!("error: the Python suite (pytest) failed ({s})");
            false
        }
        Err(err) => {
            eprintln!("error: could not start pytest: {err}");
            false
        }
    }
}
