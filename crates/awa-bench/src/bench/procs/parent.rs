//! The bench's side of scenario `procs`: one run at one rate, with a
//! producer and a worker process it starts, hears from and stops.

use super::wire::{Msg, ProcSystem, URL_ENV};
use super::{CONCURRENCY, KEPT_UP, ProcsRun, QUEUE};
use crate::BoxError;
use crate::bench::Ctx;
use crate::bench::fmt;
use crate::bench::pgstats;
use crate::bench::system::System;
use crate::fleet::{self, FleetTotals};
use crate::latency::Percentiles;
use std::process::Stdio;
use std::time::{Duration, Instant};
use tokio::io::AsyncBufReadExt;
use tokio::sync::mpsc;

const DRAIN_TIMEOUT: Duration = Duration::from_secs(10);
const SAMPLE: Duration = Duration::from_millis(250);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Side {
    Producer,
    Worker,
}

/// Starts `xtask bench-proc ...` with its stdout read line by line into
/// `events`; `None` when its stdout closes.
fn spawn_child(
    side: Side,
    url: &str,
    args: &[String],
    events: mpsc::UnboundedSender<(Side, Option<Msg>)>,
) -> Result<tokio::process::Child, BoxError> {
    let mut child = tokio::process::Command::new(std::env::current_exe()?)
        .arg("bench-proc")
        .args(args)
        .env(URL_ENV, url)
        .stdin(if side == Side::Worker {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .kill_on_drop(true)
        .spawn()?;
    let stdout = child.stdout.take().ok_or("no stdout")?;
    tokio::spawn(async move {
        let mut lines = tokio::io::BufReader::new(stdout).lines();
        while let Ok(Some(line)) = lines.next_line().await {
            match serde_json::from_str::<Msg>(&line) {
                Ok(msg) => {
                    let _ = events.send((side, Some(msg)));
                }
                Err(_) => eprintln!("bench-proc: {line}"),
            }
        }
        let _ = events.send((side, None));
    });
    Ok(child)
}

/// The side's summary, or an error when it exits without one.
async fn expect_exit(child: &mut tokio::process::Child, what: &str) -> Result<(), BoxError> {
    let status = tokio::time::timeout(Duration::from_secs(60), child.wait())
        .await
        .map_err(|_| format!("the {what} process did not exit"))??;
    if status.success() {
        Ok(())
    } else {
        Err(format!("the {what} process failed ({status})").into())
    }
}

/// What the parent has heard from its two children.
#[derive(Debug, Default)]
struct State {
    claimed: u64,
    completed: u64,
    enqueued: u64,
    producer_done: Option<Window>,
    worker_done: Option<WorkerSummary>,
}

/// The worker's summary: totals, pickup and end-to-end latency, its CPU.
type WorkerSummary = (FleetTotals, Percentiles, Percentiles, Option<f64>);

/// The producer's summary, with the worker's completions when it came.
#[derive(Debug, Clone, Copy)]
struct Window {
    seconds: f64,
    transaction: Percentiles,
    start_lag: Percentiles,
    cpu_s: Option<f64>,
    completed: u64,
}

impl State {
    fn handle(&mut self, side: Side, msg: Option<Msg>) -> Result<(), BoxError> {
        match msg {
            Some(Msg::Worker { claimed, completed }) => {
                (self.claimed, self.completed) = (claimed, completed);
            }
            Some(Msg::Produced { enqueued }) => self.enqueued = enqueued,
            Some(Msg::ProducerDone {
                enqueued,
                seconds,
                transaction,
                start_lag,
                cpu_s,
            }) => {
                self.enqueued = enqueued;
                self.producer_done = Some(Window {
                    seconds,
                    transaction,
                    start_lag,
                    cpu_s,
                    completed: self.completed,
                });
            }
            Some(Msg::WorkerDone {
                totals,
                latency,
                end_to_end,
                cpu_s,
            }) => {
                (self.claimed, self.completed) = (totals.claimed, totals.completed);
                self.worker_done = Some((totals, latency, end_to_end, cpu_s));
            }
            Some(Msg::Ready) => {}
            None if side == Side::Worker && self.worker_done.is_none() => {
                return Err("the worker process exited early".into());
            }
            None if side == Side::Producer && self.producer_done.is_none() => {
                return Err("the producer process exited without its summary".into());
            }
            None => {}
        }
        Ok(())
    }
}

pub async fn run_rate(
    ctx: &Ctx,
    system: System,
    rate: u64,
    seconds: u64,
    connections: usize,
) -> Result<ProcsRun, BoxError> {
    let db = ctx.fresh_db(system).await?;
    // With --explain: the statements of this run only.
    let statements = ctx.statements && system != System::Plain;
    if statements {
        pgstats::statements_reset(&db).await?;
    }
    let before = pgstats::settled(ctx, &db).await?;
    let proc_system = ProcSystem::from(system).arg().to_string();
    let mut common = vec![
        "--system".to_string(),
        proc_system,
        "--queue".into(),
        QUEUE.into(),
    ];
    if fleet::ping_on_acquire() {
        common.push("--pool-ping".into());
    }
    let (tx, mut events) = mpsc::unbounded_channel();
    // The plain insert has no worker: nothing runs its rows.
    let mut worker = if system == System::Plain {
        None
    } else {
        let mut worker_args = vec!["worker".to_string()];
        worker_args.extend(common.iter().cloned());
        worker_args.extend(["--concurrency".into(), CONCURRENCY.to_string()]);
        if system == System::Awa {
            worker_args.push("--leader".into());
        }
        Some(spawn_child(
            Side::Worker,
            db.url(),
            &worker_args,
            tx.clone(),
        )?)
    };

    let mut st = State::default();
    if worker.is_some() {
        // Wait for the worker to run.
        let ready = tokio::time::timeout(Duration::from_secs(60), async {
            while let Some((_, msg)) = events.recv().await {
                match msg {
                    Some(Msg::Ready) => return Ok(()),
                    Some(_) => {}
                    None => break,
                }
            }
            Err::<(), BoxError>("the worker process exited before it was ready".into())
        })
        .await
        .map_err(|_| "the worker process did not get ready in 60 s")?;
        ready?;
        // Let the worker connect and LISTEN, and the leader get elected.
        tokio::time::sleep(Duration::from_millis(500)).await;
    }

    let label = format!(
        "{} {}/s",
        if system == System::Plain {
            "plain insert"
        } else {
            "procs"
        },
        fmt::rate(rate)
    );
    let total = rate * seconds;
    let bar = ctx.bar(total, label.clone());
    let mut producer_args = vec!["producer".to_string()];
    producer_args.extend(common.iter().cloned());
    producer_args.extend([
        "--rate".into(),
        rate.to_string(),
        "--seconds".into(),
        seconds.to_string(),
        "--connections".into(),
        connections.to_string(),
    ]);
    let mut producer = spawn_child(Side::Producer, db.url(), &producer_args, tx)?;
    let mut max_depth = 0u64;
    let mut next_sample = Instant::now();
    // The producer's window.
    let window = loop {
        let got = tokio::time::timeout_at(next_sample.into(), events.recv()).await;
        match got {
            Ok(Some((side, msg))) => st.handle(side, msg)?,
            Ok(None) => return Err("lost both child processes".into()),
            Err(_) => {
                next_sample += SAMPLE;
                max_depth = max_depth.max(st.enqueued.saturating_sub(st.claimed));
                bar.set_position(if worker.is_some() {
                    st.completed
                } else {
                    st.enqueued
                });
            }
        }
        if let Some(done) = st.producer_done {
            break done;
        }
    };
    expect_exit(&mut producer, "producer").await?;
    let enqueued = st.enqueued;

    let stopped = Instant::now();
    let (drained, drain_s, totals, latency, end_to_end, worker_cpu) = match worker.as_mut() {
        None => {
            bar.finish_and_clear();
            let totals = FleetTotals {
                claimed: 0,
                completed: enqueued,
                ..FleetTotals::default()
            };
            (
                true,
                0.0,
                totals,
                Percentiles::default(),
                Percentiles::default(),
                None,
            )
        }
        Some(worker) => {
            max_depth = max_depth.max(st.enqueued.saturating_sub(st.claimed));
            let mut drained = st.completed >= enqueued;
            while !drained && stopped.elapsed() < DRAIN_TIMEOUT {
                let left = DRAIN_TIMEOUT.saturating_sub(stopped.elapsed());
                match tokio::time::timeout(left, events.recv()).await {
                    Ok(Some((side, msg))) => st.handle(side, msg)?,
                    Ok(None) | Err(_) => break,
                }
                bar.set_position(st.completed);
                drained = st.completed >= enqueued;
            }
            let drain_s = stopped.elapsed().as_secs_f64();
            bar.finish_and_clear();
            // Closing its stdin stops the worker; it then reports.
            drop(worker.stdin.take());
            while st.worker_done.is_none() {
                match tokio::time::timeout(Duration::from_secs(60), events.recv()).await {
                    Ok(Some((side, msg))) => st.handle(side, msg)?,
                    Ok(None) => break,
                    Err(_) => return Err("the worker process did not report in 60 s".into()),
                }
            }
            expect_exit(worker, "worker").await?;
            let (totals, latency, end_to_end, worker_cpu) = st
                .worker_done
                .ok_or("the worker process exited without its summary")?;
            (drained, drain_s, totals, latency, end_to_end, worker_cpu)
        }
    };
    let after = pgstats::settled(ctx, &db).await?;
    let mut cost = pgstats::cost(&before, &after, totals.completed);
    let producer_cpu = window.cpu_s;
    cost.add_client_cpu(producer_cpu.unwrap_or(0.0) + worker_cpu.unwrap_or(0.0));
    let statements = if statements {
        pgstats::statements_top(&db, totals.completed).await?
    } else {
        Vec::new()
    };
    let (seconds_run, transaction, start_lag) =
        (window.seconds, window.transaction, window.start_lag);
    let completed_in_window = if worker.is_some() {
        window.completed
    } else {
        enqueued
    };

    let offered = rate as f64;
    let completions_per_s = completed_in_window as f64 / seconds_run;
    let kept_up =
        enqueued as f64 >= KEPT_UP * total as f64 && completions_per_s >= KEPT_UP * offered;
    let run = ProcsRun {
        offered_rate: rate,
        producer_connections: connections,
        seconds: seconds_run,
        enqueued,
        enqueued_per_s: enqueued as f64 / seconds_run,
        completions_per_s,
        achieved_vs_offered: completions_per_s / offered,
        drained,
        drain_s,
        latency,
        end_to_end,
        transaction,
        start_lag,
        max_depth,
        kept_up,
        totals,
        producer_cpu_s: producer_cpu,
        worker_cpu_s: worker_cpu,
        cost,
        statements,
    };
    ctx.say(format!(
        "   {:<18} enqueued {:>7.0}/s  completed {:>7.0}/s  p50 {:>7.2} ms  p95 {:>7.2} ms  \
         p99 {:>7.2} ms  tx p50 {:>5.2} ms  max depth {:>6}{}{}{}",
        label,
        run.enqueued_per_s,
        run.completions_per_s,
        latency.p50,
        latency.p95,
        latency.p99,
        transaction.p50,
        max_depth,
        if kept_up { "" } else { "  (not kept up)" },
        fmt::undrained(drained, DRAIN_TIMEOUT),
        system.tag()
    ));
    Ok(run)
}
