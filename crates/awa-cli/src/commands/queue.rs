//! `awa queue ...`

use crate::cli::{Cli, ConfigureArgs, QueueCommand, QueueStatsArgs, Switch};
use crate::{db, error::CliError, input, output};
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

async fn stats(cli: &Cli, args: &QueueStatsArgs) -> Result<(), CliError> {
    let queue = args.queue.clone().map(QueueName::new).transpose()?;
    let url = db::require_url(&cli.database_url)?;
    let mut conn = db::connect_migrated(url).await?;
    // Summed over every substrate the routing reads.
    let mut raw: BTreeMap<String, BTreeMap<String, i64>> = BTreeMap::new();
    for schema in db::routing(cli, &mut conn).await?.reads() {
        let one = PgHistoryPlane::new(schema)
            .queue_stats(&mut conn, queue.as_ref())
            .await?;
        for (q, counts) in one {
            let into = raw.entry(q).or_default();
            for (state, n) in counts {
                *into.entry(state.to_string()).or_default() += n;
            }
        }
    }
    // Every state of every queue, zeros included, so scripts can index
    // without checking; a named queue with no jobs still gets its row.
    let mut names: Vec<String> = raw.keys().cloned().collect();
    if let Some(q) = &queue
        && !raw.contains_key(q.as_str())
    {
        names.push(q.as_str().to_string());
    }
    let full: BTreeMap<String, BTreeMap<&str, i64>> = names
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
        .collect();
    output::emit(cli.json, &full, || {
        if full.is_empty() {
            return "no jobs in any queue".into();
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
        output::table(&header, &rows)
    });
    Ok(())
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

async fn configure(cli: &Cli, args: &ConfigureArgs) -> Result<(), CliError> {
    let queue = QueueName::new(args.queue.clone())?;
    let config = queue_config(args)?;
    let url = db::require_url(&cli.database_url)?;
    let mut conn = db::connect_migrated(url).await?;
    // Queue settings are database-wide; a pin must still name a substrate.
    db::check_pinned(cli, &mut conn).await?;
    let settings = config.apply(&mut conn, &queue).await?;
    output::emit(cli.json, &settings, || settings_text(&settings));
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
