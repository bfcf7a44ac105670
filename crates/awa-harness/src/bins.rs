//! Where the local PostgreSQL server binaries are: the newest directory
//! holding both `initdb` and `postgres` of a supported major version.

use std::fs;
use std::os::unix::fs::MetadataExt as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

const MIN_MAJOR: u32 = 14;

/// Finds a directory holding both `initdb` and `postgres` of version 14 or
/// newer. The error says what was looked at, for the "no server" message.
pub(crate) fn find_bin_dir() -> Result<PathBuf, String> {
    let mut rejected = Vec::new();
    for dir in candidate_dirs() {
        if !is_executable(&dir.join("initdb")) || !is_executable(&dir.join("postgres")) {
            continue;
        }
        match server_major(&dir) {
            Ok(major) if major >= MIN_MAJOR => return Ok(dir),
            Ok(major) => rejected.push(format!(
                "{} has PostgreSQL {major}, older than {MIN_MAJOR}",
                dir.display()
            )),
            Err(e) => rejected.push(format!("{}: {e}", dir.display())),
        }
    }
    let mut why = String::from(
        "no directory with both initdb and postgres found on PATH, via pg_config, \
         or in the usual install locations",
    );
    if !rejected.is_empty() {
        why.push_str(" (rejected: ");
        why.push_str(&rejected.join("; "));
        why.push(')');
    }
    Err(why)
}

fn candidate_dirs() -> Vec<PathBuf> {
    let mut dirs = Vec::new();
    if let Some(path) = std::env::var_os("PATH") {
        dirs.extend(std::env::split_paths(&path));
    }
    if let Ok(out) = Command::new("pg_config")
        .arg("--bindir")
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .output()
        && out.status.success()
    {
        let dir = String::from_utf8_lossy(&out.stdout).trim().to_owned();
        if !dir.is_empty() {
            dirs.push(PathBuf::from(dir));
        }
    }
    dirs.extend(versioned_dirs(Path::new("/usr/lib/postgresql"), "", "bin"));
    dirs.extend(versioned_dirs(Path::new("/usr"), "pgsql-", "bin"));
    dirs.extend(versioned_dirs(
        Path::new("/opt/homebrew/opt"),
        "postgresql@",
        "bin",
    ));
    dirs.extend(versioned_dirs(
        Path::new("/usr/local/opt"),
        "postgresql@",
        "bin",
    ));
    dirs.push(PathBuf::from("/usr/local/pgsql/bin"));

    let mut seen = std::collections::HashSet::new();
    dirs.retain(|d| seen.insert(d.clone()));
    dirs
}

/// `<parent>/<prefix><version>/<suffix>` for every version found, newest
/// first.
fn versioned_dirs(parent: &Path, prefix: &str, suffix: &str) -> Vec<PathBuf> {
    let Ok(entries) = fs::read_dir(parent) else {
        return Vec::new();
    };
    let mut found: Vec<(Vec<u32>, PathBuf)> = entries
        .flatten()
        .filter_map(|entry| {
            let name = entry.file_name().into_string().ok()?;
            let version = parse_version(name.strip_prefix(prefix)?)?;
            Some((version, entry.path().join(suffix)))
        })
        .collect();
    found.sort_by(|a, b| b.0.cmp(&a.0));
    found.into_iter().map(|(_, dir)| dir).collect()
}

fn parse_version(s: &str) -> Option<Vec<u32>> {
    let parts: Option<Vec<u32>> = s.split('.').map(|p| p.parse().ok()).collect();
    parts.filter(|p| !p.is_empty())
}

pub(crate) fn is_executable(path: &Path) -> bool {
    fs::metadata(path).is_ok_and(|m| m.is_file() && m.mode() & 0o111 != 0)
}

/// Major version from `postgres --version`, e.g. "postgres (PostgreSQL) 15.4 (Debian 15.4-1)".
fn server_major(bin_dir: &Path) -> Result<u32, String> {
    let out = Command::new(bin_dir.join("postgres"))
        .arg("--version")
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("cannot run postgres --version: {e}"))?;
    let text = String::from_utf8_lossy(&out.stdout);
    text.split_whitespace()
        .find_map(|word| {
            let digits: String = word.chars().take_while(char::is_ascii_digit).collect();
            digits.parse().ok()
        })
        .ok_or_else(|| format!("cannot read a version from {:?}", text.trim()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_sort_newest_first() {
        assert_eq!(parse_version("15"), Some(vec![15]));
        assert_eq!(parse_version("9.6"), Some(vec![9, 6]));
        assert_eq!(parse_version("x"), None);
        let mut v = [vec![9, 6], vec![16], vec![14]];
        v.sort_by(|a, b| b.cmp(a));
        assert_eq!(v[0], vec![16]);
    }
}
