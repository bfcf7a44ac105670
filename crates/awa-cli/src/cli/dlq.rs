//! `awa dlq ...`

use clap::{ArgGroup, Args, Subcommand};

#[derive(Debug, Subcommand)]
pub enum DlqCommand {
    /// Dead-lettered jobs, most recent first.
    List(DlqListArgs),
    /// Put dead-lettered jobs back on their queues as fresh work.
    Retry(DlqSelectArgs),
    /// Delete dead-lettered jobs for good.
    Purge(DlqSelectArgs),
}

#[derive(Debug, Args)]
pub struct DlqListArgs {
    /// Only this queue.
    #[arg(long)]
    pub queue: Option<String>,
    /// At most this many entries (1 to 10000).
    #[arg(long, default_value_t = 50, allow_negative_numbers = true)]
    pub limit: i64,
}

/// Exactly one of `--id` and `--all`, so a forgotten id can never widen an
/// action to every entry.
#[derive(Debug, Args)]
#[command(group(ArgGroup::new("which").required(true).args(["id", "all"])))]
pub struct DlqSelectArgs {
    /// One dead-lettered job.
    #[arg(long, allow_negative_numbers = true)]
    pub id: Option<i64>,
    /// Every dead-lettered job (of --queue, if given).
    #[arg(long)]
    pub all: bool,
    /// Only with --all.
    #[arg(long, conflicts_with = "id")]
    pub queue: Option<String>,
}
