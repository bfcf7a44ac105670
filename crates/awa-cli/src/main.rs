//! `awa`: the operator command line.
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
mod shutdown;

use clap::Parser;
use std::process::ExitCode;

fn main() -> ExitCode {
    let cli = cli::Cli::parse();
    init_tracing(cli.verbose);
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(err) => {
            eprintln!("error: could not start the async runtime: {err}");
            return ExitCode::FAILURE;
        }
    };
    let json = cli.json;
    match runtime.block_on(commands::run(cli)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            output::print_error(json, &err);
            ExitCode::FAILURE
        }
    }
}

fn init_tracing(verbose: bool) {
    let default = if verbose { "info,awa=debug" } else { "warn" };
    let filter = tracing_subscriber::EnvFilter::try_from_env("AWA_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default))
        // sqlx warns about an unknown connection parameter with its value
        // (`?passwd=...`, `?Password=...`): never, whatever AWA_LOG says.
        .add_directive(
            "sqlx_postgres::options=error"
                .parse()
                .expect("a valid directive"),
        );
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .try_init();
}
