//! `awa`: the operator command line, as a library so that other front
//! ends (the `awa` binary, `python -m awa`) run the same commands.
//!
//! Owns: argument parsing, human and `--json` output, exit codes.
//!
//! Does not own: any SQL. Every database operation goes through a plane or
//! composition crate, so the CLI cannot do what the library would refuse.

mod cli;
mod commands;
mod db;
mod error;
mod handlers;
mod input;
mod output;
mod progress;
mod traces;

use clap::Parser;
use std::process::ExitCode;

/// Parse `args` (the program name first, as `std::env::args_os` gives
/// them) and run the command, printing its output and errors: what the
/// `awa` binary does. Returns the exit code to exit with.
pub fn main_with_args<I, T>(args: I) -> ExitCode
where
    I: IntoIterator<Item = T>,
    T: Into<std::ffi::OsString> + Clone,
{
    ExitCode::from(run_with_args(args))
}

/// [`main_with_args`] with the exit code as a number (for front ends that
/// exit themselves, like `python -m awa`).
pub fn run_with_args<I, T>(args: I) -> u8
where
    I: IntoIterator<Item = T>,
    T: Into<std::ffi::OsString> + Clone,
{
    let cli = match cli::Cli::try_parse_from(args) {
        Ok(cli) => cli,
        Err(err) => {
            // --help and --version come this way too, on stdout.
            let _ = err.print();
            return if err.use_stderr() {
                error::exit::USAGE
            } else {
                error::exit::OK
            };
        }
    };
    init_tracing(cli.verbose);
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(err) => {
            eprintln!("error: could not start the async runtime: {err}");
            return error::exit::FAILURE;
        }
    };
    let json = cli.json;
    match runtime.block_on(commands::run(cli)) {
        Ok(()) => error::exit::OK,
        Err(err) => {
            output::print_error(json, &err);
            err.exit_code()
        }
    }
}

/// What is logged with `-v` repeated `verbosity` times: our crates (all
/// named `awa*`) one level louder than their dependencies. `sqlx::query`
/// stays at error below `-vvv`: its slow-statement warnings quote whole
/// statements, and a migration is one very long statement.
fn default_filter(verbosity: u8) -> &'static str {
    match verbosity {
        0 => "error,awa=warn",
        1 => "warn,awa=info,sqlx::query=error",
        2 => "info,awa=debug,sqlx::query=error",
        _ => "debug,awa=trace",
    }
}

/// The log filter: `AWA_LOG`, else `RUST_LOG`, else the `-v` default.
fn log_filter(verbosity: u8) -> tracing_subscriber::EnvFilter {
    use tracing_subscriber::EnvFilter;
    let from_env = ["AWA_LOG", "RUST_LOG"].into_iter().find_map(|var| {
        let value = std::env::var(var).ok().filter(|v| !v.trim().is_empty())?;
        match EnvFilter::try_new(&value) {
            Ok(filter) => Some(filter),
            Err(err) => {
                eprintln!(
                    "warning: ignoring {var}={value:?} ({err}); using the default log filter"
                );
                None
            }
        }
    });
    from_env.unwrap_or_else(|| EnvFilter::new(default_filter(verbosity)))
}

/// Whether log lines may carry colour: stderr is a terminal and NO_COLOR
/// is unset or empty (https://no-color.org).
fn colour() -> bool {
    use std::io::IsTerminal;
    std::io::stderr().is_terminal() && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty())
}

fn init_tracing(verbosity: u8) {
    let filter = log_filter(verbosity)
        // sqlx warns about an unknown connection parameter with its value
        // (`?passwd=...`, `?Password=...`): never, whatever the filter says.
        .add_directive(
            "sqlx_postgres::options=error"
                .parse()
                .expect("a valid directive"),
        );
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(colour())
        .with_writer(|| progress::LogWriter)
        .try_init();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_filters_parse() {
        for v in 0..=4 {
            tracing_subscriber::EnvFilter::try_new(default_filter(v)).expect("a valid filter");
        }
    }
}
