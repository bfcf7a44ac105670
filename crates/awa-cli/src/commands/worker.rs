//! `awa worker run`

use crate::cli::{Cli, WorkerCommand, WorkerRunArgs};
use crate::handlers::Builtin;
use crate::progress::Progress;
use crate::{db, error::CliError, input, output};
use awa_core::{JobState, QueueName};
use awa_exec::worker::{Stats, StatsSnapshot, Worker, WorkerConfig};
use awa_history::{HistoryPlane, PendingState, PgHistoryPlane};
use awa_maint::leader::LeaderConfig;
use std::collections::VecDeque;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};
use tokio::sync::watch;

const MAX_POOL: u32 = 64;
/// How often the worker's counters are looked at (and the progress line
/// redrawn; indicatif limits how often it draws). A snapshot of counters:
/// cheap. It bounds how late --exit-when-idle notices the end: it looks
/// twice, each time a tick to see nothing in flight and a tick for the
/// empty claim it then asks for. At 200 ms, a tenth of a 4-second drain was
/// spent after the last job; at 50 ms, 230 ms still were (the exit of a
/// 200,000-job drain from outside, 6% of it).
const TICK: Duration = Duration::from_millis(10);
/// The longest pause between database checks while the worker is idle but
/// work is still awaited (scheduled jobs, retries not yet due).
const MAX_CHECK_BACKOFF: Duration = Duration::from_secs(2);
/// How often an unchanged "waiting for" line is logged again.
const SAY_AGAIN: Duration = Duration::from_secs(10);
/// The largest --exit-when-drained horizon.
const MAX_HORIZON: Duration = Duration::from_secs(3650 * 86_400);

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
    let until = until(args)?;
    let pinned = db::pinned(cli)?;
    let mut config = WorkerConfig::new(
        pinned
            .clone()
            .unwrap_or_else(awa_core::SchemaName::default_schema),
        queues.iter().map(|q| (q.clone(), concurrency)).collect(),
    );
    config.cancel_grace = awa_core::bounds::CANCEL_GRACE
        .check(input::duration("--cancel-grace", &args.cancel_grace)?)?;
    config.validate()?;
    // Built only when the environment names an OTLP endpoint.
    let traces = crate::traces::from_env()?;
    // Everything is validated: only now connect and write.
    let url = db::require_url(&cli.database_url)?;
    // Handlers here do no database work, so a quarter of the concurrency
    // covers claims, finishes and heartbeats; +4 for the listener,
    // maintenance and the exit check.
    let pool_size = ((concurrency / 4 + 4) as u32).min(MAX_POOL);
    let pool = db::pool_migrated(url, pool_size).await?;
    // Kept for the life of the worker: its instruments record into it.
    let _metrics = match args.metrics_addr {
        Some(addr) => {
            Some(super::serve::metrics_endpoint(addr, &args.metrics_allowed_hosts).await?)
        }
        None => None,
    };

    // The pinned substrate must exist before anything is written: a
    // registration left behind by a refused start holds finalize back.
    if let Some(schema) = &pinned {
        let mut conn = pool.acquire().await?;
        db::require_substrate(&mut conn, schema).await?;
    }
    let registration = awa_control::runtimes::Registration::start(
        &pool,
        &awa_control::runtimes::RuntimeInfo {
            instance_id: config.instance_id,
            role: "worker",
            queues: queues.iter().map(|q| q.to_string()).collect(),
        },
    )
    .await?;
    // Pinned by --schema, or following the storage routing (which also
    // registers the substrates this worker uses, for finalize).
    let routing = match &pinned {
        Some(schema) => {
            let mut conn = pool.acquire().await?;
            let fixed = awa_control::routing::fixed(schema.clone());
            awa_control::routing::register_backends(&mut conn, config.instance_id, &fixed.borrow())
                .await?;
            fixed
        }
        None => awa_control::routing::follow(&pool, Some(config.instance_id)).await?,
    };
    let mut worker = Worker::new(pool.clone(), config);
    match &traces {
        Some(export) => {
            let var = export.from.0;
            eprintln!("awa worker: exporting traces over OTLP/HTTP ({var})");
            worker.register_default(awa::middleware::around(handler, export.middleware()));
        }
        None => {
            worker.register_default(handler);
        }
    }
    worker.follow_routing(routing.clone());

    let (stop_tx, stop_rx) = watch::channel(false);
    let leader_config = LeaderConfig::new();
    let maintenance = (!args.no_maintenance).then(|| {
        super::maint::spawn_leader(
            pinned.as_ref(),
            leader_config,
            &settings,
            pool.clone(),
            stop_rx,
            None,
        )
    });

    let stats = worker.stats();
    let claim_now = worker.claim_now();
    let progress = Progress::spinner(cli.json, "starting");
    let idle_queries = AtomicU64::new(0);
    let left_waiting: Mutex<Vec<PendingState>> = Mutex::new(Vec::new());
    let watcher = Watcher {
        pool: &pool,
        routing: &routing,
        queues: &queues,
        stats: &stats,
        claim_now: &claim_now,
        until,
        progress: &progress,
        idle_queries: &idle_queries,
        left_waiting: &left_waiting,
    };
    let stop = async {
        tokio::select! {
            _ = awa_maint::shutdown_signal() => {}
            _ = watcher.run() => {}
        }
        progress.set_message("stopping: finishing the jobs in flight");
    };
    let result = worker.run(stop).await;
    drop(progress);

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
    if let Some(export) = traces {
        export.shutdown().await;
    }
    let report = Report {
        stats: result?,
        idle_queries: idle_queries.load(Ordering::Relaxed),
        left_waiting: left_waiting
            .into_inner()
            .unwrap_or_default()
            .iter()
            .map(|s| s.jobs)
            .sum(),
    };
    output::emit(cli.json, &report, || report_text(&report));
    Ok(())
}

/// What `worker run` prints when it stops.
#[derive(Debug, serde::Serialize)]
struct Report {
    #[serde(flatten)]
    stats: StatsSnapshot,
    /// Times --exit-when-idle / --exit-when-drained asked the database
    /// whether work was left (only once the worker's counters said so).
    idle_queries: u64,
    /// Unfinished jobs left behind by --exit-when-drained: due after the
    /// horizon.
    left_waiting: i64,
}

/// When `worker run` stops by itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Until {
    /// `--exit-when-idle`: no unfinished job at all.
    Idle,
    /// `--exit-when-drained=HORIZON`: nothing runnable within the horizon.
    Drained(Duration),
}

impl Until {
    /// How far ahead deferred work counts (None: however far).
    fn horizon(self) -> Option<Duration> {
        match self {
            Until::Idle => None,
            Until::Drained(h) => Some(h),
        }
    }
}

fn until(args: &WorkerRunArgs) -> Result<Option<Until>, CliError> {
    if args.exit_when_idle {
        return Ok(Some(Until::Idle));
    }
    let Some(text) = args.exit_when_drained.as_deref() else {
        return Ok(None);
    };
    let horizon = input::duration("--exit-when-drained", text)?;
    if horizon > MAX_HORIZON {
        return Err(CliError::Usage(format!(
            "--exit-when-drained={text} is longer than 3650 days; \
             use --exit-when-idle to wait for every job however far off"
        )));
    }
    Ok(Some(Until::Drained(horizon)))
}

/// Attempts the worker has finished, one way or another.
fn finished(s: &StatsSnapshot) -> u64 {
    s.completed
        + s.retried
        + s.snoozed
        + s.cancelled
        + s.failed
        + s.dead_lettered
        + s.released
        + s.rejected
        + s.dropped
}

/// Attempts claimed and not yet finished. An unstorable result is counted
/// as finished whether or not its fallback was stored, so this may read
/// low, never high: it only decides when to ask the database, which has
/// the last word.
fn in_flight(s: &StatsSnapshot) -> u64 {
    s.claimed.saturating_sub(finished(s) + s.unstorable)
}

/// Watches the worker's counters: draws the progress line and, with an
/// exit condition, resolves once it holds.
struct Watcher<'a> {
    pool: &'a sqlx::PgPool,
    /// Which substrates to check for work left.
    routing: &'a watch::Receiver<awa_core::Routing>,
    queues: &'a [QueueName],
    stats: &'a Stats,
    /// Asks for the empty claim a check waits for, instead of waiting for
    /// the dispatchers' poll (250 ms; twice per exit, a tenth of a
    /// 200,000-job drain from outside).
    claim_now: &'a awa_exec::worker::ClaimNow,
    until: Option<Until>,
    progress: &'a Progress,
    idle_queries: &'a AtomicU64,
    /// What the last database check found still waiting (past the horizon).
    left_waiting: &'a Mutex<Vec<PendingState>>,
}

impl Watcher<'_> {
    /// Never resolves without an exit condition.
    async fn run(&self) {
        if self.until.is_none() && !self.progress.shown() {
            return std::future::pending().await;
        }
        let mut rate = Rate::default();
        let mut seen = self.stats.snapshot();
        // Empty claims counted at the last database check: the next check
        // waits for a claim that came back empty after it.
        let mut checked_empty = seen.empty_claims;
        let mut quiet = 0;
        let mut backoff = TICK;
        let mut next_check = Instant::now();
        let mut waiting: Option<String> = None;
        let mut said: Option<(String, Instant)> = None;
        loop {
            tokio::time::sleep(TICK).await;
            let now = self.stats.snapshot();
            let per_sec = rate.sample(now.completed);
            self.progress
                .set_message(progress_line(&now, per_sec, waiting.as_deref()));
            let Some(until) = self.until else { continue };
            // Anything claimed since the last look, or still running: busy,
            // and no question for the database.
            let busy = in_flight(&now) > 0 || now.claimed != seen.claimed;
            seen = now;
            if busy {
                quiet = 0;
                backoff = TICK;
                waiting = None;
                continue;
            }
            if Instant::now() < next_check {
                continue;
            }
            if now.empty_claims == checked_empty {
                // Due for a check, but no claim has come back empty since
                // the last one: ask for one (a dispatcher keeps one
                // wake-up, so asking every tick makes one claim).
                self.claim_now.claim_now();
                continue;
            }
            checked_empty = now.empty_claims;
            self.idle_queries.fetch_add(1, Ordering::Relaxed);
            let reads = self.routing.borrow().reads();
            let states = async {
                let mut conn = self.pool.acquire().await?;
                let mut all = Vec::new();
                for schema in reads {
                    all.extend(
                        PgHistoryPlane::new(schema)
                            .pending_by_state(&mut conn, self.queues, until.horizon())
                            .await
                            .map_err(CliError::from)?,
                    );
                }
                Ok::<_, CliError>(all)
            }
            .await;
            match states {
                Ok(states) if states.iter().all(|s| s.due == 0) => {
                    // Twice in a row: one check could land between a
                    // retry's finish and its promotion.
                    quiet += 1;
                    tracing::debug!(check = quiet, "nothing left to run");
                    if quiet >= 2 {
                        if !states.is_empty() {
                            tracing::info!(
                                "stopping; left waiting past the horizon: {}",
                                describe(&states)
                            );
                        }
                        if let Ok(mut left) = self.left_waiting.lock() {
                            *left = states;
                        }
                        return;
                    }
                }
                Ok(states) => {
                    quiet = 0;
                    let line = describe(&states);
                    let repeat = said
                        .as_ref()
                        .is_some_and(|(l, at)| *l == line && at.elapsed() < SAY_AGAIN);
                    if !repeat {
                        tracing::info!("idle; waiting for {line}");
                        said = Some((line.clone(), Instant::now()));
                    }
                    waiting = Some(line);
                    next_check = Instant::now() + backoff;
                    backoff = (backoff * 2).min(MAX_CHECK_BACKOFF);
                }
                Err(err) => {
                    tracing::warn!(error = %err, "idle check failed; will check again");
                    quiet = 0;
                }
            }
        }
    }
}

/// Completions per second over the last few seconds.
#[derive(Debug, Default)]
struct Rate(VecDeque<(Instant, u64)>);

impl Rate {
    const WINDOW: Duration = Duration::from_secs(3);

    fn sample(&mut self, completed: u64) -> f64 {
        let now = Instant::now();
        self.0.push_back((now, completed));
        while self
            .0
            .front()
            .is_some_and(|(at, _)| now.duration_since(*at) > Self::WINDOW)
        {
            self.0.pop_front();
        }
        match (self.0.front(), self.0.back()) {
            (Some((t0, c0)), Some((t1, c1))) if t1 > t0 => {
                (c1 - c0) as f64 / t1.duration_since(*t0).as_secs_f64()
            }
            _ => 0.0,
        }
    }
}

fn progress_line(s: &StatsSnapshot, per_sec: f64, waiting: Option<&str>) -> String {
    let mut line = format!("completed {} ({per_sec:.0}/s)", s.completed);
    let failed = s.retried + s.failed + s.dead_lettered;
    if failed > 0 {
        line.push_str(&format!(", {failed} failed or retried"));
    }
    let running = in_flight(s);
    if running > 0 {
        line.push_str(&format!(", {running} in flight"));
    }
    if let Some(waiting) = waiting {
        line.push_str(&format!("; waiting for {waiting}"));
    }
    line
}

/// "2 running, 3 scheduled (next at 2026-12-01T10:00:00Z)".
fn describe(states: &[PendingState]) -> String {
    let parts: Vec<String> = states
        .iter()
        .map(|s| match (s.state, &s.next_at) {
            (JobState::Scheduled | JobState::Retryable | JobState::Snoozed, Some(at)) => {
                format!(
                    "{} {} {} (next at {})",
                    s.jobs,
                    s.state,
                    if s.jobs == 1 { "job" } else { "jobs" },
                    at.time().map_or_else(
                        || at.to_rfc3339(),
                        |t| t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
                    )
                )
            }
            _ => format!(
                "{} {} {}",
                s.jobs,
                s.state,
                if s.jobs == 1 { "job" } else { "jobs" }
            ),
        })
        .collect();
    if parts.is_empty() {
        "nothing".into()
    } else {
        parts.join(", ")
    }
}

fn report_text(r: &Report) -> String {
    let s = &r.stats;
    let mut text = format!(
        "worker stopped: claimed {}, completed {}, retried {}, snoozed {}, cancelled {}, \
         failed {}, dead-lettered {}, released {}, rejected {}, dropped {}",
        s.claimed,
        s.completed,
        s.retried,
        s.snoozed,
        s.cancelled,
        s.failed,
        s.dead_lettered,
        s.released,
        s.rejected,
        s.dropped
    );
    if r.left_waiting > 0 {
        text.push_str(&format!(
            "; {} unfinished job(s) left waiting past the horizon",
            r.left_waiting
        ));
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn in_flight_is_claimed_minus_every_finish() {
        let s = StatsSnapshot {
            claimed: 10,
            completed: 4,
            retried: 1,
            released: 1,
            rejected: 1,
            ..Default::default()
        };
        assert_eq!(in_flight(&s), 3);
        let done = StatsSnapshot {
            failed: 1,
            dead_lettered: 1,
            cancelled: 1,
            ..s
        };
        assert_eq!(in_flight(&done), 0);
    }

    #[test]
    fn waiting_is_described_with_the_next_due_time() {
        let at = chrono::DateTime::parse_from_rfc3339("2026-12-01T10:00:00Z")
            .unwrap()
            .with_timezone(&chrono::Utc);
        let states = [
            PendingState {
                state: JobState::Running,
                jobs: 1,
                next_at: Some(at.into()),
                due: 1,
            },
            PendingState {
                state: JobState::Scheduled,
                jobs: 3,
                next_at: Some(at.into()),
                due: 0,
            },
        ];
        assert_eq!(
            describe(&states),
            "1 running job, 3 scheduled jobs (next at 2026-12-01T10:00:00Z)"
        );
        assert_eq!(describe(&[]), "nothing");
    }
}
