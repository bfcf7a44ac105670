//! The `awa` binary the chaos suite drives: built by cargo, like any user
//! would get it.

use super::error::ChaosError;
use std::path::PathBuf;
use std::process::{Command, Stdio};

/// Builds `awa` (the dev profile, as `cargo xtask` itself) and returns the
/// path cargo reports for it. `-p xtask` beside it gives the dependencies
/// xtask's features, which are the Rust suite's (xtask/Cargo.toml), so this
/// build reuses `cargo xtask`'s and the suite reuses this one.
pub fn build() -> Result<PathBuf, ChaosError> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let out = Command::new(cargo)
        .args([
            "build", "--quiet", "-p", "awa-cli", "-p", "xtask", "--bin", "awa",
        ])
        .arg("--message-format=json-render-diagnostics")
        .stdin(Stdio::null())
        .stderr(Stdio::inherit())
        .output()
        .map_err(|e| ChaosError::io("running cargo build", e))?;
    if !out.status.success() {
        return Err(ChaosError::Build(format!(
            "cargo build exited with {}",
            out.status
        )));
    }
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|line| serde_json::from_str::<serde_json::Value>(line).ok())
        .filter(|msg| msg["reason"] == "compiler-artifact" && msg["target"]["name"] == "awa")
        .find_map(|msg| msg["executable"].as_str().map(PathBuf::from))
        .ok_or_else(|| ChaosError::Build("cargo did not report an `awa` executable".into()))
}
