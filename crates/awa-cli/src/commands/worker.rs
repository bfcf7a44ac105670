//! `awa worker run`

use crate::cli::{Cli, WorkerCommand, WorkerRunArgs};
use crate::handlers::Builtin;
use crate::{db, error::CliError, output, shutdown};
use awa_core::QueueName;
use awa_exec::worker::{StatsSnapshot, Worker, WorkerConfig};
use awa_history::{HistoryPlane, PgHistoryPlane};
use awa_maint::leader::{self, LeaderConfig};
use std::time::Duration;
use tokio::sync::watch;

const MAX_POOL: u32 = 64;
const IDLE_CHECK: Duration = Duration::from_millis(200);

pub async fn run(cli: &Cli, cmd: &WorkerCommand) -> Result<(), CliError> {
    match cmd {
        WorkerCommand::Run(args) => run_worker(cli, args).await,
    }
}

async fn run_worker(cli: &Cli, args: &WorkerRunArgs) -> Result<(), CliError> {
    let mut queues: Vec<QueueName> = Vec::new();
    for name in &args.queues {
        let q = QueueName::new(name.clone())?;
        if !queues.contains(&q) {
            queues.push(q);
        }
    }
    let handler: Builtin = args.handler.parse()?;
    let concurrency = awa_core::bounds::CONCURRENCY.check(args.concurrency)? as usize;
    let settings = super::maint::settings(&args.cadence)?;
    let config = WorkerConfig::new(
        db::schema(),
        queues.iter().map(|q| (q.clone(), concurrency)).collect(),
    );
    config.validate()?;
    // Everything is validated: only now connect and write.
    let url = db::require_url(&cli.database_url)?;
    // Handlers here do no database work, so a quarter of the concurrency
    // covers claims, finishes and heartbeats; +4 for the listener,
    // maintenance and the idle check.
    let pool_size = ((concurrency / 4 + 4) as u32).min(MAX_POOL);
    let pool = db::pool_migrated(url, pool_size).await?;

    let registration = crate::db::Registration::start(
        &pool,
        config.instance_id,
        "worker",
        queues.iter().map(|q| q.to_string()).collect(),
    )
    .await?;
    let mut worker = Worker::new(pool.clone(), config);
    worker.register_default(handler);

    let (stop_tx, stop_rx) = watch::channel(false);
    let leader_config = LeaderConfig::new();
    let tasks = super::maint::tasks(&settings, leader_config.instance_id);
    let maintenance = (!args.no_maintenance).then(|| {
        tokio::spawn(leader::run(
            leader_config,
            pool.clone(),
            tasks,
            stop_rx,
            None,
        ))
    });

    let idle_pool = pool.clone();
    let exit_when_idle = args.exit_when_idle;
    let stop = async move {
        tokio::select! {
            _ = shutdown::signalled() => {}
            _ = idle(&idle_pool, &queues), if exit_when_idle => {}
        }
    };
    let result = worker.run(stop).await;

    let _ = stop_tx.send(true);
    registration.stop(&pool).await;
    if let Some(candidate) = maintenance {
        match candidate.await {
            Ok(Ok(())) => {}
            Ok(Err(err)) => {
                tracing::warn!(error = %err, "maintenance candidate stopped with an error")
            }
            Err(err) => tracing::warn!(error = %err, "maintenance candidate task failed"),
        }
    }
    pool.close().await;
    let stats = result?;
    output::emit(cli.json, &stats, || stats_text(&stats));
    Ok(())
}

/// Resolves once no job of `queues` is unfinished on two checks in a row:
/// one check could land between a retry's finish and its promotion.
async fn idle(pool: &sqlx::PgPool, queues: &[QueueName]) {
    let plane = PgHistoryPlane::new(db::schema());
    let mut quiet = 0;
    loop {
        tokio::time::sleep(IDLE_CHECK).await;
        let pending = async {
            let mut conn = pool.acquire().await?;
            plane
                .pending(&mut conn, queues)
                .await
                .map_err(CliError::from)
        }
        .await;
        match pending {
            Ok(0) => quiet += 1,
            Ok(_) => quiet = 0,
            Err(err) => {
                tracing::warn!(error = %err, "idle check failed; will check again");
                quiet = 0;
            }
        }
        if quiet >= 2 {
            return;
        }
    }
}

fn stats_text(s: &StatsSnapshot) -> String {
    format!(
        "worker stopped: claimed {}, completed {}, retried {}, snoozed {}, cancelled {}, \
         failed {}, dead-lettered {}, released {}, rejected {}",
        s.claimed,
        s.completed,
        s.retried,
        s.snoozed,
        s.cancelled,
        s.failed,
        s.dead_lettered,
        s.released,
        s.rejected
    )
}
