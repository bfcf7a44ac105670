//! `cargo xtask test`: the benchmark smoke run, the short chaos suite, the
//! whole suite (cargo-nextest when installed, else cargo test), on one
//! throwaway cluster, then the Python suite and the release check.
//!
//! Without this, each test binary starts its own cluster (the harness does
//! that by itself); sharing one through DATABASE_URL saves a cluster start
//! per binary. Per-test databases keep tests isolated either way. The smoke
//! run (`bench --quick`) goes first so the test summary is the last thing
//! printed; it only checks that every scenario runs, never its speed.
//!
//! The Python client's suite (pytest, `crates/awa-python/tests`) runs
//! next, on the same cluster, after its wheel is built into a virtual
//! environment under the target directory (`python_suite`).
//!
//! The release check (`cargo xtask release-check`: packages, licenses,
//! docs, the wheel's metadata) comes last and reuses that wheel; its
//! `cargo doc` runs beside pytest, which mostly waits on PostgreSQL.
//!
//! The chaos suite (`cargo xtask chaos`, short form) restarts PostgreSQL
//! under load, so it never gets the shared cluster: it starts its own,
//! unless the caller set DATABASE_URL, in which case it uses that and skips
//! the restart fault.

use crate::BoxError;
use awa_harness::PgServer;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

pub async fn run(args: Vec<String>) -> Result<ExitCode, BoxError> {
    let user_url = std::env::var("DATABASE_URL")
        .ok()
        .filter(|u| !u.trim().is_empty());
    let server = PgServer::shared().await?;
    // The JSON document goes nowhere: the smoke run checks that every
    // scenario runs and reports, not what it measures.
    let smoke = Command::new(std::env::current_exe()?)
        .args(["bench", "--quick", "--json"])
        .env("DATABASE_URL", server.url())
        .stdout(std::process::Stdio::null())
        .status()?;
    if !smoke.success() {
        eprintln!("error: the benchmark smoke run (cargo xtask bench --quick) failed");
        return Ok(ExitCode::FAILURE);
    }
    println!("benchmark smoke run: every scenario ran");

    // Without the shared cluster's URL: see the module comment.
    let mut chaos = Command::new(std::env::current_exe()?);
    chaos.arg("chaos");
    if let Some(url) = &user_url {
        chaos.env("DATABASE_URL", url);
    } else {
        chaos.env_remove("DATABASE_URL");
    }
    if !chaos.status()?.success() {
        eprintln!("error: the chaos suite (cargo xtask chaos) failed");
        return Ok(ExitCode::FAILURE);
    }

    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    // cargo-nextest, when installed, runs test binaries side by side (the
    // suite takes about half as long on two cores); it does not run
    // doctests, so those follow with cargo test. Without it, cargo test
    // runs everything. Either way every failure is reported, not only the
    // first failing binary's.
    let nextest = Command::new(&cargo)
        .args(["nextest", "--version"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    let ok = if nextest {
        let tests = Command::new(&cargo)
            .args(["nextest", "run", "--workspace", "--no-fail-fast"])
            .args(&args)
            .env("DATABASE_URL", server.url())
            .status()?;
        let docs = Command::new(&cargo)
            .args(["test", "--workspace", "--doc"])
            .env("DATABASE_URL", server.url())
            .status()?;
        tests.success() && docs.success()
    } else {
        Command::new(&cargo)
            .args(["test", "--workspace", "--no-fail-fast"])
            .args(&args)
            .env("DATABASE_URL", server.url())
            .status()?
            .success()
    };
    let wheel = python_build();
    let docs = crate::release::DocCheck::start();
    let python = wheel
        .as_ref()
        .is_some_and(|(venv, _)| pytest(venv, server.url()));
    drop(server);
    let docs_ok = match docs {
        Ok(docs) => docs.finish(),
        Err(err) => {
            eprintln!("error: release check: {err}");
            false
        }
    };
    let release = crate::release::check(
        docs_ok,
        wheel
            .as_ref()
            .map(|(venv, w)| (venv.as_path(), w.as_path())),
    );
    Ok(if ok && python && release {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
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
