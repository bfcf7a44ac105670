//! Command-line grammar. Job-path groups live in submodules.

mod cron;
mod dlq;
mod job;
mod maint;
mod queue;
#[cfg(test)]
mod readme;
mod serve;
mod worker;

pub use cron::*;
pub use dlq::*;
pub use job::*;
pub use maint::*;
pub use queue::*;
pub use serve::*;
pub use worker::*;

use clap::{Args, Parser, Subcommand};
use std::path::PathBuf;
use std::sync::LazyLock;

/// What `awa --version` prints after the name: this build's version and the
/// schema version it migrates to and expects, so an operator can tell which
/// binary a database needs (one at a newer schema version is refused).
static VERSION: LazyLock<String> = LazyLock::new(|| {
    format!(
        "{} (schema version {})",
        env!("CARGO_PKG_VERSION"),
        awa_maint::LATEST_VERSION
    )
});

#[derive(Debug, Parser)]
#[command(
    name = "awa",
    version = VERSION.as_str(),
    about = "Operate an Awa job queue on PostgreSQL",
    after_help = "Exit codes:\n  \
        0  success\n  \
        1  failure (the message on stderr says what to do)\n  \
        2  a bad command line: it could not be parsed, or a value in it was refused\n     \
           (out of range, not JSON, not a duration, ...); nothing was done\n  \
        3  job enqueue / job retry ID: the unique key is held by an unfinished job; nothing was \
           enqueued or retried\n\n\
        Progress bars and spinners are drawn on stderr only when it is a terminal and --json is off."
)]
pub struct Cli {
    /// PostgreSQL connection URL.
    #[arg(long, global = true, env = "DATABASE_URL", hide_env_values = true)]
    pub database_url: Option<String>,

    /// Print machine-readable JSON instead of text.
    #[arg(long, global = true)]
    pub json: bool,

    /// Work on this substrate only, whatever the storage routing says (for
    /// inspection and tests; must be a prepared substrate). By default job,
    /// queue, dlq, worker and maint commands follow the routing: new work
    /// goes where the transition state says, reads cover every substrate
    /// it reads. Storage commands take their substrate from here too.
    /// Commands whose work is database-wide (cron, queue configure, the
    /// storage transitions, storage status) still refuse a pin that names
    /// no prepared substrate, before writing anything.
    #[arg(long, global = true, env = "AWA_SCHEMA", value_name = "SCHEMA")]
    pub schema: Option<String>,

    /// Log more to stderr: -v info, -vv debug, -vvv trace. By default only
    /// warnings of awa itself and errors of its dependencies are logged.
    /// AWA_LOG, or else RUST_LOG, replaces the filter when set (e.g.
    /// RUST_LOG=awa=debug,sqlx=warn).
    #[arg(long, short, global = true, action = clap::ArgAction::Count)]
    pub verbose: u8,

    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Apply the schema migrations (or print them for an external runner).
    Migrate(MigrateArgs),
    /// Inspect and prepare queue-storage substrates.
    #[command(subcommand)]
    Storage(StorageCommand),
    /// Enqueue, inspect, list, cancel and retry jobs.
    #[command(subcommand)]
    Job(JobCommand),
    /// Queue counts and settings.
    #[command(subcommand)]
    Queue(QueueCommand),
    /// Dead-lettered jobs: list, retry, purge.
    #[command(subcommand)]
    Dlq(DlqCommand),
    /// Run a worker with a built-in handler (demos and tests).
    #[command(subcommand)]
    Worker(WorkerCommand),
    /// Run database maintenance.
    #[command(subcommand)]
    Maint(MaintCommand),
    /// Periodic jobs: list, add, remove, pause, resume, run-now.
    #[command(subcommand)]
    Cron(CronCommand),
    /// Serve the admin API, the dashboard page and /metrics (127.0.0.1:8088
    /// by default; actions need AWA_ADMIN_TOKEN, without it read-only).
    Serve(ServeArgs),
}

#[derive(Debug, Args)]
pub struct MigrateArgs {
    /// Print SQL instead of applying it: the fresh install of the newest
    /// version for an empty database, or with --from the numbered steps
    /// after version N (up to --to, else the newest).
    #[arg(long, conflicts_with = "extract_to")]
    pub sql: bool,
    /// With --sql: the version the database is at (0: empty).
    #[arg(long, value_name = "N", requires = "sql")]
    pub from: Option<i32>,
    /// Stop at version M (with --sql, the last step printed; applying, the
    /// steps up to M only).
    #[arg(long, value_name = "M", conflicts_with = "extract_to")]
    pub to: Option<i32>,
    /// Write one file per numbered step into DIR (Flyway-style names), for
    /// an external migration runner to apply in order.
    #[arg(long, value_name = "DIR")]
    pub extract_to: Option<PathBuf>,
}

#[derive(Debug, Subcommand)]
pub enum StorageCommand {
    /// Install a queue-storage substrate in a schema (activation-neutral).
    PrepareQueueStorageSchema(PrepareArgs),
    /// Show schema version, substrates, rings and transition state.
    Status(StorageStatusArgs),
    /// Grant a role exactly what workers, maintenance and the job/dlq
    /// commands need on a substrate (per table and operation; no DDL, no
    /// write on installer code or the schema version). Re-run to converge.
    GrantRuntimeRole(GrantArgs),
    /// Change a substrate's settings (run as the migrator).
    Configure(StorageConfigureArgs),
    /// Transition, step 1: name a prepared substrate as the target
    /// (steady -> prepared). Nothing moves yet; runtimes register it.
    Prepare(TransitionPrepareArgs),
    /// Transition, step 2: send new work to the target (prepared -> mixed);
    /// workers claim from both, the old substrate only drains.
    EnterMixedTransition,
    /// Transition, step 3: make the target active (mixed -> steady), once
    /// the old substrate holds no unfinished job.
    Finalize,
    /// Route back to the old substrate (prepared or mixed -> steady); work
    /// already in the target keeps running there until it drains.
    Abort,
    /// Drop a custom substrate that no routing uses and that holds no
    /// unfinished job (its history goes with it). Refused for `awa`.
    DropSubstrate(DropSubstrateArgs),
}

#[derive(Debug, Args)]
pub struct TransitionPrepareArgs {
    /// The prepared substrate to move to.
    #[arg(long)]
    pub target_schema: String,
}

#[derive(Debug, Args)]
pub struct DropSubstrateArgs {
    /// Confirm: the substrate's retained history is deleted with it.
    #[arg(long)]
    pub yes: bool,
}

#[derive(Debug, Args)]
pub struct StorageStatusArgs {
    /// Alert when a snapshot has held reclamation back longer than this.
    #[arg(long, value_name = "DURATION", default_value = "5m")]
    pub pinned_alert_after: String,
}

/// `awa --schema S storage configure ...` (default `awa`).
#[derive(Debug, Args)]
pub struct StorageConfigureArgs {
    /// Minimum time terminal history is kept after its ring slot is sealed
    /// (e.g. 2h, 7days; at most 3650days), or `auto` for (queue slots - 2)
    /// x the leader's rotate interval.
    #[arg(long, value_name = "DURATION|auto", allow_hyphen_values = true)]
    pub history_retention: Option<String>,
    /// Largest job enqueue accepts, in bytes of args plus metadata as JSON
    /// (1024 to 268435456; 1 MiB by default).
    #[arg(long, value_name = "BYTES", allow_negative_numbers = true)]
    pub max_job_bytes: Option<i64>,
    /// How long failed and cancelled jobs stay readable and retryable,
    /// whatever the ring's history retention (e.g. 7days, the default;
    /// 1s to 3650days).
    #[arg(long, value_name = "DURATION", allow_hyphen_values = true)]
    pub failure_retention: Option<String>,
}

#[derive(Debug, Args)]
pub struct GrantArgs {
    /// The existing role to grant to.
    #[arg(long)]
    pub role: String,
}

/// `awa storage prepare-queue-storage-schema --schema NAME ...`: the
/// schema is the global `--schema` (a new name; `awa` is the default
/// substrate).
#[derive(Debug, Args)]
pub struct PrepareArgs {
    /// Slots in the queue ring (ready entries and terminal history).
    #[arg(long, default_value_t = 16, allow_negative_numbers = true)]
    pub queue_slot_count: i64,
    /// Slots in the lease ring.
    #[arg(long, default_value_t = 8, allow_negative_numbers = true)]
    pub lease_slot_count: i64,
    /// Slots in the claim ring (claim batches and closure links).
    #[arg(long, default_value_t = 8, allow_negative_numbers = true)]
    pub claim_slot_count: i64,
    /// Drop and re-create the schema first. Refused for `awa` and for a
    /// schema that is in use.
    #[arg(long)]
    pub reset: bool,
}
