//! `awa job ...`

use clap::{ArgGroup, Args, Subcommand};

#[derive(Debug, Subcommand)]
pub enum JobCommand {
    /// Enqueue a job, or --count copies of it in one transaction.
    Enqueue(Box<EnqueueArgs>),
    /// Show everything known about one job: every attempt, and who holds
    /// it while it runs.
    Dump(JobIdArg),
    /// Cancel a job that has not finished yet, or every unfinished job of
    /// a queue that matches --state, --kind and --args-contains.
    Cancel(JobCancelArgs),
    /// List jobs, newest first.
    List(JobListArgs),
    /// Put a failed or cancelled job back as fresh work (same id, attempts
    /// start again, history kept), or every one of a queue that matches
    /// --state, --kind and --args-contains. Works whether or not the queue
    /// dead-letters (dead-lettered jobs: `awa dlq retry`).
    Retry(JobRetryArgs),
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
    /// Unique by a key derived from these parts (comma-separated or
    /// repeated): kind (always part of it), queue, args, args.FIELD (a
    /// top-level field of the args). When a duplicate exists, nothing is
    /// enqueued and awa exits with code 3, naming that job. With
    /// --unique-key, the key is one more part.
    #[arg(long, value_delimiter = ',', value_name = "PART")]
    pub unique_by: Vec<String>,
    /// One job per window of this length (whole seconds: 90s, 10m, 1h;
    /// windows aligned to the epoch, by enqueue time). Unique by kind
    /// alone when --unique-by is left out.
    #[arg(long, value_name = "DUR")]
    pub unique_period: Option<String>,
    /// Final states that keep the key until the period ends
    /// (comma-separated: completed, failed, cancelled; `none`). Default
    /// with a period: completed. Unfinished jobs always hold their key.
    #[arg(long, value_delimiter = ',', value_name = "STATE")]
    pub unique_states: Option<Vec<String>>,
    /// Free-form JSON kept with the job (an object, with --timeout).
    #[arg(long)]
    pub metadata: Option<String>,
    /// Stop the job's handler after this long (1ms to 7days: 30s, 5m,
    /// 1500ms) and fail the attempt with a timeout error, retried like any
    /// failure; over the kind's default timeout. Stored in the metadata
    /// as awa_timeout_ms.
    #[arg(long, value_name = "DUR")]
    pub timeout: Option<String>,
    /// The W3C trace context of the caller's span
    /// (00-TRACEID-SPANID-FLAGS), stored in the metadata as
    /// `awa_trace`: a worker tracing with OpenTelemetry makes the job's
    /// span its child. Read from TRACEPARENT when set.
    #[arg(long, env = "TRACEPARENT", value_name = "TRACEPARENT")]
    pub traceparent: Option<String>,
    /// The W3C tracestate that goes with --traceparent (at most 512
    /// bytes). Read from TRACESTATE when set.
    #[arg(
        long,
        env = "TRACESTATE",
        value_name = "TRACESTATE",
        requires = "traceparent"
    )]
    pub tracestate: Option<String>,
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
    /// Only this job kind.
    #[arg(long)]
    pub kind: Option<String>,
    /// Only jobs whose args contain this JSON (jsonb containment):
    /// '{"user": 42}' matches any args with that key and value.
    #[arg(long, value_name = "JSON")]
    pub args_contains: Option<String>,
    /// At most this many jobs (1 to 10000).
    #[arg(long, default_value_t = 50, allow_negative_numbers = true)]
    pub limit: i64,
}

/// `awa job retry ID` or `awa job retry --queue Q --state S [...]`.
#[derive(Debug, Args)]
#[command(group(ArgGroup::new("which").required(true).args(["id", "queue"])))]
pub struct JobRetryArgs {
    /// The failed or cancelled job to put back.
    #[arg(allow_negative_numbers = true)]
    pub id: Option<i64>,
    /// Every kept failure of this queue that matches the filters below.
    #[arg(long, requires = "state", conflicts_with = "id")]
    pub queue: Option<String>,
    /// failed or cancelled (required with --queue).
    #[arg(long, requires = "queue")]
    pub state: Option<String>,
    /// Only this job kind.
    #[arg(long, requires = "queue")]
    pub kind: Option<String>,
    /// Only jobs whose args contain this JSON (jsonb containment).
    #[arg(long, value_name = "JSON", requires = "queue")]
    pub args_contains: Option<String>,
    /// Only say how many jobs would be put back; change nothing.
    #[arg(long, requires = "queue")]
    pub dry_run: bool,
}

/// `awa job cancel ID` or `awa job cancel --queue Q [...]`.
#[derive(Debug, Args)]
#[command(group(ArgGroup::new("which").required(true).args(["id", "queue"])))]
pub struct JobCancelArgs {
    /// The unfinished job to cancel.
    #[arg(allow_negative_numbers = true)]
    pub id: Option<i64>,
    /// Every unfinished job of this queue that matches the filters below.
    #[arg(long, conflicts_with = "id")]
    pub queue: Option<String>,
    /// Only jobs in this state: available, scheduled, retryable, snoozed
    /// or running.
    #[arg(long, requires = "queue")]
    pub state: Option<String>,
    /// Only this job kind.
    #[arg(long, requires = "queue")]
    pub kind: Option<String>,
    /// Only jobs whose args contain this JSON (jsonb containment).
    #[arg(long, value_name = "JSON", requires = "queue")]
    pub args_contains: Option<String>,
    /// Only say how many jobs would be cancelled; change nothing.
    #[arg(long, requires = "queue")]
    pub dry_run: bool,
}
