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
    #[command(flatten)]
    pub cadence: MaintCadence,
}

/// Maintenance cadences shared by `maint run` and `worker run`.
#[derive(Debug, Clone, Args)]
pub struct MaintCadence {
    /// How often each ring rotates (e.g. 200ms, 30s). Terminal history is
    /// kept for about slot count x this.
    #[arg(long, value_name = "DUR", default_value = "30s")]
    pub rotate_interval: String,
    /// An attempt with no heartbeat for this long is rescued and retried.
    #[arg(long, value_name = "DUR", default_value = "60s")]
    pub rescue_after: String,
}
