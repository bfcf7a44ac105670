//! `awa maint ...`

use clap::{Args, Subcommand};

#[derive(Debug, Subcommand)]
pub enum MaintCommand {
    /// Run as a maintenance leader candidate until Ctrl-C / SIGTERM.
    Run(MaintRunArgs),
}

#[derive(Debug, Args)]
pub struct MaintRunArgs {
    /// Run one pass of each task now, without leader election, and exit.
    #[arg(long)]
    pub once: bool,
}
