//! Hygiene checks that run with `cargo test`: SQL files are all used, and
//! only plane and composition crates issue SQL.

use std::fs;
use std::path::{Path, PathBuf};

fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .unwrap()
}

fn files_with_ext(dir: &Path, ext: &str, out: &mut Vec<PathBuf>) {
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            files_with_ext(&path, ext, out);
        } else if path.extension().is_some_and(|e| e == ext) {
            out.push(path);
        }
    }
}

#[test]
fn every_sql_file_is_used_by_its_crate() {
    let crates = workspace_root().join("crates");
    let mut orphans = Vec::new();
    for krate in fs::read_dir(&crates).unwrap().flatten() {
        let mut sql = Vec::new();
        files_with_ext(&krate.path().join("sql"), "sql", &mut sql);
        if sql.is_empty() {
            continue;
        }
        let mut rust = Vec::new();
        files_with_ext(&krate.path().join("src"), "rs", &mut rust);
        let source: String = rust
            .iter()
            .map(|p| fs::read_to_string(p).unwrap())
            .collect();
        for file in sql {
            let name = file.file_name().unwrap().to_str().unwrap();
            if !source.contains(&format!("sql/{name}\"")) {
                orphans.push(file.display().to_string());
            }
        }
    }
    assert!(
        orphans.is_empty(),
        "SQL files no code includes: {orphans:#?}"
    );
}

#[test]
fn only_plane_and_composition_crates_issue_sql() {
    let root = workspace_root();
    for krate in [
        "crates/awa-cli/src",
        "crates/awa-core/src",
        "crates/awa-admin/src",
    ] {
        let mut rust = Vec::new();
        files_with_ext(&root.join(krate), "rs", &mut rust);
        for file in rust {
            let text = fs::read_to_string(&file).unwrap();
            // Calls, not mentions: a log filter naming the `sqlx::query`
            // target is not SQL.
            for needle in [
                "sqlx::query(",
                "sqlx::query_",
                "sqlx::query!",
                "raw_sql(",
                "query_scalar(",
                "query_as(",
            ] {
                assert!(
                    !text.contains(needle),
                    "{} issues SQL ({needle}); route it through a plane crate",
                    file.display()
                );
            }
        }
    }
}
