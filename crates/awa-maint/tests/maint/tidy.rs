//! Hygiene checks that run with `cargo test`: SQL files are all used, only
//! plane and composition crates issue SQL, the modules drawn from the
//! imports (each Rust crate's, the Python package's) form no circle, and no
//! source file outside tests is longer than a reader takes in whole.

#[path = "tidy/layout.rs"]
mod layout;

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
            // By its path in the crate (`sql/x.sql`, `sql/baseline/x.sql`):
            // two folders may each hold a file of the same name.
            let rel = file.strip_prefix(krate.path()).unwrap();
            let rel = rel.to_str().unwrap();
            if !source.contains(&format!("{rel}\"")) {
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

/// What is used stands below what uses it: a circle in a crate's module
/// graph (see `tidy/layout.rs` for how it is drawn) means no module of it
/// can be read, tested or moved without the others.
#[test]
fn rust_modules_form_no_circles() {
    let root = workspace_root();
    let mut srcs: Vec<PathBuf> = fs::read_dir(root.join("crates"))
        .unwrap()
        .flatten()
        .map(|e| e.path().join("src"))
        .filter(|p| p.is_dir())
        .collect();
    srcs.push(root.join("xtask/src"));
    srcs.sort();
    let mut found = Vec::new();
    for src in &srcs {
        for circle in layout::rust_crate(src).circles() {
            let krate = src.parent().unwrap().strip_prefix(&root).unwrap();
            found.push(format!("{}: {}", krate.display(), circle.join(" <-> ")));
        }
    }
    assert!(
        found.is_empty(),
        "modules that import each other (move what they share into a module \
         below both):\n{}",
        found.join("\n")
    );
}

#[test]
fn python_modules_form_no_circles() {
    let dir = workspace_root().join("crates/awa-python/python/awa");
    let circles = layout::python_package(&dir, "awa").circles();
    assert!(
        circles.is_empty(),
        "Python modules that import each other (move what they share into a \
         module below both): {circles:?}"
    );
}

/// The check must see the circles this crate's history had, or it proves
/// nothing: a graph drawn from a tree with one put back must have it.
#[test]
fn the_circle_check_sees_a_circle() {
    let dir = std::env::temp_dir().join(format!("awa-tidy-circle-{}", std::process::id()));
    let src = dir.join("src");
    fs::create_dir_all(src.join("worker")).unwrap();
    fs::write(src.join("lib.rs"), "pub mod metrics;\nmod worker;\n").unwrap();
    fs::write(src.join("metrics.rs"), "use crate::worker::About;\n").unwrap();
    fs::write(
        src.join("worker/mod.rs"),
        "mod engine;\npub(crate) struct About;\npub use engine::Engine;\n",
    )
    .unwrap();
    fs::write(
        src.join("worker/engine.rs"),
        "use super::About;\npub struct Engine;\nfn f() { crate::metrics::x(); }\n",
    )
    .unwrap();
    let circles = layout::rust_crate(&src).circles();
    let py = dir.join("py");
    fs::create_dir_all(&py).unwrap();
    fs::write(py.join("__init__.py"), "from ._a import f\n").unwrap();
    fs::write(py.join("_a.py"), "def f():\n    from . import b\n").unwrap();
    fs::write(py.join("b.py"), "from ._a import f\n").unwrap();
    let py_circles = layout::python_package(&py, "pkg").circles();
    fs::remove_dir_all(&dir).unwrap();
    assert_eq!(circles, [["metrics", "worker", "worker::engine"]]);
    assert_eq!(py_circles, [["_a", "b"]]);
}

/// The most lines a Rust or Python source file outside tests may have: a
/// longer one holds more than one purpose and is split by purpose.
const MAX_LINES: usize = 800;

/// Folders the length check does not enter: tests (a long table of cases
/// is still one purpose), frozen migrations, build output, hidden folders
/// (`.git`, virtual environments).
fn skipped_dir(name: &str) -> bool {
    matches!(name, "tests" | "migrations" | "target" | "node_modules") || name.starts_with('.')
}

/// Every `.rs` and `.py` file under `dir` outside the skipped folders that
/// has more than `MAX_LINES` lines, with its count.
fn over_long(dir: &Path, out: &mut Vec<(PathBuf, usize)>) {
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        let name = entry.file_name();
        let name = name.to_string_lossy();
        if path.is_dir() {
            if !skipped_dir(&name) {
                over_long(&path, out);
            }
        } else if path.extension().is_some_and(|e| e == "rs" || e == "py") {
            let lines = fs::read_to_string(&path).unwrap().lines().count();
            if lines > MAX_LINES {
                out.push((path, lines));
            }
        }
    }
}

#[test]
fn no_source_file_outside_tests_is_over_800_lines() {
    let root = workspace_root();
    let mut found = Vec::new();
    over_long(&root, &mut found);
    found.sort();
    let found: Vec<String> = found
        .iter()
        .map(|(p, n)| format!("{}: {n} lines", p.strip_prefix(&root).unwrap().display()))
        .collect();
    assert!(
        found.is_empty(),
        "source files over {MAX_LINES} lines (split each by purpose):\n{}",
        found.join("\n")
    );
}

/// The length check must see an over-long file, and only where it looks:
/// one line too many fails, the same file under `tests/` or `migrations/`
/// does not, and a file of exactly the limit passes.
#[test]
fn the_length_check_sees_an_over_long_file() {
    let dir = std::env::temp_dir().join(format!("awa-tidy-length-{}", std::process::id()));
    let _ = fs::remove_dir_all(&dir);
    let long = "fn f() {}\n".repeat(MAX_LINES + 1);
    let full = "x = 1\n".repeat(MAX_LINES);
    for (file, text) in [
        ("crate/src/long.rs", &long),
        ("crate/src/full.py", &full),
        ("crate/tests/long.rs", &long),
        ("crate/migrations/long.rs", &long),
        ("crate/src/long.txt", &long),
    ] {
        let path = dir.join(file);
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(path, text).unwrap();
    }
    let mut found = Vec::new();
    over_long(&dir, &mut found);
    fs::remove_dir_all(&dir).unwrap();
    assert_eq!(found, [(dir.join("crate/src/long.rs"), MAX_LINES + 1)]);
}
