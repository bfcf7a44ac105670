//! Scenario `procs`: steady load the way applications produce it. A
//! producer *process* commits one job per transaction (`BEGIN`, enqueue one
//! job, `COMMIT`) at an offered rate, and a separate worker *process* (one
//! worker at concurrency 16, plus the maintenance leader for ours) runs
//! them; neither shares a runtime or a connection pool with the other or
//! with the bench. Both are this binary, started again with the hidden
//! subcommand `bench-proc producer|worker`; they report on stdout, one
//! JSON object per line (progress every 50 ms, then a summary).
//!
//! The producer is open-loop: job `i` is due at `start + i / rate`, and
//! each of its connections takes the next job, waits until it is due and
//! sends it. It has one connection per 50 jobs/s offered (4 to 32), as an
//! application's pool grows with its request rate, unless
//! `--procs-connections` fixes the number. With every connection busy,
//! jobs go late (`start lag`), and the achieved rate falls below the
//! offered one. Latency is the same as
//! steady's: `ready_at` (the baseline's `run_at`) to handler start, which
//! for a job enqueued in a transaction includes its commit.
//!
//! Rates 200, 500 and 1,000/s always run; then 2,000, 3,000, 5,000, ... for
//! each system while it keeps up (the producer offered 95 % of its jobs and
//! the worker completed 95 % of the offered rate). The headline is the
//! highest rate kept up with p95 below 50 ms. Each run has a fresh
//! database; with scenario `baseline` the baseline's run follows ours.

use super::Ctx;
use super::baseline;
use super::pgstats::{self, Cost};
use super::system::System;
use crate::BoxError;
use crate::fleet::{self, FleetConfig, FleetTotals};
use crate::latency::{EndToEnd, LatencyRecorder, Percentiles};
use awa_core::QueueName;
use std::process::{ExitCode, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};
use tokio::io::AsyncBufReadExt;
use tokio::sync::mpsc;

/// The worker process's concurrency.
pub const CONCURRENCY: usize = 16;
/// Connections of the producer process by default, each one transaction
/// at a time: one per this many jobs/s offered, within the bounds below.
const JOBS_PER_S_PER_CONNECTION: u64 = 50;
const MIN_CONNECTIONS: usize = 4;
const MAX_CONNECTIONS: usize = 32;
/// Rates always run (500/s places the limit when 1,000/s is not kept up).
const RATES: &[u64] = &[200, 500, 1_000];
/// Then these, while the system keeps up.
const STEPS: &[u64] = &[2_000, 3_000, 5_000, 7_500, 10_000, 15_000];
const QUICK_RATES: &[u64] = &[200];
const SECONDS: u64 = 10;
const QUICK_SECONDS: u64 = 1;
const DRAIN_TIMEOUT: Duration = Duration::from_secs(10);
/// Kept up: offered and completed at least this fraction of the rate.
const KEPT_UP: f64 = 0.95;
/// The headline: highest rate kept up with p95 below this.
pub const HEADLINE_P95_MS: f64 = 50.0;
const PROGRESS: Duration = Duration::from_millis(50);
const SAMPLE: Duration = Duration::from_millis(250);
const QUEUE: &str = "procs";
const URL_ENV: &str = "AWA_BENCH_PROC_URL";

#[derive(Debug, Clone, serde::Serialize)]
pub struct ProcsRun {
    pub offered_rate: u64,
    /// Connections of the producer process.
    pub producer_connections: usize,
    /// How long the producer ran.
    pub seconds: f64,
    pub enqueued: u64,
    pub enqueued_per_s: f64,
    /// Completed while the producer ran, per second: the achieved rate.
    pub completions_per_s: f64,
    /// completions_per_s / offered_rate.
    pub achieved_vs_offered: f64,
    pub drained: bool,
    /// Time after the producer stopped until the last completion.
    pub drain_s: f64,
    /// ready_at -> handler start, every completed job (ms).
    pub latency: Percentiles,
    /// ready_at -> the commit of the job's result (ms): the whole trip, as
    /// the worker's lifecycle hook (ours) or the completion statement's
    /// return (the baseline's) sees it.
    pub end_to_end: Percentiles,
    /// The producer's transactions, `BEGIN` to `COMMIT` done (ms).
    pub transaction: Percentiles,
    /// How late the producer started each job against its schedule (ms).
    pub start_lag: Percentiles,
    pub max_depth: u64,
    pub kept_up: bool,
    pub totals: FleetTotals,
    pub producer_cpu_s: Option<f64>,
    pub worker_cpu_s: Option<f64>,
    /// Client CPU includes both child processes.
    pub cost: Cost,
    /// With `--explain` (pg_stat_statements preloaded): the statements
    /// that took the most server time during the run, top-level and
    /// nested, busiest first.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub statements: Vec<pgstats::StatementCost>,
}

#[derive(Debug, Clone, serde::Serialize)]
pub struct ProcsReport {
    /// Fixed by `--procs-connections`; else one per 50 jobs/s offered.
    pub producer_connections: Option<usize>,
    pub worker_concurrency: usize,
    pub runs: Vec<ProcsRun>,
    /// Highest offered rate kept up with p95 < 50 ms.
    pub highest_kept_up: Option<u64>,
    /// At 1,000/s: kept up with p95 < 5 ms.
    pub p95_under_5ms_at_1000: Option<bool>,
}

impl ProcsReport {
    pub fn at(&self, rate: u64) -> Option<&ProcsRun> {
        self.runs.iter().find(|r| r.offered_rate == rate)
    }
}

/// The producer's connections at `rate`: `--procs-connections`, else one
/// per 50 jobs/s offered, 4 to 32.
pub fn connections_for(ctx: &Ctx, rate: u64) -> usize {
    ctx.procs_connections.unwrap_or_else(|| {
        ((rate / JOBS_PER_S_PER_CONNECTION) as usize).clamp(MIN_CONNECTIONS, MAX_CONNECTIONS)
    })
}

/// Ours, and the baseline's when scenario `baseline` is on.
pub async fn run(ctx: &Ctx) -> Result<(ProcsReport, Option<ProcsReport>), BoxError> {
    let (rates, steps, seconds): (&[u64], &[u64], u64) = if ctx.quick {
        (QUICK_RATES, &[], QUICK_SECONDS)
    } else {
        (RATES, STEPS, SECONDS)
    };
    let fixed = ctx.procs_connections;
    let connections = |rate: u64| connections_for(ctx, rate);
    ctx.say(format!(
        "\n== procs: a producer process committing one job per transaction (connections: {}) \
         and a worker process (1 x {CONCURRENCY} + maintenance leader); offered \
         {}/s, then up while kept up; {seconds} s per rate",
        match fixed {
            Some(n) => n.to_string(),
            None => format!(
                "1 per {JOBS_PER_S_PER_CONNECTION} jobs/s offered, {MIN_CONNECTIONS} to \
                 {MAX_CONNECTIONS}"
            ),
        },
        rates
            .iter()
            .map(u64::to_string)
            .collect::<Vec<_>>()
            .join(", ")
    ));
    let systems = ctx.systems();
    let mut runs: Vec<Vec<ProcsRun>> = vec![Vec::new(); systems.len()];
    for &rate in rates {
        for (i, &system) in systems.iter().enumerate() {
            runs[i].push(run_rate(ctx, system, rate, seconds, connections(rate)).await?);
        }
    }
    for &rate in steps {
        let mut any = false;
        for (i, &system) in systems.iter().enumerate() {
            if runs[i].last().is_some_and(|r| r.kept_up) {
                any = true;
                runs[i].push(run_rate(ctx, system, rate, seconds, connections(rate)).await?);
            }
        }
        if !any {
            break;
        }
    }
    let mut reports = runs.into_iter().map(|runs| ProcsReport {
        producer_connections: fixed,
        worker_concurrency: CONCURRENCY,
        highest_kept_up: runs
            .iter()
            .filter(|r| r.kept_up && r.latency.p95 < HEADLINE_P95_MS)
            .map(|r| r.offered_rate)
            .max(),
        p95_under_5ms_at_1000: runs
            .iter()
            .find(|r| r.offered_rate == 1_000)
            .map(|r| r.kept_up && r.latency.p95 < 5.0),
        runs,
    });
    let ours = reports.next().expect("ours always runs");
    Ok((ours, reports.next()))
}

/// The `--system` of a child process.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ProcSystem {
    Awa,
    BaselineUpdate,
    BaselineDelete,
    Plain,
}

impl From<System> for ProcSystem {
    fn from(s: System) -> Self {
        match s {
            System::Awa => ProcSystem::Awa,
            System::Baseline(baseline::Completion::Update) => ProcSystem::BaselineUpdate,
            System::Baseline(baseline::Completion::Delete) => ProcSystem::BaselineDelete,
            System::Plain => ProcSystem::Plain,
        }
    }
}

impl From<ProcSystem> for System {
    fn from(s: ProcSystem) -> Self {
        match s {
            ProcSystem::Awa => System::Awa,
            ProcSystem::BaselineUpdate => System::Baseline(baseline::Completion::Update),
            ProcSystem::BaselineDelete => System::Baseline(baseline::Completion::Delete),
            ProcSystem::Plain => System::Plain,
        }
    }
}

impl ProcSystem {
    fn arg(self) -> &'static str {
        match self {
            ProcSystem::Awa => "awa",
            ProcSystem::BaselineUpdate => "baseline-update",
            ProcSystem::BaselineDelete => "baseline-delete",
            ProcSystem::Plain => "plain",
        }
    }
}

/// `xtask bench-proc`: one side of scenario `procs`, started by the bench.
#[derive(Debug, clap::Args)]
pub struct ProcArgs {
    #[command(subcommand)]
    role: Role,
}

#[derive(Debug, clap::Subcommand)]
enum Role {
    /// Commit one job per transaction at `--rate` for `--seconds`.
    Producer {
        #[command(flatten)]
        common: Common,
        #[arg(long)]
        rate: u64,
        #[arg(long)]
        seconds: u64,
        #[arg(long, default_value_t = MIN_CONNECTIONS)]
        connections: usize,
    },
    /// Run one worker (and, for ours, a leader) until stdin closes.
    Worker {
        #[command(flatten)]
        common: Common,
        #[arg(long, default_value_t = CONCURRENCY)]
        concurrency: usize,
        #[arg(long)]
        leader: bool,
    },
}

#[derive(Debug, clap::Args)]
struct Common {
    /// The database (from the environment, so it stays off the command
    /// line).
    #[arg(long, env = URL_ENV, hide_env_values = true)]
    url: String,
    #[arg(long, value_enum)]
    system: ProcSystem,
    #[arg(long)]
    queue: String,
    #[arg(long)]
    pool_ping: bool,
}

/// What the child processes print, one JSON object per line.
#[derive(Debug, serde::Serialize, serde::Deserialize)]
#[serde(tag = "event", rename_all = "snake_case")]
enum Msg {
    /// The worker runs.
    Ready,
    Worker {
        claimed: u64,
        completed: u64,
    },
    Produced {
        enqueued: u64,
    },
    ProducerDone {
        enqueued: u64,
        seconds: f64,
        transaction: Percentiles,
        start_lag: Percentiles,
        cpu_s: Option<f64>,
    },
    WorkerDone {
        totals: FleetTotals,
        latency: Percentiles,
        end_to_end: Percentiles,
        cpu_s: Option<f64>,
    },
}

fn emit(msg: &Msg) {
    // Rust's stdout is line-buffered: each line goes out whole, at once.
    println!(
        "{}",
        serde_json::to_string(msg).expect("messages serialize")
    );
}

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
        super::fmt::rate(rate)
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
                rejected: 0,
                released: 0,
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
        if drained {
            String::new()
        } else {
            format!("  (not drained after {:.0}s)", DRAIN_TIMEOUT.as_secs_f64())
        },
        match system {
            System::Awa => "",
            System::Baseline(_) => "  [baseline]",
            System::Plain => "  [plain insert]",
        }
    ));
    Ok(run)
}
