//! `cargo xtask bench`: throughput, latency and PostgreSQL-side cost of the
//! job path, scenario by scenario, each on a fresh database.
//!
//! By default on a private throwaway cluster with PostgreSQL's defaults
//! plus `autovacuum=off` (so dead-tuple counts show what the job path
//! leaves behind), or on the server named by `DATABASE_URL`. Figures are
//! reported, never judged: nothing here fails because it is slow.
//!
//! `cargo xtask bench` is a debug build; measure with
//! `cargo run --release -p xtask -- bench`.

mod baseline;
mod compare;
mod cost;
mod ddl;
mod drain;
mod enqueue;
mod fmt;
mod pgstats;
mod pinned;
mod plain;
mod print;
mod procs;
mod profile;
mod python;
mod report;
mod soak;
mod steady;
mod system;
mod targets;

use crate::BoxError;
use crate::fleet;
use awa_harness::{ClusterOptions, PgServer, ServerKind, TestDb, quote_ident};
use indicatif::{ProgressBar, ProgressStyle};
use sqlx::{Connection, PgConnection};
use std::collections::BTreeMap;
use std::process::ExitCode;
use std::sync::Mutex;
use std::time::Instant;
use system::System;

pub use procs::{ProcArgs, child as proc_child};

#[derive(Debug, clap::Args)]
pub struct BenchArgs {
    /// Run only this scenario (repeatable). Default: enqueue, drain,
    /// steady, pinned, procs, cost, baseline, and soak with --long. `procs`
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
    scenarios: Vec<Scenario>,
    /// How the baseline completes a job: keep the row (`update`) or
    /// delete it (`delete`).
    #[arg(long, value_enum, default_value_t = baseline::Completion::Update)]
    baseline_complete: baseline::Completion,
    /// Small sizes and short runs (a CI smoke test; well under a minute).
    #[arg(long)]
    quick: bool,
    /// Print one JSON document with every figure instead of tables.
    #[arg(long)]
    json: bool,
    /// Also run the soak scenario (1,000,000 jobs).
    #[arg(long)]
    long: bool,
    /// Also profile enqueue, claim and finish with EXPLAIN (ANALYZE,
    /// BUFFERS) and auto_explain of the statements inside (needs psql),
    /// and list the statements that took the most server time in scenarios
    /// `cost` and `procs`, with calls and mean (pg_stat_statements: the
    /// private cluster preloads it, with `track = all`; on a DATABASE_URL
    /// server only if it is already in shared_preload_libraries).
    #[arg(long)]
    explain: bool,
    /// Also write the JSON document to this file (tables still printed).
    #[arg(long, value_name = "FILE")]
    json_out: Option<std::path::PathBuf>,
    /// Keep sqlx's default of pinging every pooled connection when it is
    /// acquired (an extra round trip per claim and per finish batch).
    #[arg(long)]
    pool_ping: bool,
    /// Concurrency of the drain's one worker (default 64). The issue's
    /// second drain target is at 16, where claims sized by free permits
    /// hurt most.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u16).range(1..=1024))]
    drain_concurrency: Option<u16>,
    /// Connections of the `procs` scenario's producer process, each one
    /// one-job transaction at a time (default: one per 50 jobs/s offered,
    /// 4 to 32). With all of them busy, jobs start late and the offered
    /// rate is not met.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u16).range(1..=256))]
    procs_connections: Option<u16>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Scenario {
    Enqueue,
    Drain,
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

/// What every scenario needs.
#[derive(Debug)]
pub struct Ctx {
    pub server: PgServer,
    pub quick: bool,
    pub json: bool,
    /// For CPU accounting, when the server runs on this machine.
    pub postmaster_pid: Option<i64>,
    /// Scenario `baseline` is on: how the baseline completes jobs.
    pub baseline: Option<baseline::Completion>,
    /// `--drain-concurrency`, else the drain's default.
    pub drain_concurrency: Option<usize>,
    /// `--procs-connections`, else the procs producer's default.
    pub procs_connections: Option<usize>,
    /// `--explain` and the server has pg_stat_statements loaded: runs that
    /// report their statements (scenarios `procs` and `cost`) read it.
    pub statements: bool,
    template_key: String,
    notes: Mutex<Vec<String>>,
}

/// The database one scenario (or phase) runs in.
#[derive(Debug)]
pub struct ScenarioDb {
    url: String,
    name: String,
    /// The schema the cost figures cover (`awa`, or the baseline's).
    schema: &'static str,
    // Dropping it drops the database.
    _db: Option<TestDb>,
}

impl ScenarioDb {
    pub fn url(&self) -> &str {
        &self.url
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn schema(&self) -> &'static str {
        self.schema
    }
}

impl Ctx {
    /// Progress and remarks: stdout for tables, stderr next to JSON.
    pub fn say(&self, msg: impl AsRef<str>) {
        if self.json {
            eprintln!("{}", msg.as_ref());
        } else {
            println!("{}", msg.as_ref());
        }
    }

    /// A remark that also goes into the report.
    pub fn note(&self, msg: impl Into<String>) {
        let msg = msg.into();
        self.say(format!("note: {msg}"));
        self.notes.lock().expect("notes lock").push(msg);
    }

    pub fn bar(&self, len: u64, msg: impl Into<String>) -> ProgressBar {
        let style = ProgressStyle::with_template(
            "{spinner} {msg:<24} [{bar:32}] {pos}/{len} ({per_sec}, {elapsed})",
        )
        .expect("progress template")
        .progress_chars("=> ");
        let bar = ProgressBar::new(len).with_style(style);
        bar.set_message(msg.into());
        bar
    }

    /// The systems each run of a scenario covers, ours first.
    pub fn systems(&self) -> Vec<System> {
        let mut all = vec![System::Awa];
        all.extend(self.baseline.map(System::Baseline));
        all
    }

    /// Like [`Ctx::systems`], but with `--quick` only ours: for the runs
    /// the smoke test need not repeat for the baseline (it exercises the
    /// baseline once per scenario, briefly).
    pub fn systems_unless_quick(&self) -> Vec<System> {
        if self.quick {
            vec![System::Awa]
        } else {
            self.systems()
        }
    }

    /// A fresh database for `system` (migrated for ours, the baseline's
    /// table for the baseline), with function statistics on and a
    /// checkpoint just taken (not with `--quick`), so every run starts
    /// alike.
    pub async fn fresh_db(&self, system: System) -> Result<ScenarioDb, BoxError> {
        let made = match system {
            System::Awa => {
                TestDb::new_on(&self.server, &self.template_key, |url| async move {
                    awa_maint::migrate(&url)
                        .await
                        .map(drop)
                        .map_err(|e| Box::new(e) as BoxError)
                })
                .await
            }
            System::Baseline(_) => {
                TestDb::new_on(&self.server, &baseline::template_key(), |url| async move {
                    baseline::install(&url).await
                })
                .await
            }
            System::Plain => {
                TestDb::new_on(&self.server, &plain::template_key(), |url| async move {
                    plain::install(&url).await
                })
                .await
            }
        };
        let db = match made {
            Ok(db) => ScenarioDb {
                url: db.url().to_string(),
                name: db.name().to_string(),
                schema: system.schema(),
                _db: Some(db),
            },
            Err(err) if self.server.kind() == ServerKind::External => {
                self.note(format!(
                    "cannot create a database per scenario ({err}); reusing the DATABASE_URL \
                     database, so figures of later scenarios include earlier leftovers"
                ));
                let url = self.server.url().to_string();
                match system {
                    System::Awa => drop(awa_maint::migrate(&url).await?),
                    System::Baseline(_) => baseline::install(&url).await?,
                    System::Plain => plain::install(&url).await?,
                }
                let mut conn = PgConnection::connect(&url).await?;
                let name: String = sqlx::query_scalar("SELECT current_database()::text")
                    .fetch_one(&mut conn)
                    .await?;
                let _ = conn.close().await;
                ScenarioDb {
                    url,
                    name,
                    schema: system.schema(),
                    _db: None,
                }
            }
            Err(err) => return Err(err.into()),
        };
        let mut conn = PgConnection::connect(self.server.url()).await?;
        let alter = format!(
            "ALTER DATABASE {} SET track_functions = 'pl'",
            quote_ident(&db.name)
        );
        if let Err(err) = sqlx::query(sqlx::AssertSqlSafe(alter))
            .execute(&mut conn)
            .await
        {
            self.note_once(format!(
                "track_functions could not be set ({err}); no per-function figures"
            ));
        }
        if self.quick {
            // A checkpoint per run takes seconds on a busy machine, and a
            // smoke run's figures are not for comparing.
            self.note_once(
                "--quick: no CHECKPOINT before each run, so WAL figures include more \
                 full-page images than a full run's"
                    .to_string(),
            );
        } else if let Err(err) = sqlx::query("CHECKPOINT").execute(&mut conn).await {
            self.note_once(format!(
                "CHECKPOINT before each scenario failed ({err}); WAL figures depend on \
                 when the server last checkpointed"
            ));
        }
        let _ = conn.close().await;
        Ok(db)
    }

    fn note_once(&self, msg: String) {
        if !self.notes.lock().expect("notes lock").contains(&msg) {
            self.note(msg);
        }
    }

    fn take_notes(&self) -> Vec<String> {
        std::mem::take(&mut *self.notes.lock().expect("notes lock"))
    }
}

fn selected(args: &BenchArgs) -> Vec<Scenario> {
    let mut picked = if args.scenarios.is_empty() {
        let mut all = vec![
            Scenario::Enqueue,
            Scenario::Drain,
            Scenario::Steady,
            Scenario::Pinned,
            Scenario::Procs,
            Scenario::Cost,
            Scenario::Baseline,
        ];
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

/// Settings worth knowing when reading the figures.
const SHOWN_SETTINGS: &[&str] = &[
    "server_version",
    "max_connections",
    "shared_buffers",
    "work_mem",
    "fsync",
    "synchronous_commit",
    "full_page_writes",
    "wal_level",
    "wal_compression",
    "wal_sync_method",
    "max_wal_size",
    "checkpoint_timeout",
    "autovacuum",
    "jit",
];

pub async fn run(args: BenchArgs) -> Result<ExitCode, BoxError> {
    fleet::set_ping_on_acquire(args.pool_ping);
    let scenarios = selected(&args);
    let started = Instant::now();
    let load_before = loadavg();
    let opts = ClusterOptions::postgres_defaults()
        .setting("autovacuum", "off")
        .use_database_url(true);
    let mut start_notes = Vec::new();
    let server = if args.explain {
        // pg_stat_statements for --explain's statement lists; a cluster
        // whose binaries lack it starts without.
        let with = opts
            .clone()
            .setting("shared_preload_libraries", "pg_stat_statements")
            .setting("pg_stat_statements.track", "all");
        match PgServer::start(with).await {
            Ok(server) => server,
            Err(err) => {
                start_notes.push(format!(
                    "the cluster could not preload pg_stat_statements ({err}); no statement lists"
                ));
                PgServer::start(opts).await?
            }
        }
    } else {
        PgServer::start(opts).await?
    };

    let mut conn = PgConnection::connect(server.url()).await?;
    let mut settings = BTreeMap::new();
    for name in SHOWN_SETTINGS {
        let value: String = sqlx::query_scalar("SELECT current_setting($1)")
            .bind(name)
            .fetch_one(&mut conn)
            .await?;
        settings.insert((*name).to_string(), value);
    }
    let version: String = sqlx::query_scalar("SELECT version()")
        .fetch_one(&mut conn)
        .await?;
    let postmaster_pid = if server.kind() == ServerKind::External {
        None
    } else {
        pgstats::local_postmaster(&mut conn).await
    };
    let preloaded: String =
        sqlx::query_scalar("SELECT current_setting('shared_preload_libraries')")
            .fetch_one(&mut conn)
            .await?;
    let statements = args.explain
        && preloaded
            .split(',')
            .any(|l| l.trim().trim_matches('"') == "pg_stat_statements");
    if args.explain && !statements && start_notes.is_empty() {
        start_notes
            .push("the server does not preload pg_stat_statements; no statement lists".to_string());
    }
    let _ = conn.close().await;

    let ctx = Ctx {
        server,
        quick: args.quick,
        json: args.json,
        postmaster_pid,
        baseline: scenarios
            .contains(&Scenario::Baseline)
            .then_some(args.baseline_complete),
        drain_concurrency: args.drain_concurrency.map(usize::from),
        procs_connections: args.procs_connections.map(usize::from),
        statements,
        template_key: format!("awa-migrated-{}", awa_maint::migrate::fingerprint()),
        notes: Mutex::new(Vec::new()),
    };
    for note in start_notes {
        ctx.note(note);
    }
    if ctx.statements {
        ctx.note(
            "--explain: pg_stat_statements is loaded (track = all), which adds a little \
             server CPU to every statement of every scenario in this run",
        );
    }
    match ctx.server.kind() {
        ServerKind::External => ctx.say(format!(
            "benchmarking the DATABASE_URL server ({}); its settings are its own",
            redact(ctx.server.url())
        )),
        _ => {
            let given: Vec<String> = ctx
                .server
                .settings()
                .iter()
                .map(|(k, v)| format!("{k}={v}"))
                .collect();
            ctx.say(format!(
                "benchmarking a private throwaway PostgreSQL cluster (removed at exit): \
                 PostgreSQL defaults plus {}",
                given.join(", ")
            ));
        }
    }
    ctx.say(format!(
        "settings: {}",
        settings
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join(", ")
    ));
    if cfg!(debug_assertions) {
        ctx.say(
            "this is a debug build: for real figures run `cargo run --release -p xtask -- bench`",
        );
    }

    let mut report = report::Report::new(
        &ctx,
        &version,
        settings,
        scenarios.clone(),
        args.pool_ping,
        load_before,
    );
    if ctx.baseline.is_some() {
        ctx.say(
            "baseline: each enqueue, drain, steady, pinned and procs run is followed by the same run \
             against a plain SKIP LOCKED jobs table (marked [baseline])",
        );
    }
    for scenario in &scenarios {
        let baseline = &mut report.baseline;
        match scenario {
            Scenario::Enqueue => {
                let (ours, base) = enqueue::run(&ctx).await?;
                report.enqueue = Some(ours);
                if let Some(b) = baseline {
                    b.enqueue = base;
                }
            }
            Scenario::Drain => {
                let (ours, base) = drain::run(&ctx).await?;
                report.drain = Some(ours);
                if let Some(b) = baseline {
                    b.drain = base;
                }
            }
            Scenario::Steady => {
                let (ours, base) = steady::run(&ctx).await?;
                report.steady = Some(ours);
                if let Some(b) = baseline {
                    b.steady = base;
                }
            }
            Scenario::Pinned => {
                let (ours, base) = pinned::run(&ctx).await?;
                report.pinned = Some(ours);
                if let Some(b) = baseline {
                    b.pinned = base;
                }
            }
            Scenario::Procs => {
                let (ours, base) = procs::run(&ctx).await?;
                report.procs = Some(ours);
                if let Some(b) = baseline {
                    b.procs = base;
                }
            }
            Scenario::Cost => report.cost = Some(cost::run(&ctx).await?),
            Scenario::Soak => report.soak = Some(soak::run(&ctx).await?),
            Scenario::Python => report.python = Some(python::run(&ctx).await?),
            // Runs inside the scenarios above, each run right after ours.
            Scenario::Baseline => {}
        }
    }
    if args.explain {
        report.explain = Some(profile::run(&ctx).await?);
    }
    report.meta.seconds = started.elapsed().as_secs_f64();
    report.meta.load_after = loadavg();
    report.targets = targets::targets(&report);
    report.comparison = report.compared();
    report.notes = ctx.take_notes();
    let doc = serde_json::to_string_pretty(&report)?;
    if let Some(path) = &args.json_out {
        std::fs::write(path, &doc)?;
    }
    if args.json {
        println!("{doc}");
    } else {
        print::print_human(&report);
    }
    Ok(ExitCode::SUCCESS)
}

/// The 1-, 5- and 15-minute load averages: the machine may be shared.
fn loadavg() -> Option<String> {
    let text = std::fs::read_to_string("/proc/loadavg").ok()?;
    Some(
        text.split_whitespace()
            .take(3)
            .collect::<Vec<_>>()
            .join(" "),
    )
}

fn redact(url: &str) -> String {
    awa_core::redact::redact_conninfo(url)
}

/// A small JSON payload, as a producer would send.
pub fn payload(i: u64) -> serde_json::Value {
    serde_json::json!({ "user_id": i, "op": "noop" })
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
}
