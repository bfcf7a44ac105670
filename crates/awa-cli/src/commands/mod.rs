//! One module per command group.

mod migrate;
mod storage;

use crate::cli::{Cli, Command};
use crate::error::CliError;

pub async fn run(cli: Cli) -> Result<(), CliError> {
    match &cli.command {
        Command::Migrate(args) => migrate::run(&cli, args).await,
        Command::Storage(cmd) => storage::run(&cli, cmd).await,
    }
}
