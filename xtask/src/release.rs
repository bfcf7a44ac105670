//! `cargo xtask release-check`: what a release would publish, checked
//! without publishing anything.
//!
//! - Every publishable crate (`publish` not `false`) has a description,
//!   the workspace's license, keywords, categories and a README, and no
//!   placeholder repository URL.
//! - `cargo package --no-verify` packages them all, in one call: cargo
//!   orders them by dependency and resolves each against the ones packaged
//!   before it, which is what `cargo publish` would need of the registry.
//! - Every `.crate` holds `LICENSE-MIT`, `LICENSE-APACHE` (the root's
//!   texts, byte for byte) and its README.
//! - `cargo doc --workspace --no-deps` with `RUSTDOCFLAGS=-D warnings`
//!   prints no warning at all (cargo's own ones included).
//! - The Python wheel passes `twine check --strict` and carries both
//!   license texts.
//!
//! `cargo xtask test` runs it last, on the wheel its Python suite built,
//! with `cargo doc` running beside pytest (which mostly waits on
//! PostgreSQL). Standalone, it builds the wheel itself.

use crate::BoxError;
use crate::python;
use serde::Deserialize;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitCode, Stdio};
use std::time::Instant;

/// The license texts every package must carry, at the workspace root.
const LICENSES: [&str; 2] = ["LICENSE-MIT", "LICENSE-APACHE"];

/// The workspace's license expression, which every package declares.
const LICENSE: &str = "MIT OR Apache-2.0";

/// `cargo xtask release-check`.
pub fn run() -> Result<ExitCode, BoxError> {
    let docs = DocCheck::start()?;
    let venv = python::ensure_venv()?;
    // After the doc build: maturin would wait for cargo's lock anyway.
    let docs_ok = docs.finish();
    let wheel = python::build_wheel(&venv, false)?;
    Ok(if check(docs_ok, Some((&venv, &wheel))) {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

/// The checks that follow the doc build: metadata, packages, licenses in
/// them, the wheel (in its virtual environment; None when it could not be
/// built, which fails the check). Every failure is said on stderr; true
/// when none.
pub fn check(docs_ok: bool, wheel: Option<(&Path, &Path)>) -> bool {
    let mut ok = docs_ok;
    match crates() {
        Ok(crates) => {
            ok &= metadata(&crates);
            let started = Instant::now();
            match package(&crates) {
                Ok(files) => {
                    println!(
                        "release check: {} crates packaged ({:.0} s)",
                        files.len(),
                        started.elapsed().as_secs_f64()
                    );
                    ok &= crate_contents(&files);
                }
                Err(err) => {
                    eprintln!("error: release check: {err}");
                    ok = false;
                }
            }
        }
        Err(err) => {
            eprintln!("error: release check: reading the workspace: {err}");
            ok = false;
        }
    }
    ok &= match wheel {
        Some((venv, wheel)) => wheel_check(venv, wheel),
        None => {
            eprintln!("error: release check: no wheel to check (its build failed)");
            false
        }
    };
    if ok {
        println!("release check: passed");
    } else {
        eprintln!("error: the release check failed (see above)");
    }
    ok
}

/// What `cargo metadata` says of one package.
#[derive(Debug, Deserialize)]
struct Package {
    name: String,
    version: String,
    /// None: any registry; an empty list: `publish = false`.
    publish: Option<Vec<String>>,
    description: Option<String>,
    license: Option<String>,
    repository: Option<String>,
    readme: Option<String>,
    keywords: Vec<String>,
    categories: Vec<String>,
}

#[derive(Debug, Deserialize)]
struct Metadata {
    packages: Vec<Package>,
}

/// The workspace's publishable crates.
fn crates() -> Result<Vec<Package>, BoxError> {
    let out = Command::new(cargo())
        .args(["metadata", "--format-version", "1", "--no-deps"])
        .current_dir(python::workspace_root())
        .stderr(Stdio::inherit())
        .output()?;
    if !out.status.success() {
        return Err(format!("cargo metadata failed ({})", out.status).into());
    }
    let meta: Metadata = serde_json::from_slice(&out.stdout)?;
    Ok(meta
        .packages
        .into_iter()
        .filter(|p| p.publish.as_ref().is_none_or(|r| !r.is_empty()))
        .collect())
}

/// Every field a registry page needs, on every publishable crate.
fn metadata(crates: &[Package]) -> bool {
    let mut problems = Vec::new();
    for p in crates {
        let mut missing = Vec::new();
        if p.description.as_deref().is_none_or(|d| d.trim().is_empty()) {
            missing.push("a description".to_string());
        }
        if p.license.as_deref() != Some(LICENSE) {
            missing.push(format!("license = {LICENSE:?} (found {:?})", p.license));
        }
        if p.keywords.is_empty() {
            missing.push("keywords".into());
        }
        if p.categories.is_empty() {
            missing.push("categories".into());
        }
        if p.readme.is_none() {
            missing.push("a README.md".into());
        }
        if let Some(url) = &p.repository
            && (url.contains("example.") || url.contains(".invalid"))
        {
            missing.push(format!(
                "a real repository URL instead of {url:?} (or none)"
            ));
        }
        if !missing.is_empty() {
            problems.push(format!("{} needs {}", p.name, missing.join(", ")));
        }
    }
    for problem in &problems {
        eprintln!("error: release check: {problem}");
    }
    problems.is_empty()
}

/// `cargo package --no-verify` of every publishable crate at once.
/// Returns the `.crate` files with each crate's name.
fn package(crates: &[Package]) -> Result<Vec<(String, PathBuf)>, BoxError> {
    let mut cmd = Command::new(cargo());
    // --allow-dirty: this checks what would be packaged from the working
    // tree as it is; publishing itself would still refuse a dirty one.
    cmd.args(["package", "--no-verify", "--allow-dirty", "--quiet"])
        .current_dir(python::workspace_root());
    for p in crates {
        cmd.arg("--package").arg(&p.name);
    }
    python::run("cargo package", &mut cmd)?;
    let dir = python::target_dir().join("package");
    crates
        .iter()
        .map(|p| {
            let file = dir.join(format!("{}-{}.crate", p.name, p.version));
            if file.exists() {
                Ok((format!("{}-{}", p.name, p.version), file))
            } else {
                Err(format!("cargo package left no {}", file.display()).into())
            }
        })
        .collect()
}

/// Each `.crate` holds the license texts as they are at the root, and a
/// README.
fn crate_contents(files: &[(String, PathBuf)]) -> bool {
    let mut ok = true;
    for (stem, file) in files {
        let mut wanted: Vec<&str> = LICENSES.to_vec();
        wanted.push("README.md");
        for name in wanted {
            let member = format!("{stem}/{name}");
            let found = Command::new("tar")
                .arg("-xzOf")
                .arg(file)
                .arg(&member)
                .stderr(Stdio::null())
                .output();
            let text = match found {
                Ok(out) if out.status.success() => out.stdout,
                Ok(_) => {
                    eprintln!("error: release check: {} has no {name}", file.display());
                    ok = false;
                    continue;
                }
                Err(err) => {
                    eprintln!("error: release check: could not run tar: {err}");
                    return false;
                }
            };
            ok &= same_as_root(name, &text, &file.display().to_string());
        }
    }
    ok
}

/// A license file holds the root's text; any other file is not empty.
fn same_as_root(name: &str, text: &[u8], package: &str) -> bool {
    if !LICENSES.contains(&name) {
        if text.is_empty() {
            eprintln!("error: release check: {name} in {package} is empty");
        }
        return !text.is_empty();
    }
    match std::fs::read(python::workspace_root().join(name)) {
        Ok(root) if root == text => true,
        Ok(_) => {
            eprintln!(
                "error: release check: {name} in {package} differs from the root's; \
                 link it to the root's file (ln -s ../../{name})"
            );
            false
        }
        Err(err) => {
            eprintln!("error: release check: the root's {name}: {err}");
            false
        }
    }
}

/// `twine check --strict` of the wheel, and its license texts.
fn wheel_check(venv: &Path, wheel: &Path) -> bool {
    let started = Instant::now();
    let twine = python::run(
        "twine check (the awa wheel)",
        Command::new(python::python(venv))
            .args(["-m", "twine", "check", "--strict"])
            .arg(wheel)
            .stdout(Stdio::null()),
    );
    let mut ok = match twine {
        Ok(()) => true,
        Err(err) => {
            // Run again to show why: --strict fails on warnings it printed
            // to stdout.
            let _ = Command::new(python::python(venv))
                .args(["-m", "twine", "check", "--strict"])
                .arg(wheel)
                .status();
            eprintln!("error: release check: {err}");
            false
        }
    };
    for name in LICENSES {
        // dist-info/licenses/ is where PEP 639 puts them.
        let script = "import sys, zipfile\n\
                      z = zipfile.ZipFile(sys.argv[1])\n\
                      hits = [n for n in z.namelist() if n.endswith('.dist-info/licenses/' + sys.argv[2])]\n\
                      sys.stdout.buffer.write(z.read(hits[0]) if len(hits) == 1 else b'')\n";
        let out = Command::new(python::python(venv))
            .args(["-c", script])
            .arg(wheel)
            .arg(name)
            .output();
        match out {
            Ok(out) if out.status.success() && !out.stdout.is_empty() => {
                ok &= same_as_root(name, &out.stdout, &wheel.display().to_string());
            }
            _ => {
                eprintln!(
                    "error: release check: {} has no .dist-info/licenses/{name} \
                     (license-files in crates/awa-python/pyproject.toml)",
                    wheel.display()
                );
                ok = false;
            }
        }
    }
    if ok {
        println!(
            "release check: the wheel passes twine check and carries the licenses ({:.0} s)",
            started.elapsed().as_secs_f64()
        );
    }
    ok
}

/// `cargo doc --workspace --no-deps` with every rustdoc warning an error,
/// running in the background; its output is kept and shown on failure.
#[derive(Debug)]
pub struct DocCheck {
    child: Child,
    log: PathBuf,
    started: Instant,
}

impl DocCheck {
    /// Start the doc build.
    pub fn start() -> Result<Self, BoxError> {
        let log = python::target_dir().join("release-check-doc.log");
        std::fs::create_dir_all(python::target_dir())?;
        let out = std::fs::File::create(&log)?;
        let child = Command::new(cargo())
            .args(["doc", "--workspace", "--no-deps", "--quiet"])
            .current_dir(python::workspace_root())
            .env("RUSTDOCFLAGS", "-D warnings")
            .stdout(Stdio::null())
            .stderr(out)
            .spawn()
            .map_err(|err| format!("could not start cargo doc: {err}"))?;
        Ok(Self {
            child,
            log,
            started: Instant::now(),
        })
    }

    /// Wait for it: true when it succeeded without a single warning.
    pub fn finish(mut self) -> bool {
        let status = self.child.wait();
        let log = std::fs::read_to_string(&self.log).unwrap_or_default();
        let warned = log.lines().any(|l| l.starts_with("warning"));
        match status {
            Ok(s) if s.success() && !warned => {
                println!(
                    "release check: cargo doc is warning-free ({:.0} s)",
                    self.started.elapsed().as_secs_f64()
                );
                true
            }
            Ok(s) => {
                eprint!("{log}");
                eprintln!(
                    "error: release check: cargo doc --workspace --no-deps (RUSTDOCFLAGS=-D warnings) {}",
                    if s.success() {
                        "printed warnings".to_string()
                    } else {
                        format!("failed ({s})")
                    }
                );
                false
            }
            Err(err) => {
                eprintln!("error: release check: waiting for cargo doc: {err}");
                false
            }
        }
    }
}

fn cargo() -> String {
    std::env::var("CARGO").unwrap_or_else(|_| "cargo".into())
}
