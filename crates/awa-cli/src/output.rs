//! Printing results as text or `--json`.

use crate::error::CliError;
use serde::Serialize;

/// Print `value` as JSON, or `text()` for humans.
pub fn emit<T: Serialize>(json: bool, value: &T, text: impl FnOnce() -> String) {
    if json {
        match serde_json::to_string_pretty(value) {
            Ok(s) => println!("{s}"),
            Err(err) => eprintln!("error: could not encode JSON output: {err}"),
        }
    } else {
        println!("{}", text());
    }
}

pub fn print_error(json: bool, err: &CliError) {
    if json {
        println!("{}", serde_json::json!({ "error": err.to_string() }));
    }
    eprintln!("error: {err}");
}
