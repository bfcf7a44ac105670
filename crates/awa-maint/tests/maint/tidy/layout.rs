//! The module graph drawn from the imports, for the layout checks in
//! `tidy.rs`: a node per module (a Rust source file, a Python module), an
//! edge from each module to every module it names, and the circles in it.
//!
//! Rust. A file's module path comes from where it stands under `src/`
//! (`lib.rs`/`main.rs` the root, `a/mod.rs` and `a.rs` are `a`,
//! `a/b.rs` is `a::b`). A module names another through `crate::`,
//! `super::` or `self::` paths, `use` groups included, and through a child
//! module's bare name (`engine::Engine` in the file declaring `mod
//! engine`). A path into one of the module's own ancestors draws no edge:
//! a parent declares its children, and the items it keeps for them
//! (`super::Ctx`) are theirs to use; so items reached through a re-export
//! at an ancestor are not followed either. Inside an inline `mod x { .. }`
//! (the tests) `super` is the file's own module. It reads text, not
//! syntax: paths in comments and strings count too, which can only add
//! edges, never hide a circle.
//!
//! Python. `from .x import`, `from . import x`, `from package.x import`
//! and `import package.x`, at any indentation (an import inside a function
//! is still an edge: it only happens later).

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::Path;

/// Modules by name and, for each, the modules it names.
#[derive(Debug, Default)]
pub struct Graph {
    pub edges: BTreeMap<String, BTreeSet<String>>,
}

impl Graph {
    fn node(&mut self, name: &str) {
        self.edges.entry(name.to_string()).or_default();
    }

    fn edge(&mut self, from: &str, to: &str) {
        if from != to {
            self.edges
                .entry(from.to_string())
                .or_default()
                .insert(to.to_string());
        }
    }

    /// Every circle: the strongly connected parts with more than one
    /// module, each sorted, in name order (Tarjan's algorithm).
    pub fn circles(&self) -> Vec<Vec<String>> {
        struct Walk<'a> {
            graph: &'a Graph,
            index: BTreeMap<&'a str, usize>,
            low: BTreeMap<&'a str, usize>,
            stack: Vec<&'a str>,
            on_stack: BTreeSet<&'a str>,
            found: Vec<Vec<String>>,
        }
        impl<'a> Walk<'a> {
            fn visit(&mut self, v: &'a str) {
                let i = self.index.len();
                self.index.insert(v, i);
                self.low.insert(v, i);
                self.stack.push(v);
                self.on_stack.insert(v);
                for w in self.graph.edges.get(v).into_iter().flatten() {
                    let w = w.as_str();
                    if !self.index.contains_key(w) {
                        self.visit(w);
                        let lw = self.low[w];
                        let lv = self.low.get_mut(v).unwrap();
                        *lv = (*lv).min(lw);
                    } else if self.on_stack.contains(w) {
                        let iw = self.index[w];
                        let lv = self.low.get_mut(v).unwrap();
                        *lv = (*lv).min(iw);
                    }
                }
                if self.low[v] == self.index[v] {
                    let mut part = Vec::new();
                    while let Some(w) = self.stack.pop() {
                        self.on_stack.remove(w);
                        part.push(w.to_string());
                        if w == v {
                            break;
                        }
                    }
                    if part.len() > 1 {
                        part.sort();
                        self.found.push(part);
                    }
                }
            }
        }
        let mut walk = Walk {
            graph: self,
            index: BTreeMap::new(),
            low: BTreeMap::new(),
            stack: Vec::new(),
            on_stack: BTreeSet::new(),
            found: Vec::new(),
        };
        for v in self.edges.keys() {
            if !walk.index.contains_key(v.as_str()) {
                walk.visit(v);
            }
        }
        walk.found.sort();
        walk.found
    }
}

/// A module path as a string: `""` for the root, `worker::engine`.
fn join(path: &[String]) -> String {
    path.join("::")
}

/// The module path of a file under `src`, or None for files that are not
/// modules of the crate (`src/bin/*`).
fn module_of(src: &Path, file: &Path) -> Option<Vec<String>> {
    let rel = file.strip_prefix(src).ok()?;
    let mut parts: Vec<String> = rel
        .iter()
        .map(|p| p.to_string_lossy().into_owned())
        .collect();
    if parts.first().is_some_and(|p| p == "bin") {
        return None;
    }
    let last = parts.pop()?;
    let stem = last.strip_suffix(".rs")?;
    if !(parts.is_empty() && (stem == "lib" || stem == "main")) && stem != "mod" {
        parts.push(stem.to_string());
    }
    Some(parts)
}

fn rust_files(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// Expands `a::{b, c::{d, e}}` into `a::b`, `a::c::d`, `a::c::e`.
fn expand(tree: &str) -> Vec<String> {
    let tree: String = tree.chars().filter(|c| !c.is_whitespace()).collect();
    let Some(open) = tree.find('{') else {
        return vec![tree];
    };
    let prefix = &tree[..open];
    let inner = tree[open + 1..]
        .strip_suffix('}')
        .unwrap_or(&tree[open + 1..]);
    let mut items = Vec::new();
    let (mut depth, mut start) = (0, 0);
    for (i, c) in inner.char_indices() {
        match c {
            '{' => depth += 1,
            '}' => depth -= 1,
            ',' if depth == 0 => {
                items.push(&inner[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    items.push(&inner[start..]);
    items
        .into_iter()
        .filter(|i| !i.is_empty())
        .flat_map(expand)
        .map(|i| format!("{prefix}{i}"))
        .collect()
}

/// The `a::b::c` paths named in a line of code (outside `use` trees).
fn inline_paths(text: &str) -> Vec<String> {
    let b = text.as_bytes();
    let word = |i: usize| i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_');
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        let starts = word(i) && (i == 0 || !(word(i - 1) || b[i - 1] == b':'));
        if !starts {
            i += 1;
            continue;
        }
        let start = i;
        while word(i) {
            i += 1;
        }
        while b.get(i) == Some(&b':') && b.get(i + 1) == Some(&b':') && word(i + 2) {
            i += 2;
            while word(i) {
                i += 1;
            }
        }
        let path = &text[start..i];
        if path.contains("::") {
            out.push(path.to_string());
        }
    }
    out
}

/// Where `path`, named in module `here` (itself `depth` inline modules
/// deep), leads: the module of the crate it names, if any.
fn resolve(
    modules: &BTreeSet<Vec<String>>,
    here: &[String],
    depth: usize,
    path: &str,
) -> Option<Vec<String>> {
    let mut segs = path.split("::").filter(|s| !s.is_empty()).peekable();
    let mut at: Vec<String> = match *segs.peek()? {
        "crate" => {
            segs.next();
            Vec::new()
        }
        "self" => {
            segs.next();
            here.to_vec()
        }
        "super" => {
            let mut at = here.to_vec();
            let mut skip = depth;
            while segs.peek() == Some(&"super") {
                segs.next();
                if skip > 0 {
                    skip -= 1;
                } else {
                    at.pop()?;
                }
            }
            at
        }
        first => {
            // A bare child module's name.
            let mut child = here.to_vec();
            child.push(first.to_string());
            if !modules.contains(&child) {
                return None;
            }
            here.to_vec()
        }
    };
    for seg in segs {
        let mut next = at.clone();
        next.push(seg.to_string());
        if !modules.contains(&next) {
            break;
        }
        at = next;
    }
    Some(at)
}

/// The module graph of the Rust crate whose sources are under `src`.
pub fn rust_crate(src: &Path) -> Graph {
    let mut files = Vec::new();
    rust_files(src, &mut files);
    let parsed: Vec<(Vec<String>, String)> = files
        .iter()
        .filter_map(|f| Some((module_of(src, f)?, fs::read_to_string(f).ok()?)))
        .collect();
    let modules: BTreeSet<Vec<String>> = parsed.iter().map(|(m, _)| m.clone()).collect();
    let mut graph = Graph::default();
    for (here, text) in &parsed {
        let name = join(here);
        graph.node(&name);
        // Inline `mod x {` blocks: the brace depth each one opened at.
        let mut inline: Vec<i64> = Vec::new();
        let mut braces: i64 = 0;
        let mut pending_use = String::new();
        for line in text.lines() {
            let code = line.split("//").next().unwrap_or("");
            let trimmed = code.trim_start();
            let mut paths = Vec::new();
            let starts_use = trimmed.starts_with("use ")
                || (trimmed.starts_with("pub") && trimmed.contains(" use "));
            if starts_use || !pending_use.is_empty() {
                pending_use.push_str(code);
                if pending_use.contains(';') {
                    let body = pending_use.split(';').next().unwrap_or("");
                    let tree = body[body.find("use ").map_or(0, |i| i + 4)..].trim();
                    paths.extend(expand(tree));
                    pending_use.clear();
                }
            } else {
                paths.extend(inline_paths(code));
            }
            for path in paths {
                if let Some(target) = resolve(&modules, here, inline.len(), &path) {
                    // Ancestors (and the module itself) draw no edge.
                    if !here.starts_with(&target) {
                        graph.edge(&name, &join(&target));
                    }
                }
            }
            let opens_inline = {
                let t = trimmed
                    .trim_start_matches("pub ")
                    .trim_start_matches("pub(crate) ");
                t.starts_with("mod ") && code.trim_end().ends_with('{')
            };
            if opens_inline {
                inline.push(braces);
            }
            braces += code.matches('{').count() as i64 - code.matches('}').count() as i64;
            while inline.last().is_some_and(|&at| braces <= at) {
                inline.pop();
            }
        }
    }
    graph
}

/// The module graph of the Python package `package` in `dir`.
pub fn python_package(dir: &Path, package: &str) -> Graph {
    let mut graph = Graph::default();
    let Ok(entries) = fs::read_dir(dir) else {
        return graph;
    };
    let mut files: Vec<_> = entries
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "py"))
        .collect();
    files.sort();
    let modules: BTreeSet<String> = files
        .iter()
        .filter_map(|p| Some(p.file_stem()?.to_string_lossy().into_owned()))
        .collect();
    let module = |dotted: &str| -> Option<String> {
        let first = dotted.split('.').next()?;
        modules.contains(first).then(|| first.to_string())
    };
    for file in &files {
        let name = file.file_stem().unwrap().to_string_lossy().into_owned();
        graph.node(&name);
        let text = fs::read_to_string(file).unwrap_or_default();
        for line in text.lines() {
            let line = line.trim();
            let mut targets = Vec::new();
            if let Some(rest) = line.strip_prefix("from ") {
                let (from, imported) = rest.split_once(" import ").unwrap_or((rest, ""));
                let from = from.trim();
                let relative = from.strip_prefix('.').or_else(|| {
                    from.strip_prefix(package)
                        .and_then(|r| r.strip_prefix('.').or(Some(r)))
                });
                if let Some(rel) = relative {
                    if rel.is_empty() {
                        // `from . import x, y`: each name may be a module.
                        targets.extend(
                            imported
                                .trim_matches(|c| c == '(' || c == ')')
                                .split(',')
                                .filter_map(|n| n.split_whitespace().next())
                                .filter_map(module),
                        );
                    } else {
                        targets.extend(module(rel));
                    }
                }
            } else if let Some(rest) = line.strip_prefix("import ") {
                for item in rest.split(',') {
                    let dotted = item.split_whitespace().next().unwrap_or("");
                    if let Some(rel) = dotted
                        .strip_prefix(package)
                        .and_then(|r| r.strip_prefix('.'))
                    {
                        targets.extend(module(rel));
                    }
                }
            }
            for target in targets {
                // `__init__` re-exports the package: it stands on top.
                if target != "__init__" {
                    graph.edge(&name, &target);
                }
            }
        }
    }
    graph
}

#[test]
fn use_trees_expand_and_paths_resolve() {
    assert_eq!(
        expand("super::{About, Done, handler::{self, X}}"),
        [
            "super::About",
            "super::Done",
            "super::handler::self",
            "super::handler::X"
        ]
    );
    let m = |p: &str| -> Vec<String> {
        p.split("::")
            .filter(|s| !s.is_empty())
            .map(String::from)
            .collect()
    };
    let modules: BTreeSet<Vec<String>> = ["", "worker", "worker::engine", "metrics"]
        .into_iter()
        .map(m)
        .collect();
    let here = m("worker::engine");
    assert_eq!(
        resolve(&modules, &here, 0, "crate::metrics::finished"),
        Some(m("metrics"))
    );
    assert_eq!(
        resolve(&modules, &here, 0, "super::About"),
        Some(m("worker"))
    );
    assert_eq!(
        resolve(&modules, &here, 1, "super::X"),
        Some(m("worker::engine"))
    );
    assert_eq!(
        resolve(&modules, &m("worker"), 0, "engine::Engine"),
        Some(m("worker::engine"))
    );
    assert_eq!(resolve(&modules, &here, 0, "std::sync::Arc"), None);
    assert_eq!(
        inline_paths("let x = crate::metrics::enabled() || super::y::z;"),
        ["crate::metrics::enabled", "super::y::z"]
    );
}

#[test]
fn a_circle_is_found_and_a_ladder_is_not() {
    let mut g = Graph::default();
    g.edge("a", "b");
    g.edge("b", "c");
    g.edge("c", "a");
    g.edge("c", "d");
    assert_eq!(g.circles(), [["a", "b", "c"]]);
    let mut ladder = Graph::default();
    ladder.edge("a", "b");
    ladder.edge("b", "c");
    ladder.edge("a", "c");
    assert!(ladder.circles().is_empty());
}
