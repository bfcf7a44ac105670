//! `awa maint ...`

use crate::cli::{Cli, MaintCommand, MaintRunArgs};
use crate::{db, error::CliError, input, output};
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

/// A leader candidate: pinned to one substrate (`--schema`), or
/// maintaining every substrate the storage routing reads.
pub fn spawn_leader(
    pinned: Option<&awa_core::SchemaName>,
    config: LeaderConfig,
    settings: &MaintSettings,
    pool: sqlx::PgPool,
    stop: watch::Receiver<bool>,
    role: Option<watch::Sender<Role>>,
) -> tokio::task::JoinHandle<Result<(), awa_maint::MaintError>> {
    match pinned {
        Some(schema) => {
            let tasks =
                awa_maint::tasks::standard(schema, settings, &config.instance_id.to_string());
            tokio::spawn(leader::run(config, pool, tasks, stop, role))
        }
        None => tokio::spawn(leader::run_routed(
            config,
            pool,
            settings.clone(),
            stop,
            role,
        )),
    }
}

/// Every task of one pass (`maint run --once`), named: per substrate the
/// routing reads (prefixed `schema.` when there is more than one), then
/// the database-wide ones.
fn once_tasks(
    routing: &awa_core::Routing,
    settings: &MaintSettings,
) -> Vec<(String, Arc<dyn MaintTask>)> {
    let instance = uuid::Uuid::new_v4().to_string();
    let reads = routing.reads();
    let mut out = Vec::new();
    for schema in &reads {
        let written = schema == routing.write();
        for task in awa_maint::tasks::substrate_tasks(schema, settings, &instance, written) {
            let name = if reads.len() == 1 {
                task.name().to_string()
            } else {
                format!("{schema}.{}", task.name())
            };
            out.push((name, task));
        }
    }
    for task in awa_maint::tasks::database_tasks(settings) {
        out.push((task.name().to_string(), task));
    }
    out
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
    let pinned = db::pinned(cli)?;
    if let Some(schema) = &pinned {
        let mut conn = pool.acquire().await?;
        db::require_substrate(&mut conn, schema).await?;
    }
    let config = LeaderConfig::new();
    let instance = config.instance_id;
    let (stop_tx, stop_rx) = watch::channel(false);
    let (role_tx, mut role_rx) = watch::channel(Role::Candidate);
    let candidate = spawn_leader(
        pinned.as_ref(),
        config,
        &settings,
        pool.clone(),
        stop_rx,
        Some(role_tx),
    );
    if !cli.json {
        eprintln!("maintenance candidate {instance} running; Ctrl-C or SIGTERM stops it");
    }
    let mut led = false;
    let stop = awa_maint::shutdown_signal();
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
    let routing = {
        let mut conn = pool.acquire().await?;
        db::routing(cli, &mut conn).await?
    };
    for (name, task) in once_tasks(&routing, settings) {
        let outcome = task.run_once(pool).await?;
        lines.push(format!("{name}: {}", outcome_text(&outcome)));
        outcomes.insert(name, serde_json::to_value(&outcome).unwrap_or_default());
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
