//! The README's command lines are the first thing people copy: each one in
//! its `sh` blocks must parse with this grammar, and its usage section must
//! come before the storage internals and show how to pause a queue.

use super::Cli;
use clap::Parser;

const README: &str = include_str!("../../../../README.md");

/// `awa ...` command lines of the README's `sh` blocks, as argument lists:
/// comments dropped, `a ; b` split, `[optional]` parts left out, `ID` and
/// `N` placeholders given a value, single quotes honoured.
fn command_lines() -> Vec<(String, Vec<String>)> {
    let mut in_sh = false;
    let mut lines = Vec::new();
    for line in README.lines() {
        if line.starts_with("```") {
            in_sh = line == "```sh";
            continue;
        }
        if !in_sh {
            continue;
        }
        let code = line.split(" #").next().unwrap_or("");
        for part in code.split(" ; ") {
            let part = part.trim();
            if !part.starts_with("awa ") {
                continue;
            }
            lines.push((part.to_owned(), words(part)));
        }
    }
    lines
}

fn words(line: &str) -> Vec<String> {
    let mut out = Vec::new();
    let (mut word, mut quoted, mut depth, mut any) = (String::new(), false, 0, false);
    for c in line.chars() {
        match c {
            '\'' if depth == 0 => {
                quoted = !quoted;
                any = true;
            }
            '[' if !quoted => depth += 1,
            ']' if !quoted => depth -= 1,
            _ if depth > 0 => {}
            ' ' if !quoted => {
                if any || !word.is_empty() {
                    out.push(std::mem::take(&mut word));
                }
                any = false;
            }
            c => word.push(c),
        }
    }
    if any || !word.is_empty() {
        out.push(word);
    }
    out.into_iter()
        .map(|w| match w.as_str() {
            "ID" | "N" => "1".to_owned(),
            _ => w,
        })
        .collect()
}

#[test]
fn every_readme_command_line_parses() {
    let lines = command_lines();
    assert!(lines.len() > 20, "found only {lines:?}");
    for (line, args) in lines {
        if let Err(err) = Cli::try_parse_from(&args) {
            panic!("README: `{line}` does not parse ({args:?}):\n{err}");
        }
    }
}

#[test]
fn readme_shows_usage_before_the_storage_internals() {
    let usage = README.find("## Using it").expect("a usage section");
    let pause = README
        .find("awa queue configure email --pause")
        .expect("pausing a queue is shown");
    let planes = README.find("*planes*").expect("planes are explained");
    let moves = README
        .find("### Moving to another substrate")
        .expect("substrate moves are explained");
    assert!(usage < pause, "pausing belongs to the usage section");
    assert!(pause < planes && pause < moves, "usage comes first");
    let first_command = README[usage..].find("awa ").unwrap() + usage;
    assert!(
        !README[usage..first_command].contains("substrate"),
        "the usage section starts with usage"
    );
}
