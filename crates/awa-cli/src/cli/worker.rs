//! `awa worker ...`

use clap::{Args, Subcommand};

#[derive(Debug, Subcommand)]
pub enum WorkerCommand {
    /// Serve queues with one built-in handler for every job kind, until
    /// Ctrl-C / SIGTERM (or, with --exit-when-idle / --exit-when-drained,
    /// until nothing is left). On a terminal a progress line shows the jobs
    /// done, the rate and what is still awaited. With
    /// OTEL_EXPORTER_OTLP_ENDPOINT (or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT)
    /// set, each attempt's span (a child of the trace context the job was
    /// enqueued with) is exported over OTLP/HTTP; OTEL_SERVICE_NAME names
    /// the service (default awa-worker).
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
    /// Stop once the queues have no unfinished jobs at all, however far off
    /// a scheduled one is. The worker's own counters say when it is out of
    /// work; only then does it ask the database (twice, to be sure).
    #[arg(long)]
    pub exit_when_idle: bool,
    /// Stop once nothing is runnable within HORIZON from now (default 1m,
    /// which covers short retry backoffs): jobs scheduled, retrying or
    /// snoozed past it are left waiting. Give the horizon with =, e.g.
    /// --exit-when-drained=10m; --exit-when-drained=0s ignores all
    /// deferred work.
    #[arg(
        long,
        value_name = "HORIZON",
        num_args = 0..=1,
        require_equals = true,
        default_missing_value = "1m",
        conflicts_with = "exit_when_idle"
    )]
    pub exit_when_drained: Option<String>,
    /// How long a job's handler may run on after the job was cancelled (or
    /// rescued) before it is dropped and its slot freed (0s to 1h).
    #[arg(long, value_name = "DURATION", default_value = "5s")]
    pub cancel_grace: String,
    /// Do not also run as a maintenance leader candidate. Retries and
    /// scheduled jobs then wait for a maintenance leader elsewhere.
    #[arg(long)]
    pub no_maintenance: bool,
    /// Serve Prometheus metrics of this worker at http://ADDR/metrics
    /// (e.g. 127.0.0.1:9464). Off by default.
    #[arg(long, value_name = "ADDR")]
    pub metrics_addr: Option<std::net::SocketAddr>,
    /// Also answer metrics requests whose Host header names HOST (NAME or
    /// NAME:PORT); repeat for more. Without it only localhost, loopback
    /// addresses and the --metrics-addr address (any address when it is
    /// 0.0.0.0 or ::) are answered.
    #[arg(
        long = "metrics-allowed-host",
        value_name = "HOST",
        requires = "metrics_addr"
    )]
    pub metrics_allowed_hosts: Vec<String>,
    #[command(flatten)]
    pub cadence: super::maint::MaintCadence,
}
