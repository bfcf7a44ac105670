//! `awa queue ...`

use clap::{ArgGroup, Args, Subcommand, ValueEnum};

#[derive(Debug, Subcommand)]
pub enum QueueCommand {
    /// Jobs per state, per queue (all queues with jobs, or one).
    Stats(QueueStatsArgs),
    /// Create a queue's settings or change some of them; shows the result.
    Configure(ConfigureArgs),
}

#[derive(Debug, Args)]
pub struct QueueStatsArgs {
    /// Only this queue (shown with zeros even when it has no jobs).
    pub queue: Option<String>,
    /// Keep refreshing, with per-queue rates: jobs enqueued, completed and
    /// failed per second since the previous refresh (--json: one JSON
    /// object per line). Stop with Ctrl-C.
    #[arg(long)]
    pub watch: bool,
    /// With --watch: the time between refreshes (100ms to 1h).
    #[arg(
        long,
        value_name = "DURATION",
        default_value = "1s",
        requires = "watch"
    )]
    pub interval: String,
    /// With --watch: stop after this many refreshes (0: never).
    #[arg(long, value_name = "N", default_value_t = 0, requires = "watch")]
    pub iterations: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Switch {
    On,
    Off,
}

#[derive(Debug, Args)]
#[command(group(ArgGroup::new("pausing").args(["pause", "resume"])))]
pub struct ConfigureArgs {
    /// The queue; created with defaults for anything not given.
    pub queue: String,
    /// Dead-letter jobs that fail for good instead of dropping them.
    #[arg(long, value_enum)]
    pub dlq: Option<Switch>,
    /// Default max attempts for new jobs (1 to 1000).
    #[arg(long, allow_negative_numbers = true)]
    pub max_attempts: Option<i64>,
    /// Lanes per priority (1 to 64); 1 keeps strict FIFO.
    #[arg(long, allow_negative_numbers = true)]
    pub shards: Option<i64>,
    /// Move waiting jobs one priority step towards 1 (first) per this long
    /// (e.g. 5m), or `off`.
    #[arg(long, value_name = "DUR|off")]
    pub priority_aging: Option<String>,
    /// Keep dead-lettered jobs this long (e.g. 14days).
    #[arg(long, value_name = "DUR")]
    pub dlq_retention: Option<String>,
    /// Stop handing out this queue's jobs.
    #[arg(long)]
    pub pause: bool,
    /// Hand out this queue's jobs again.
    #[arg(long)]
    pub resume: bool,
    /// Start at most N jobs in any window of PERIOD (sliding), across
    /// every worker: e.g. 100/1m or 5/1s; `off` removes it.
    #[arg(long, value_name = "N/PERIOD|off")]
    pub rate_limit: Option<String>,
    /// Apply the rate limit per value of this args field (e.g.
    /// args.tenant); needs --rate-limit.
    #[arg(long, value_name = "args.FIELD", requires = "rate_limit")]
    pub rate_limit_by: Option<String>,
    /// Run at most N jobs at once across every worker; `off` removes it.
    #[arg(long, value_name = "N|off")]
    pub global_concurrency: Option<String>,
    /// Apply the global concurrency per value of this args field (e.g.
    /// args.tenant); needs --global-concurrency.
    #[arg(long, value_name = "args.FIELD", requires = "global_concurrency")]
    pub partition_by: Option<String>,
    /// Make --rate-limit / --global-concurrency apply to this kind's jobs
    /// in the queue only (the queue's own limits stay as they are).
    #[arg(long, value_name = "KIND")]
    pub kind: Option<String>,
}
