//! What the bench and the child processes of scenario `procs` say to each
//! other: the children's command line (`bench-proc producer|worker`, the
//! database in the environment) and the JSON lines they print.

use super::{CONCURRENCY, MIN_CONNECTIONS};
use crate::bench::baseline;
use crate::bench::system::System;
use crate::fleet::FleetTotals;
use crate::latency::Percentiles;

pub const URL_ENV: &str = "AWA_BENCH_PROC_URL";

/// The `--system` of a child process.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ProcSystem {
    Awa,
    BaselineUpdate,
    BaselineDelete,
    Plain,
}

impl From<System> for ProcSystem {
    fn from(s: System) -> Self {
        match s {
            System::Awa => ProcSystem::Awa,
            System::Baseline(baseline::Completion::Update) => ProcSystem::BaselineUpdate,
            System::Baseline(baseline::Completion::Delete) => ProcSystem::BaselineDelete,
            System::Plain => ProcSystem::Plain,
        }
    }
}

impl From<ProcSystem> for System {
    fn from(s: ProcSystem) -> Self {
        match s {
            ProcSystem::Awa => System::Awa,
            ProcSystem::BaselineUpdate => System::Baseline(baseline::Completion::Update),
            ProcSystem::BaselineDelete => System::Baseline(baseline::Completion::Delete),
            ProcSystem::Plain => System::Plain,
        }
    }
}

impl ProcSystem {
    pub(super) fn arg(self) -> &'static str {
        match self {
            ProcSystem::Awa => "awa",
            ProcSystem::BaselineUpdate => "baseline-update",
            ProcSystem::BaselineDelete => "baseline-delete",
            ProcSystem::Plain => "plain",
        }
    }
}

/// `xtask bench-proc`: one side of scenario `procs`, started by the bench.
#[derive(Debug, clap::Args)]
pub struct ProcArgs {
    #[command(subcommand)]
    pub(super) role: Role,
}

#[derive(Debug, clap::Subcommand)]
pub(super) enum Role {
    /// Commit one job per transaction at `--rate` for `--seconds`.
    Producer {
        #[command(flatten)]
        common: Common,
        #[arg(long)]
        rate: u64,
        #[arg(long)]
        seconds: u64,
        #[arg(long, default_value_t = MIN_CONNECTIONS)]
        connections: usize,
    },
    /// Run one worker (and, for ours, a leader) until stdin closes.
    Worker {
        #[command(flatten)]
        common: Common,
        #[arg(long, default_value_t = CONCURRENCY)]
        concurrency: usize,
        #[arg(long)]
        leader: bool,
    },
}

#[derive(Debug, clap::Args)]
pub(super) struct Common {
    /// The database (from the environment, so it stays off the command
    /// line).
    #[arg(long, env = URL_ENV, hide_env_values = true)]
    pub(super) url: String,
    #[arg(long, value_enum)]
    pub(super) system: ProcSystem,
    #[arg(long)]
    pub(super) queue: String,
    #[arg(long)]
    pub(super) pool_ping: bool,
}

/// What the child processes print, one JSON object per line.
#[derive(Debug, serde::Serialize, serde::Deserialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub(super) enum Msg {
    /// The worker runs.
    Ready,
    Worker {
        claimed: u64,
        completed: u64,
    },
    Produced {
        enqueued: u64,
    },
    ProducerDone {
        enqueued: u64,
        seconds: f64,
        transaction: Percentiles,
        start_lag: Percentiles,
        cpu_s: Option<f64>,
    },
    WorkerDone {
        totals: FleetTotals,
        latency: Percentiles,
        end_to_end: Percentiles,
        cpu_s: Option<f64>,
    },
}

pub(super) fn emit(msg: &Msg) {
    // Rust's stdout is line-buffered: each line goes out whole, at once.
    println!(
        "{}",
        serde_json::to_string(msg).expect("messages serialize")
    );
}
