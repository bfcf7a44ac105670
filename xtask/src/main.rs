//! `cargo xtask`: development tasks that need a real PostgreSQL, which they
//! get from the shared harness (DATABASE_URL, else a throwaway cluster).

mod demo;
mod migrate;
mod migration;
mod release;
mod test;

// The bench and the chaos suite live in their own crate (awa-bench): here
// their command lines are parsed and they are called. `test.rs` and
// `release.rs` reach its `chaos` and `python` through these names too.
use awa_bench::{BoxError, bench, chaos, python};
use clap::{Parser, Subcommand};
use std::process::ExitCode;

#[derive(Debug, Parser)]
#[command(name = "cargo xtask")]
struct Xtask {
    #[command(subcommand)]
    task: Task,
}

#[derive(Debug, Subcommand)]
enum Task {
    /// Migrate DATABASE_URL, or a throwaway cluster when it is unset.
    Migrate,
    /// Schema migrations: `draft DESCRIPTION [--write]` derives the next
    /// numbered step from the sources and checks it against a fresh install.
    Migration(migration::MigrationArgs),
    /// Run the whole test suite against one shared throwaway cluster.
    Test {
        /// Extra arguments for `cargo test`.
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<String>,
    },
    /// Enqueue many no-op jobs, run them with in-process workers, and check
    /// each completed exactly once (DATABASE_URL, or a throwaway cluster).
    Demo {
        /// How many jobs.
        #[arg(long, default_value_t = 100_000)]
        jobs: usize,
        /// Afterwards, keep a small realistic system running (several
        /// queues, failures, retries, dead letters, scheduled and cron jobs)
        /// and serve the admin API and dashboard on it
        /// (http://127.0.0.1:8088/, AWA_ADMIN_TOKEN for actions) until
        /// Ctrl-C.
        #[arg(long)]
        serve: bool,
        /// Where --serve listens (implies --serve); port 0 picks a free one.
        #[arg(long, value_name = "ADDR")]
        listen: Option<std::net::SocketAddr>,
    },
    /// Throughput, latency and PostgreSQL-side cost of the job path (a
    /// private throwaway cluster unless DATABASE_URL is set). For real
    /// figures use a release build: `cargo run --release -p xtask -- bench`.
    Bench(bench::BenchArgs),
    /// Chaos suite: `awa` worker processes under load while workers and the
    /// leader are killed with SIGKILL and PostgreSQL restarts (immediate);
    /// checks every job completed exactly once. Seconds by default,
    /// minutes with --long.
    Chaos(chaos::ChaosArgs),
    /// Check what a release would publish, without publishing: every
    /// publishable crate packages (`cargo package --no-verify`) with its
    /// license texts, README and metadata, `cargo doc` is warning-free, and
    /// the Python wheel passes `twine check --strict` with its licenses.
    #[command(name = "release-check")]
    ReleaseCheck,
    /// One side of `bench --scenario procs` (a producer or a worker
    /// process), started by the bench itself.
    #[command(name = "bench-proc", hide = true)]
    BenchProc(bench::ProcArgs),
}

fn main() -> ExitCode {
    let xtask = Xtask::parse();
    // The demo and the bench draw progress bars: only warnings by default,
    // and not sqlx's slow-statement ones (CREATE DATABASE, CHECKPOINT).
    let default_filter = match xtask.task {
        Task::Demo { .. } | Task::Bench(_) | Task::BenchProc(_) => "warn,sqlx::query=error",
        // Broken connections are what the chaos suite is about.
        // (The pool's warnings about each broken connection too.)
        Task::Chaos(_) => {
            "warn,sqlx::query=error,sqlx::postgres::notice=error,sqlx::pool=error,sqlx_core::pool=error"
        }
        _ => "info",
    };
    let _ = tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("AWA_LOG")
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default_filter)),
        )
        .with_writer(std::io::stderr)
        .try_init();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("tokio runtime");
    let result = runtime.block_on(async {
        match xtask.task {
            Task::Migrate => migrate::run().await,
            Task::Migration(args) => migration::run(args).await,
            Task::Test { args } => test::run(args).await,
            Task::Demo {
                jobs,
                serve,
                listen,
            } => {
                let serve = (serve || listen.is_some()).then(|| {
                    listen.unwrap_or_else(|| demo::DEFAULT_LISTEN.parse().expect("an address"))
                });
                demo::run(jobs, serve).await
            }
            Task::Bench(args) => bench::run(args).await,
            Task::Chaos(args) => chaos::run(args).await,
            Task::ReleaseCheck => release::run(),
            Task::BenchProc(args) => bench::proc_child(args).await,
        }
    });
    match result {
        Ok(code) => code,
        Err(err) => {
            eprintln!("error: {err}");
            ExitCode::FAILURE
        }
    }
}
