//! `awa worker ...`

use clap::{Args, Subcommand};

#[derive(Debug, Subcommand)]
pub enum WorkerCommand {
    /// Serve queues with one built-in handler for every job kind, until
    /// Ctrl-C / SIGTERM (or, with --exit-when-idle, until nothing is left).
    Run(WorkerRunArgs),
}

#[derive(Debug, Args)]
pub struct WorkerRunArgs {
    /// A queue to serve; repeat for more.
    #[arg(long = "queue", value_name = "QUEUE", required = true)]
    pub queues: Vec<String>,
    /// noop | sleep:MS | fail | fail-first:N | chaos:FILE (chaos tests: records
    /// each execution in FILE; kinds poison-* return poison results)
    #[arg(long)]
    pub handler: String,
    /// Jobs of each queue run at once (1 to 4096).
    #[arg(long, default_value_t = 32, allow_negative_numbers = true)]
    pub concurrency: i64,
    /// Stop once the queues have no unfinished jobs (checked twice, 200 ms apart).
    #[arg(long)]
    pub exit_when_idle: bool,
    /// Do not also run as a maintenance leader candidate. Retries and
    /// scheduled jobs then wait for a maintenance leader elsewhere.
    #[arg(long)]
    pub no_maintenance: bool,
    #[command(flatten)]
    pub cadence: super::maint::MaintCadence,
}
