//! One module per command group.

mod cron;
mod dlq;
mod job;
mod job_bulk;
mod maint;
mod migrate;
mod queue;
mod serve;
mod storage;
mod worker;

use crate::cli::{Cli, Command};
use crate::error::CliError;

pub async fn run(cli: Cli) -> Result<(), CliError> {
    match &cli.command {
        Command::Migrate(args) => migrate::run(&cli, args).await,
        Command::Storage(cmd) => storage::run(&cli, cmd).await,
        Command::Job(cmd) => job::run(&cli, cmd).await,
        Command::Queue(cmd) => queue::run(&cli, cmd).await,
        Command::Dlq(cmd) => dlq::run(&cli, cmd).await,
        Command::Worker(cmd) => worker::run(&cli, cmd).await,
        Command::Maint(cmd) => maint::run(&cli, cmd).await,
        Command::Cron(cmd) => cron::run(&cli, cmd).await,
        Command::Serve(args) => serve::run(&cli, args).await,
    }
}
