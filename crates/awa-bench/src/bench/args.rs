//! `cargo xtask bench`'s command line, and the scenarios it selects.

use super::baseline;

#[derive(Debug, clap::Args)]
pub struct BenchArgs {
    /// Run only this scenario (repeatable). Default: enqueue, drain,
    /// drain-1m (not with --quick), claim-cost, steady, pinned, procs,
    /// cost, baseline, and soak with --long. `drain` drains a backlog of
    /// 200,000 jobs (VACUUM ANALYZE first, leader on), then 100,000 with
    /// autovacuum off on their tables for the dead-tuple figure;
    /// `drain-1m` drains 1,000,000. `claim-cost` times one claim of 128
    /// at a backlog of 10,000 and of 1,000,000 (analyzed, one rotation
    /// old) with its buffers, and their ratio. `procs`
    /// is steady with a separate producer process committing one job per
    /// transaction and a separate worker process at concurrency 16. `cost`
    /// runs procs at 200/s and 1,000/s beside a plain INSERT + COMMIT of the
    /// same payload at the same rate, and reports server CPU per job (the
    /// cluster's processes, from /proc) and their ratio.
    /// `baseline` runs a plain SKIP LOCKED jobs table through each
    /// selected enqueue, drain, steady, pinned and procs variant right
    /// after ours (alone, it brings enqueue, drain and steady along) and
    /// reports ours, the baseline's and their ratio. `python` (never by
    /// default) builds the Python client and compares no-op Python
    /// handlers, sync and async, with a Rust one.
    #[arg(long = "scenario", value_enum)]
    pub(super) scenarios: Vec<Scenario>,
    /// How the baseline completes a job: keep the row (`update`) or
    /// delete it (`delete`).
    #[arg(long, value_enum, default_value_t = baseline::Completion::Update)]
    pub(super) baseline_complete: baseline::Completion,
    /// Small sizes and short runs (a CI smoke test; well under a minute).
    #[arg(long)]
    pub(super) quick: bool,
    /// Print one JSON document with every figure instead of tables.
    #[arg(long)]
    pub(super) json: bool,
    /// Also run the soak scenario (1,000,000 jobs).
    #[arg(long)]
    pub(super) long: bool,
    /// Also profile enqueue, claim and finish with EXPLAIN (ANALYZE,
    /// BUFFERS) and auto_explain of the statements inside (needs psql),
    /// and list the statements that took the most server time in scenarios
    /// `cost` and `procs`, with calls and mean (pg_stat_statements: the
    /// private cluster preloads it, with `track = all`; on a DATABASE_URL
    /// server only if it is already in shared_preload_libraries).
    #[arg(long)]
    pub(super) explain: bool,
    /// Also write the JSON document to this file (tables still printed).
    #[arg(long, value_name = "FILE")]
    pub(super) json_out: Option<std::path::PathBuf>,
    /// Keep sqlx's default of pinging every pooled connection when it is
    /// acquired (an extra round trip per claim and per finish batch).
    #[arg(long)]
    pub(super) pool_ping: bool,
    /// Concurrency of the drain's one worker (default 64). The issue's
    /// second drain target is at 16, where claims sized by free permits
    /// hurt most.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u16).range(1..=1024))]
    pub(super) drain_concurrency: Option<u16>,
    /// Workers of the drain (default 1), each with the drain's
    /// concurrency and its own dispatcher, as replicas of a service are:
    /// their claims on the one queue meet each other.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u16).range(1..=64))]
    pub(super) drain_workers: Option<u16>,
    /// Milliseconds each drained job's handler waits before it completes
    /// (default 0, a no-op): I/O-bound handlers, where a worker that
    /// stops claiming leaves its slots empty.
    #[arg(long, value_name = "MS", value_parser = clap::value_parser!(u16).range(0..=10000))]
    pub(super) drain_job_ms: Option<u16>,
    /// Connections of the `procs` scenario's producer process, each one
    /// one-job transaction at a time (default: one per 50 jobs/s offered,
    /// 4 to 32). With all of them busy, jobs start late and the offered
    /// rate is not met.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u16).range(1..=256))]
    pub(super) procs_connections: Option<u16>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Scenario {
    Enqueue,
    /// A backlog of 200,000, then the dead-tuple phase (100,000 jobs,
    /// autovacuum off on their tables).
    Drain,
    /// A backlog of 1,000,000 (not with --quick).
    #[value(name = "drain-1m")]
    #[serde(rename = "drain_1m")]
    Drain1m,
    /// One claim of 128 at a backlog of 10,000 and of 1,000,000.
    ClaimCost,
    Steady,
    Pinned,
    Procs,
    /// The price of one job: server CPU per job (the cluster's own process
    /// accounting) at one job per transaction, beside a plain INSERT +
    /// COMMIT of the same payload at the same rate.
    Cost,
    Soak,
    Baseline,
    /// Python no-op handlers against Rust ones (only when named).
    Python,
}

pub(super) fn selected(args: &BenchArgs) -> Vec<Scenario> {
    let mut picked = if args.scenarios.is_empty() {
        let mut all = vec![Scenario::Enqueue, Scenario::Drain];
        if !args.quick {
            all.push(Scenario::Drain1m);
        }
        all.extend([
            Scenario::ClaimCost,
            Scenario::Steady,
            Scenario::Pinned,
            Scenario::Procs,
            Scenario::Cost,
            Scenario::Baseline,
        ]);
        if args.long {
            all.push(Scenario::Soak);
        }
        all
    } else {
        args.scenarios.clone()
    };
    // The baseline runs beside ours, so alone it brings ours along.
    if picked == [Scenario::Baseline] {
        picked = vec![
            Scenario::Enqueue,
            Scenario::Drain,
            Scenario::Steady,
            Scenario::Baseline,
        ];
    }

    let mut seen = Vec::new();
    picked.retain(|s| {
        let new = !seen.contains(s);
        seen.push(*s);
        new
    });
    picked
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Debug, Parser)]
    struct Cli {
        #[command(flatten)]
        args: BenchArgs,
    }

    fn picked(argv: &[&str]) -> Vec<Scenario> {
        let cli = Cli::parse_from(std::iter::once("bench").chain(argv.iter().copied()));
        selected(&cli.args)
    }

    #[test]
    fn the_baseline_runs_by_default_and_alone_brings_ours_along() {
        assert!(picked(&[]).contains(&Scenario::Baseline));
        assert_eq!(
            picked(&["--scenario", "baseline"]),
            [
                Scenario::Enqueue,
                Scenario::Drain,
                Scenario::Steady,
                Scenario::Baseline
            ]
        );
        assert_eq!(
            picked(&["--scenario", "drain", "--scenario", "baseline"]),
            [Scenario::Drain, Scenario::Baseline]
        );
        assert_eq!(picked(&["--scenario", "drain"]), [Scenario::Drain]);
    }

    #[test]
    fn the_million_drain_is_a_default_except_with_quick() {
        assert!(picked(&[]).contains(&Scenario::Drain1m));
        assert!(picked(&[]).contains(&Scenario::ClaimCost));
        assert!(!picked(&["--quick"]).contains(&Scenario::Drain1m));
        assert_eq!(
            picked(&["--scenario", "drain-1m", "--scenario", "claim-cost"]),
            [Scenario::Drain1m, Scenario::ClaimCost]
        );
    }
}
