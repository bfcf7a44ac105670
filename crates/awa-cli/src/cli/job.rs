//! `awa job ...`

use clap::{Args, Subcommand};

#[derive(Debug, Subcommand)]
pub enum JobCommand {
    /// Enqueue a job, or --count copies of it in one transaction.
    Enqueue(EnqueueArgs),
    /// Show everything known about one job.
    Dump(JobIdArg),
    /// Cancel a job that has not finished yet.
    Cancel(JobIdArg),
    /// List jobs, newest first.
    List(JobListArgs),
}

#[derive(Debug, Args)]
pub struct EnqueueArgs {
    /// Letters, digits and _ - . : (up to 63 bytes).
    #[arg(long)]
    pub queue: String,
    /// What the job is; workers pick a handler by it.
    #[arg(long)]
    pub kind: String,
    /// Job arguments as JSON ({} when left out); `-` reads them from stdin.
    #[arg(long, conflicts_with = "args_file")]
    pub args: Option<String>,
    /// Read the job arguments (JSON) from this file, for arguments larger
    /// than the command line allows. A job's args and metadata may hold up
    /// to the substrate's max_job_bytes (1 MiB by default).
    #[arg(long, value_name = "PATH")]
    pub args_file: Option<std::path::PathBuf>,
    /// 1 runs first, 4 last (3 by default).
    #[arg(long, default_value_t = awa_core::Priority::DEFAULT.get().into(), allow_negative_numbers = true)]
    pub priority: i64,
    /// Run no earlier than this: an RFC 3339 time (2026-12-01T10:00:00Z) or
    /// a duration from now (+10m, 2h, 90s, "1h 30m"; the + is optional).
    #[arg(long, value_name = "TIME|+DUR")]
    pub run_at: Option<String>,
    /// 1 to 1000; the queue's default when left out.
    #[arg(long, allow_negative_numbers = true)]
    pub max_attempts: Option<i64>,
    /// At most one unfinished job holds a key. When another job holds it,
    /// nothing is enqueued and awa exits with code 3, naming that job
    /// (`held_by` in the --json error).
    #[arg(long)]
    pub unique_key: Option<String>,
    /// Free-form JSON kept with the job.
    #[arg(long)]
    pub metadata: Option<String>,
    /// Enqueue this many copies (1 to 1000000), all or none.
    #[arg(long, default_value_t = 1, allow_negative_numbers = true)]
    pub count: i64,
}

#[derive(Debug, Args)]
pub struct JobIdArg {
    #[arg(allow_negative_numbers = true)]
    pub id: i64,
}

#[derive(Debug, Args)]
pub struct JobListArgs {
    /// Only this queue.
    #[arg(long)]
    pub queue: Option<String>,
    /// available, scheduled, retryable, snoozed, running, completed, failed,
    /// cancelled or dead_lettered.
    #[arg(long)]
    pub state: Option<String>,
    /// At most this many jobs (1 to 10000).
    #[arg(long, default_value_t = 50, allow_negative_numbers = true)]
    pub limit: i64,
}
