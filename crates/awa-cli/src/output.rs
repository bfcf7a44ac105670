//! Printing results as text or `--json`.

use crate::error::CliError;
use serde::Serialize;

/// Print `value` as JSON, or `text()` for humans.
pub fn emit<T: Serialize>(json: bool, value: &T, text: impl FnOnce() -> String) {
    let out = if json {
        match serde_json::to_string_pretty(value) {
            Ok(s) => s,
            Err(err) => {
                eprintln!("error: could not encode JSON output: {err}");
                return;
            }
        }
    } else {
        text()
    };
    print_line(&out);
}

fn print_line(s: &str) {
    print_raw(&format!("{s}\n"));
}

/// `print!` without its panic when the reader went away (`awa ... | head`):
/// the reader has what it wanted.
pub fn print_raw(s: &str) {
    use std::io::Write;
    let mut stdout = std::io::stdout().lock();
    if let Err(err) = stdout.write_all(s.as_bytes()).and_then(|()| stdout.flush())
        && err.kind() != std::io::ErrorKind::BrokenPipe
    {
        eprintln!("error: could not write output: {err}");
    }
}

pub fn print_error(json: bool, err: &CliError) {
    if json {
        let mut out = serde_json::json!({ "error": err.to_string() });
        let fields = err.database_fields();
        for (key, value) in [
            ("sqlstate", fields.sqlstate),
            ("detail", fields.detail),
            ("hint", fields.hint),
        ] {
            if let Some(value) = value {
                out[key] = value.into();
            }
        }
        if let CliError::UniqueKeyHeld { key, held_by }
        | CliError::RetryKeyHeld { key, held_by, .. } = err
        {
            out["unique_key"] = key.as_str().into();
            out["held_by"] = (*held_by).into();
        }
        if let CliError::UniqueHeld { what, held_by } = err {
            out["unique"] = what.as_str().into();
            out["held_by"] = (*held_by).into();
        }
        out["exit_code"] = err.exit_code().into();
        print_line(&out.to_string());
    }
    eprintln!("error: {err}");
}

/// Rows under a header, columns padded to their widest cell.
/// Each warning on stderr as `warning: ...` (text and `--json` alike: the
/// JSON carries them too), e.g. a stored time shown raw.
pub fn warn(warnings: &[String]) {
    for w in warnings {
        eprintln!("warning: {}", clean(w));
    }
}

pub fn table(header: &[&str], rows: &[Vec<String>]) -> String {
    let mut widths: Vec<usize> = header.iter().map(|h| h.chars().count()).collect();
    for row in rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let line = |cells: &mut dyn Iterator<Item = &str>| {
        let padded: Vec<String> = cells
            .zip(&widths)
            .map(|(c, w)| format!("{c:<w$}"))
            .collect();
        padded.join("  ").trim_end().to_string()
    };
    let mut out = vec![line(&mut header.iter().copied())];
    out.extend(rows.iter().map(|r| line(&mut r.iter().map(String::as_str))));
    out.join("\n")
}

/// Text from the database (error messages, kinds) made safe for a
/// terminal: a handler's error string must not be able to move the cursor
/// or rewrite what the operator sees.
pub fn clean(s: &str) -> String {
    s.chars()
        .flat_map(|c| {
            if c.is_control() {
                c.escape_default().collect::<Vec<_>>()
            } else {
                vec![c]
            }
        })
        .collect()
}

/// `clean`, cut to `max` characters for a table cell.
pub fn cell(s: &str, max: usize) -> String {
    let s = clean(s);
    if s.chars().count() <= max {
        return s;
    }
    let mut cut: String = s.chars().take(max.saturating_sub(1)).collect();
    cut.push('…');
    cut
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tables_align() {
        let t = table(&["id", "queue"], &[vec!["1".into(), "emails".into()]]);
        assert_eq!(t, "id  queue\n1   emails");
    }

    #[test]
    fn control_characters_are_escaped() {
        assert_eq!(clean("a\x1b[2Jb\n"), "a\\u{1b}[2Jb\\n");
        assert_eq!(cell("abcdef", 4), "abc…");
    }
}
