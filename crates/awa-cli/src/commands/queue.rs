//! `awa queue ...`

use crate::cli::{Cli, ConfigureArgs, QueueCommand, QueueStatsArgs, Switch};
use crate::{db, error::CliError, input, output};
use awa_control::limits::{self, ArgsPath, GlobalConcurrency, LimitChange, QueueLimit, RateLimit};
use awa_control::queues::{QueueConfig, QueueSettings};
use awa_core::{JobState, QueueName, bounds};
use awa_history::{HistoryPlane, PgHistoryPlane};
use std::collections::BTreeMap;
use std::time::Duration;

pub async fn run(cli: &Cli, cmd: &QueueCommand) -> Result<(), CliError> {
    match cmd {
        QueueCommand::Stats(args) => stats(cli, args).await,
        QueueCommand::Configure(args) => configure(cli, args).await,
    }
}

/// Jobs per state, per queue.
type Counts = BTreeMap<String, BTreeMap<&'static str, i64>>;

/// Every state of every queue (zeros included, so scripts can index
/// without checking; a named queue with no jobs still gets its row),
/// summed over every substrate the routing reads.
async fn gather(
    cli: &Cli,
    conn: &mut sqlx::PgConnection,
    queue: Option<&QueueName>,
) -> Result<Counts, CliError> {
    let mut raw: BTreeMap<String, BTreeMap<String, i64>> = BTreeMap::new();
    for schema in db::routing(cli, conn).await?.reads() {
        let one = PgHistoryPlane::new(schema).queue_stats(conn, queue).await?;
        for (q, counts) in one {
            let into = raw.entry(q).or_default();
            for (state, n) in counts {
                *into.entry(state.to_string()).or_default() += n;
            }
        }
    }
    let mut names: Vec<String> = raw.keys().cloned().collect();
    if let Some(q) = queue
        && !raw.contains_key(q.as_str())
    {
        names.push(q.as_str().to_string());
    }
    Ok(names
        .into_iter()
        .map(|name| {
            let counts = JobState::ALL
                .iter()
                .map(|s| {
                    let n = raw
                        .get(&name)
                        .and_then(|m| m.get(s.as_str()))
                        .copied()
                        .unwrap_or(0);
                    (s.as_str(), n)
                })
                .collect();
            (name, counts)
        })
        .collect())
}

async fn stats(cli: &Cli, args: &QueueStatsArgs) -> Result<(), CliError> {
    let queue = args.queue.clone().map(QueueName::new).transpose()?;
    if args.watch {
        let every = input::duration("--interval", &args.interval)?;
        if !(Duration::from_millis(100)..=Duration::from_secs(3600)).contains(&every) {
            return Err(CliError::Usage(format!(
                "--interval {:?} must be between 100ms and 1h",
                args.interval
            )));
        }
        let url = db::require_url(&cli.database_url)?;
        let mut conn = db::connect_migrated(url).await?;
        return watch(cli, &mut conn, queue.as_ref(), every, args.iterations).await;
    }
    let url = db::require_url(&cli.database_url)?;
    let mut conn = db::connect_migrated(url).await?;
    let full = gather(cli, &mut conn, queue.as_ref()).await?;
    // Shown under the table (the JSON keeps its shape: counts per queue;
    // `queue configure Q --json` and /api/queues carry the limits).
    let limited = limits::list(&mut conn, queue.as_ref()).await?;
    output::emit(cli.json, &full, || {
        if full.is_empty() {
            return "no jobs in any queue".into();
        }
        let mut notes = String::new();
        for l in &limited {
            let scope = l
                .kind
                .as_deref()
                .map_or(String::new(), |k| format!(" kind {}", output::clean(k)));
            notes.push_str(&format!(
                "\nlimit {}{scope}: {}",
                output::clean(&l.queue),
                output::clean(&l.describe())
            ));
        }
        let mut header = vec!["QUEUE"];
        header.extend(JobState::ALL.iter().map(|s| s.as_str()));
        let rows: Vec<Vec<String>> = full
            .iter()
            .map(|(q, counts)| {
                let mut row = vec![output::clean(q)];
                row.extend(JobState::ALL.iter().map(|s| counts[s.as_str()].to_string()));
                row
            })
            .collect();
        format!("{}{notes}", output::table(&header, &rows))
    });
    Ok(())
}

/// One queue's rates between two refreshes, per second.
#[derive(Debug, Clone, Copy, serde::Serialize)]
struct Rates {
    enqueued: f64,
    completed: f64,
    failed: f64,
}

/// Rates from two samples `secs` apart. Enqueued: the growth of every
/// count together (a new job adds one somewhere; moves between states add
/// nothing; counts of finished jobs are exact totals); a negative change
/// (dead letters purged) reads as 0.
fn rates(
    before: &BTreeMap<&'static str, i64>,
    now: &BTreeMap<&'static str, i64>,
    secs: f64,
) -> Rates {
    let total = |m: &BTreeMap<&'static str, i64>| m.values().sum::<i64>();
    let per_sec = |a: i64, b: i64| ((b - a).max(0) as f64) / secs;
    Rates {
        enqueued: per_sec(total(before), total(now)),
        completed: per_sec(before["completed"], now["completed"]),
        failed: per_sec(before["failed"], now["failed"]),
    }
}

/// `queue stats --watch`: refresh every `every`, showing counts of live
/// work and per-queue rates since the previous refresh, until Ctrl-C or
/// `iterations` refreshes (0: no limit). On a terminal the screen is
/// redrawn; otherwise one table (or, with --json, one JSON line) per
/// refresh.
async fn watch(
    cli: &Cli,
    conn: &mut sqlx::PgConnection,
    queue: Option<&QueueName>,
    every: Duration,
    iterations: u64,
) -> Result<(), CliError> {
    use std::io::IsTerminal;
    let redraw = !cli.json && std::io::stdout().is_terminal();
    let mut previous: Option<(std::time::Instant, Counts)> = None;
    let mut done = 0u64;
    // A queue that appears between two refreshes had nothing before.
    let zeros: BTreeMap<&str, i64> = JobState::ALL.iter().map(|s| (s.as_str(), 0)).collect();
    let interrupted = tokio::signal::ctrl_c();
    tokio::pin!(interrupted);
    loop {
        let now = gather(cli, conn, queue).await?;
        let at = std::time::Instant::now();
        let rows: Vec<(String, &BTreeMap<&str, i64>, Option<Rates>)> = now
            .iter()
            .map(|(q, counts)| {
                let r = previous.as_ref().map(|(t, prev)| {
                    let before = prev.get(q).unwrap_or(&zeros);
                    rates(before, counts, (at - *t).as_secs_f64().max(1e-3))
                });
                (q.clone(), counts, r)
            })
            .collect();
        if cli.json {
            let queues: BTreeMap<&str, serde_json::Value> = rows
                .iter()
                .map(|(q, counts, r)| {
                    let mut v = serde_json::json!({ "counts": counts });
                    if let Some(r) = r {
                        v["per_sec"] = serde_json::json!(r);
                    }
                    (q.as_str(), v)
                })
                .collect();
            let line = serde_json::json!({ "at": chrono::Utc::now(), "queues": queues });
            output::print_raw(&format!("{line}\n"));
        } else {
            let fmt = |x: Option<f64>| x.map_or("-".to_string(), |x| format!("{x:.1}"));
            let table_rows: Vec<Vec<String>> = rows
                .iter()
                .map(|(q, c, r)| {
                    vec![
                        output::clean(q),
                        c["available"].to_string(),
                        c["running"].to_string(),
                        (c["scheduled"] + c["retryable"] + c["snoozed"]).to_string(),
                        c["dead_lettered"].to_string(),
                        fmt(r.map(|r| r.enqueued)),
                        fmt(r.map(|r| r.completed)),
                        fmt(r.map(|r| r.failed)),
                    ]
                })
                .collect();
            let table = output::table(
                &[
                    "QUEUE",
                    "AVAILABLE",
                    "RUNNING",
                    "DEFERRED",
                    "DLQ",
                    "ENQUEUED/s",
                    "COMPLETED/s",
                    "FAILED/s",
                ],
                &table_rows,
            );
            let header = format!(
                "{} (every {}; Ctrl-C to stop)",
                chrono::Utc::now().format("%Y-%m-%d %H:%M:%S UTC"),
                humantime::format_duration(every)
            );
            if redraw {
                // Home and clear, then the new frame.
                output::print_raw(&format!("\x1b[H\x1b[2J{header}\n{table}\n"));
            } else {
                output::print_raw(&format!("{header}\n{table}\n\n"));
            }
        }
        previous = Some((at, now));
        done += 1;
        if iterations != 0 && done >= iterations {
            return Ok(());
        }
        tokio::select! {
            _ = tokio::time::sleep(every) => {}
            _ = &mut interrupted => return Ok(()),
        }
    }
}

fn queue_config(args: &ConfigureArgs) -> Result<QueueConfig, CliError> {
    let max_attempts = args
        .max_attempts
        .map(|m| bounds::MAX_ATTEMPTS.check(m))
        .transpose()?;
    let shards = args.shards.map(|s| bounds::SHARDS.check(s)).transpose()?;
    let priority_aging = match args.priority_aging.as_deref() {
        None => None,
        Some("off") => Some(Duration::ZERO),
        Some(text) => Some(input::bounded_duration(bounds::PRIORITY_AGING, text)?),
    };
    let dlq_retention = args
        .dlq_retention
        .as_deref()
        .map(|text| input::bounded_duration(bounds::DLQ_RETENTION, text))
        .transpose()?;
    let config = QueueConfig {
        dlq_enabled: args.dlq.map(|s| s == Switch::On),
        max_attempts: max_attempts.map(|m| m as i32),
        shard_count: shards.map(|s| s as i16),
        priority_aging,
        dlq_retention,
        paused: match (args.pause, args.resume) {
            (true, _) => Some(true),
            (_, true) => Some(false),
            _ => None,
        },
    };
    config.validate()?;
    Ok(config)
}

/// `--rate-limit`, `--global-concurrency` and their partitions, checked
/// before connecting. `None` when no limit flag was given.
fn limit_change(args: &ConfigureArgs) -> Result<Option<LimitChange>, CliError> {
    let path = |p: &Option<String>| p.as_deref().map(ArgsPath::parse).transpose();
    let rate = match args.rate_limit.as_deref() {
        None => None,
        Some("off") => Some(None),
        Some(text) => {
            let refuse = |why: String| {
                CliError::Usage(format!(
                    "--rate-limit {text:?} {why}; expected N/PERIOD, e.g. 100/1m or 5/1s, or off"
                ))
            };
            let (n, period) = text
                .split_once('/')
                .ok_or_else(|| refuse("has no /".into()))?;
            let jobs = n
                .trim()
                .parse::<i64>()
                .map_err(|e| refuse(format!("does not start with a count ({e})")))?;
            let period = period.trim();
            // `100/m` reads as 100 per 1m.
            let period = if period.starts_with(|c: char| c.is_ascii_alphabetic()) {
                format!("1{period}")
            } else {
                period.to_string()
            };
            let period = input::bounded_duration(bounds::RATE_PERIOD, &period)?;
            Some(Some(RateLimit {
                jobs: bounds::RATE_LIMIT.check(jobs)? as u32,
                period,
                by: path(&args.rate_limit_by)?,
            }))
        }
    };
    if args.rate_limit.as_deref() == Some("off") && args.rate_limit_by.is_some() {
        return Err(CliError::Usage(
            "--rate-limit-by needs a rate limit, not off".into(),
        ));
    }
    let concurrency = match args.global_concurrency.as_deref() {
        None => None,
        Some("off") => Some(None),
        Some(text) => {
            let jobs = text.trim().parse::<i64>().map_err(|e| {
                CliError::Usage(format!(
                    "--global-concurrency {text:?} is not a count ({e}); expected e.g. 5, or off"
                ))
            })?;
            Some(Some(GlobalConcurrency {
                jobs: bounds::GLOBAL_CONCURRENCY.check(jobs)? as u32,
                by: path(&args.partition_by)?,
            }))
        }
    };
    if args.global_concurrency.as_deref() == Some("off") && args.partition_by.is_some() {
        return Err(CliError::Usage(
            "--partition-by needs a global concurrency, not off".into(),
        ));
    }
    if rate.is_none() && concurrency.is_none() {
        if args.kind.is_some() {
            return Err(CliError::Usage(
                "--kind says which jobs --rate-limit or --global-concurrency applies to; give one"
                    .into(),
            ));
        }
        return Ok(None);
    }
    let change = LimitChange {
        kind: args.kind.clone(),
        rate,
        concurrency,
    };
    change.validate()?;
    Ok(Some(change))
}

/// What `queue configure` prints: the settings and the queue's limits.
#[derive(serde::Serialize)]
struct Configured {
    #[serde(flatten)]
    settings: QueueSettings,
    limits: Vec<QueueLimit>,
}

async fn configure(cli: &Cli, args: &ConfigureArgs) -> Result<(), CliError> {
    let queue = QueueName::new(args.queue.clone())?;
    let config = queue_config(args)?;
    let change = limit_change(args)?;
    let url = db::require_url(&cli.database_url)?;
    let mut conn = db::connect_migrated(url).await?;
    // Queue settings are database-wide; a pin must still name a substrate.
    db::check_pinned(cli, &mut conn).await?;
    let settings = config.apply(&mut conn, &queue).await?;
    let limits = match change {
        Some(change) => change.apply(&mut conn, &queue).await?,
        None => limits::list(&mut conn, Some(&queue)).await?,
    };
    let out = Configured { settings, limits };
    output::emit(cli.json, &out, || {
        let mut text = settings_text(&out.settings);
        for l in &out.limits {
            let scope = l
                .kind
                .as_deref()
                .map_or(String::new(), |k| format!(" (kind {})", output::clean(k)));
            text.push_str(&format!("\nlimit{scope}: {}", output::clean(&l.describe())));
        }
        text
    });
    Ok(())
}

fn settings_text(s: &QueueSettings) -> String {
    let secs = |x: f64| match Duration::try_from_secs_f64(x) {
        Ok(d) => humantime::format_duration(d).to_string(),
        Err(_) => format!("{x}s"),
    };
    let aging = match s.priority_aging_secs {
        Some(x) if x > 0.0 => format!("every {}", secs(x)),
        _ => "off".into(),
    };
    [
        ("queue", output::clean(&s.queue)),
        ("paused", if s.paused { "yes" } else { "no" }.into()),
        ("dlq", if s.dlq_enabled { "on" } else { "off" }.into()),
        ("dlq_retention", secs(s.dlq_retention_secs)),
        ("max_attempts", s.max_attempts.to_string()),
        ("shards", s.shard_count.to_string()),
        ("priority_aging", aging),
    ]
    .iter()
    .map(|(k, v)| format!("{k}: {v}"))
    .collect::<Vec<_>>()
    .join("\n")
}
