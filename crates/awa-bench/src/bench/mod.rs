//! `cargo xtask bench`: throughput, latency and PostgreSQL-side cost of the
//! job path, scenario by scenario, each on a fresh database.
//!
//! By default on a private throwaway cluster with PostgreSQL's defaults
//! (autovacuum on, JIT as configured by default; Awa's sessions, and the
//! bench's, set `jit = off` as Awa's own do), or on the server named by
//! `DATABASE_URL`. Every timed phase that reads a backlog it did not make
//! (the drains, `claim-cost`, `--explain`'s profiles) starts after a
//! `VACUUM ANALYZE` of its database, as autovacuum would have done after
//! the enqueue, and every worker runs with its maintenance leader
//! candidate, as `awa worker run` does by default. The dead-tuple figure
//! comes from `drain`'s own phase with autovacuum off on its tables. The
//! report's first line says all this (`meta.conditions`). Figures are
//! reported, never judged: nothing here fails because it is slow.
//!
//! `cargo xtask bench` is a debug build; measure with
//! `cargo run --release -p xtask -- bench`.
//!
//! `args` is the command line; `ctx` what every scenario gets; each
//! scenario is a module (`climb` is how `steady` and `procs` choose their
//! rates; `claim_cost` is scenario `claim-cost`); `report`, `compare`,
//! `targets` and `print` make the report.

mod args;
mod baseline;
mod claim_cost;
mod climb;
mod compare;
mod cost;
mod ctx;
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
use args::{Scenario, selected};
use awa_harness::{ClusterOptions, PgServer, ServerKind};
use ctx::{Ctx, ScenarioDb};
use sqlx::{Connection, PgConnection};
use std::collections::BTreeMap;
use std::process::ExitCode;
use std::sync::Mutex;
use std::time::Instant;

pub use args::BenchArgs;
pub use procs::{ProcArgs, child as proc_child};

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
    // PostgreSQL's defaults, autovacuum included (runs before 2026-12-07
    // set autovacuum=off and measured never-analyzed tables).
    let opts = ClusterOptions::postgres_defaults().use_database_url(true);
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
    let autovacuum = settings.get("autovacuum").is_some_and(|v| v == "on");
    let conditions = conditions(autovacuum, settings.get("jit").map_or("?", String::as_str));

    let ctx = Ctx {
        server,
        quick: args.quick,
        json: args.json,
        postmaster_pid,
        baseline: scenarios
            .contains(&Scenario::Baseline)
            .then_some(args.baseline_complete),
        drain_concurrency: args.drain_concurrency.map(usize::from),
        drain_workers: args.drain_workers.map(usize::from),
        drain_job_time: std::time::Duration::from_millis(args.drain_job_ms.unwrap_or(0).into()),
        procs_connections: args.procs_connections.map(usize::from),
        statements,
        autovacuum,
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
    ctx.say(format!("measured under: {conditions}"));
    if !autovacuum {
        ctx.note(
            "the server runs with autovacuum off: figures are not those of PostgreSQL's defaults",
        );
    }
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
        conditions,
    );
    if ctx.baseline.is_some() {
        ctx.say(
            "baseline: each enqueue, drain, steady, pinned and procs run is followed by the same run \
             against a plain SKIP LOCKED jobs table (marked [baseline])",
        );
    }
    for scenario in &scenarios {
        match scenario {
            Scenario::Enqueue => report.put(|s| &mut s.enqueue, enqueue::run(&ctx).await?),
            Scenario::Drain => {
                let (jobs, dead) = if ctx.quick {
                    (drain::QUICK_JOBS, drain::QUICK_DEAD_TUPLE_JOBS)
                } else {
                    (drain::JOBS, drain::DEAD_TUPLE_JOBS)
                };
                let measured = drain::run(&ctx, jobs, drain::Phase::Measured).await?;
                report.put(|s| &mut s.drain, measured);
                let dead = drain::run(&ctx, dead, drain::Phase::DeadTuples).await?;
                report.put(|s| &mut s.drain_dead_tuples, dead);
            }
            Scenario::Drain1m => {
                let jobs = if ctx.quick {
                    ctx.note(format!(
                        "--quick: drain-1m drains {} jobs, not 1,000,000",
                        drain::QUICK_MILLION
                    ));
                    drain::QUICK_MILLION
                } else {
                    drain::MILLION
                };
                let run = drain::run(&ctx, jobs, drain::Phase::Measured).await?;
                report.put(|s| &mut s.drain_1m, run);
            }
            Scenario::ClaimCost => report.claim_cost = Some(claim_cost::run(&ctx).await?),
            Scenario::Steady => report.put(|s| &mut s.steady, steady::run(&ctx).await?),
            Scenario::Pinned => report.put(|s| &mut s.pinned, pinned::run(&ctx).await?),
            Scenario::Procs => report.put(|s| &mut s.procs, procs::run(&ctx).await?),
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

/// The line every report starts with: what its figures were measured
/// under.
fn conditions(autovacuum: bool, jit: &str) -> String {
    format!(
        "autovacuum {} (server setting); VACUUM ANALYZE of the scenario database after each \
         backlog is enqueued, before its timed phase (drain, drain-1m, claim-cost, --explain; \
         the other scenarios start on an empty database and have no backlog to analyze); \
         workers run their maintenance leader (one candidate per worker fleet, default \
         intervals; the baseline has none); jit {jit} on the server, off in Awa's and the \
         bench's sessions; dead tuples: what autovacuum had not removed, except drain's \
         dead-tuple phase (autovacuum off on its tables, ANALYZE only)",
        if autovacuum { "on" } else { "off" }
    )
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
