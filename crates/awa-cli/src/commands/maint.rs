//! `awa maint ...`

use crate::cli::{Cli, MaintCommand, MaintRunArgs};
use crate::{db, error::CliError, input, output, shutdown};
use awa_core::bounds;
use awa_maint::leader::{self, LeaderConfig, Role};
use awa_maint::tasks::{MaintSettings, MaintTask, TaskOutcome};
use std::sync::Arc;
use tokio::sync::watch;

/// Connections for maintenance alone: the leader's lock connection is
/// separate, and tasks run one pass at a time each.
const POOL_SIZE: u32 = 6;

/// The maintenance settings asked for, checked against their bounds.
/// Called before anything connects.
pub fn settings(cadence: &crate::cli::MaintCadence) -> Result<MaintSettings, CliError> {
    let settings = MaintSettings {
        rotate_interval: input::bounded_duration(
            bounds::ROTATE_INTERVAL,
            &cadence.rotate_interval,
        )?,
        rescue_stale: input::bounded_duration(bounds::RESCUE_AFTER, &cadence.rescue_after)?,
        ..MaintSettings::default()
    };
    settings.validate()?;
    Ok(settings)
}

/// Every maintenance task, at validated settings.
pub fn tasks(settings: &MaintSettings, instance: uuid::Uuid) -> Vec<Arc<dyn MaintTask>> {
    awa_maint::tasks::standard(&db::schema(), settings, &instance.to_string())
}

pub async fn run(cli: &Cli, cmd: &MaintCommand) -> Result<(), CliError> {
    match cmd {
        MaintCommand::Run(args) => run_maint(cli, args).await,
    }
}

async fn run_maint(cli: &Cli, args: &MaintRunArgs) -> Result<(), CliError> {
    // Validate everything before connecting.
    let settings = settings(&args.cadence)?;
    let url = db::require_url(&cli.database_url)?;
    let pool = db::pool_migrated(url, POOL_SIZE).await?;
    if args.once {
        let result = once(cli, &settings, &pool).await;
        pool.close().await;
        return result;
    }
    let config = LeaderConfig::new();
    let instance = config.instance_id;
    let tasks = tasks(&settings, instance);
    let (stop_tx, stop_rx) = watch::channel(false);
    let (role_tx, mut role_rx) = watch::channel(Role::Candidate);
    let candidate = tokio::spawn(leader::run(
        config,
        pool.clone(),
        tasks,
        stop_rx,
        Some(role_tx),
    ));
    if !cli.json {
        eprintln!("maintenance candidate {instance} running; Ctrl-C or SIGTERM stops it");
    }
    let mut led = false;
    let stop = shutdown::signalled();
    tokio::pin!(stop);
    loop {
        tokio::select! {
            _ = &mut stop => break,
            changed = role_rx.changed() => {
                if changed.is_err() {
                    break;
                }
                let role = *role_rx.borrow_and_update();
                led |= role == Role::Leader;
                if !cli.json {
                    eprintln!("{}", match role {
                        Role::Leader => "leading maintenance",
                        Role::Candidate => "not leading; waiting for the leader lock",
                    });
                }
            }
        }
    }
    let _ = stop_tx.send(true);
    let ended = candidate.await;
    pool.close().await;
    match ended {
        Ok(Ok(())) => {}
        Ok(Err(err)) => return Err(err.into()),
        Err(join) => {
            return Err(CliError::Internal(format!(
                "the maintenance candidate {join}"
            )));
        }
    }
    let value = serde_json::json!({ "instance_id": instance.to_string(), "led": led });
    output::emit(cli.json, &value, || {
        format!(
            "maintenance candidate {instance} stopped ({})",
            if led {
                "it led for a while"
            } else {
                "it never led"
            }
        )
    });
    Ok(())
}

/// One pass of every task, without election: each task is safe to run
/// beside a leader.
async fn once(cli: &Cli, settings: &MaintSettings, pool: &sqlx::PgPool) -> Result<(), CliError> {
    let mut outcomes = serde_json::Map::new();
    let mut lines = Vec::new();
    for task in tasks(settings, uuid::Uuid::new_v4()) {
        let outcome = task.run_once(pool).await?;
        lines.push(format!("{}: {}", task.name(), outcome_text(&outcome)));
        outcomes.insert(
            task.name().to_string(),
            serde_json::to_value(&outcome).unwrap_or_default(),
        );
    }
    output::emit(cli.json, &outcomes, || lines.join("\n"));
    Ok(())
}

fn outcome_text(outcome: &TaskOutcome) -> String {
    match outcome {
        TaskOutcome::Worked { items } => format!("worked on {items} item(s)"),
        TaskOutcome::Idle => "idle, nothing to do".into(),
        TaskOutcome::Skipped { reason } => format!("skipped: {}", output::clean(reason)),
    }
}
