//! The child processes' side of scenario `procs`: the producer committing
//! one job per transaction at its offered rate, and the worker running them
//! until the bench closes its stdin.

use super::wire::{Common, Msg, ProcArgs, Role, emit};
use crate::BoxError;
use crate::bench::pgstats;
use crate::bench::system::System;
use crate::fleet::{self, FleetConfig};
use crate::latency::{EndToEnd, LatencyRecorder, Percentiles};
use awa_core::QueueName;
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

const PROGRESS: Duration = Duration::from_millis(50);

/// The child's side: `xtask bench-proc producer|worker`.
pub async fn child(args: ProcArgs) -> Result<ExitCode, BoxError> {
    match args.role {
        Role::Producer {
            common,
            rate,
            seconds,
            connections,
        } => producer(common, rate, seconds, connections).await,
        Role::Worker {
            common,
            concurrency,
            leader,
        } => worker(common, concurrency, leader).await,
    }
}

async fn producer(
    common: Common,
    rate: u64,
    seconds: u64,
    connections: usize,
) -> Result<ExitCode, BoxError> {
    fleet::set_ping_on_acquire(common.pool_ping);
    let system = System::from(common.system);
    let queue = QueueName::new(common.queue)?;
    let total = rate * seconds;
    let duration = Duration::from_secs(seconds);
    let connections = connections.max(1);
    let pool = fleet::pool(&common.url, connections as u32).await?;
    let mut conns = Vec::new();
    for _ in 0..connections {
        conns.push(pool.acquire().await?);
    }
    let next = Arc::new(AtomicU64::new(0));
    let committed = Arc::new(AtomicU64::new(0));
    let start = Instant::now();
    let end = start + duration;
    let mut tasks = Vec::new();
    for mut conn in conns {
        let (next, committed, queue) = (next.clone(), committed.clone(), queue.clone());
        tasks.push(tokio::spawn(async move {
            let (mut tx_us, mut lag_us) = (Vec::new(), Vec::new());
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                // Behind schedule at the end of the window: what is left
                // was not offered in time.
                if i >= total || Instant::now() >= end {
                    break;
                }
                let due = start + Duration::from_secs_f64(i as f64 / rate as f64);
                tokio::time::sleep_until(due.into()).await;
                let began = Instant::now();
                system.batch(&queue, i..i + 1).send_in_tx(&mut conn).await?;
                tx_us.push(micros(began.elapsed()));
                lag_us.push(micros(began - due));
                committed.fetch_add(1, Ordering::Relaxed);
            }
            Ok::<_, BoxError>((tx_us, lag_us))
        }));
    }
    let ticker = {
        let committed = committed.clone();
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(PROGRESS);
            loop {
                tick.tick().await;
                emit(&Msg::Produced {
                    enqueued: committed.load(Ordering::Relaxed),
                });
            }
        })
    };
    let (mut tx_us, mut lag_us) = (Vec::new(), Vec::new());
    for t in tasks {
        let (tx, lag) = t.await??;
        tx_us.extend(tx);
        lag_us.extend(lag);
    }
    let seconds = start.elapsed().as_secs_f64();
    ticker.abort();
    pool.close().await;
    emit(&Msg::ProducerDone {
        enqueued: committed.load(Ordering::Relaxed),
        seconds,
        transaction: Percentiles::of(&mut tx_us),
        start_lag: Percentiles::of(&mut lag_us),
        cpu_s: pgstats::own_cpu_s(),
    });
    Ok(ExitCode::SUCCESS)
}

fn micros(d: Duration) -> u32 {
    d.as_micros().min(u128::from(u32::MAX)) as u32
}

async fn worker(common: Common, concurrency: usize, leader: bool) -> Result<ExitCode, BoxError> {
    fleet::set_ping_on_acquire(common.pool_ping);
    let system = System::from(common.system);
    // As the steady scenario's pool, which its producer also used.
    let pool = fleet::pool(&common.url, 12).await?;
    let latency = LatencyRecorder::new();
    let end_to_end = EndToEnd::new();
    let running = system.start(
        &pool,
        &FleetConfig {
            queue: QueueName::new(common.queue)?,
            workers: 1,
            concurrency,
            leader,
            end_to_end: Some(end_to_end.clone()),
            job_time: std::time::Duration::ZERO,
        },
        latency.clone(),
    );
    // Stop when stdin says so or closes (the bench went away).
    let (stop_tx, mut stop_rx) = tokio::sync::oneshot::channel::<()>();
    std::thread::spawn(move || {
        let mut line = String::new();
        let _ = std::io::stdin().read_line(&mut line);
        let _ = stop_tx.send(());
    });
    emit(&Msg::Ready);
    let mut tick = tokio::time::interval(PROGRESS);
    loop {
        tokio::select! {
            _ = &mut stop_rx => break,
            _ = tick.tick() => emit(&Msg::Worker {
                claimed: running.claimed(),
                completed: running.completed(),
            }),
        }
    }
    let totals = running.stop().await?;
    pool.close().await;
    emit(&Msg::WorkerDone {
        totals,
        latency: latency.percentiles(),
        end_to_end: end_to_end.latency.percentiles(),
        cpu_s: pgstats::own_cpu_s(),
    });
    Ok(ExitCode::SUCCESS)
}
