//! One scenario run, start to verdict: a fresh database on the given
//! server (or, for the failover scenario, a primary and standby of its
//! own), the ledger, worker processes, the producer, faults on a
//! schedule, settling, a graceful stop, and the count.

use super::error::ChaosError;
use super::faults::{self, Injected};
use super::ledger;
use super::load::{self, LOAD_KIND};
use super::procs::Workers;
use super::report::{FailoverCheck, OrphanCheck, PoisonCheck, PoisonJob, Report, RingCheck};
use super::scenario::{Plan, Scenario};
use super::servers::Servers;
use super::tally::{self, Observed};
use awa_core::QueueName;
use awa_harness::{PgServer, TestDb};
use sqlx::PgPool;
use sqlx::postgres::PgPoolOptions;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

const QUEUE: &str = "chaos";
const ORPHAN_QUEUE: &str = "chaos-orphan";
const POISON_KINDS: [&str; 3] = [
    "poison-nul-error",
    "poison-huge-snooze",
    "poison-huge-retry-after",
];
/// How often the runner looks after its workers.
const SUPERVISE: Duration = Duration::from_millis(200);
/// Graceful shutdown must end within this, whatever happened before.
const STOP_GRACE: Duration = Duration::from_secs(30);
/// The queue ring's slot count (the default substrate's).
const QUEUE_SLOTS: u32 = 16;

pub async fn run(
    scenario: Scenario,
    plan: &Plan,
    server: &PgServer,
    bin: &Path,
    dir: &Path,
) -> Result<Report, ChaosError> {
    let started = Instant::now();
    // The failover scenario kills its primary: it gets servers of its own
    // (their `postgres` database), never the suite's cluster.
    let (mut servers, url, db) = if plan.failover {
        let servers = Servers::pair().await?;
        let url = servers.host_list_url();
        (servers, url, None)
    } else {
        let db = TestDb::empty_on(server).await?;
        let url = db.url().to_owned();
        (Servers::single(server), url, Some(db))
    };
    awa_maint::migrate(&url)
        .await
        .map_err(|e| ChaosError::Migrate(e.to_string()))?;
    // Through the host list like every process of the run: the producer
    // and the ledger reads follow a failover too.
    let info = awa_core::conninfo::connect_options(&url)
        .map_err(|e| ChaosError::Migrate(e.to_string()))?;
    let options = PgPoolOptions::new()
        .max_connections(6)
        .acquire_timeout(Duration::from_secs(10));
    let (pool, _watch) = awa_maint::connect::pool(&info, options)
        .await
        .map_err(|e| ChaosError::Connect(e.to_string()))?;
    ledger::install(&pool).await?;
    let queue = QueueName::new(QUEUE).expect("a valid queue name");

    let mut workers = Workers::start(
        bin,
        &url,
        dir,
        vec![
            "--queue".into(),
            QUEUE.into(),
            "--concurrency".into(),
            plan.concurrency.to_string(),
            "--rotate-interval".into(),
            format!("{}ms", plan.rotate_interval.as_millis()),
            "--rescue-after".into(),
            format!("{}ms", plan.rescue_after.as_millis()),
        ],
        plan.workers,
    )?;

    let orphan = if plan.orphan {
        let q = QueueName::new(ORPHAN_QUEUE).expect("a valid queue name");
        Some(enqueue(&pool, &q, "orphan", None).await?)
    } else {
        None
    };
    let mut poison = Vec::new();
    if plan.poison {
        for kind in POISON_KINDS {
            poison.push((kind, enqueue(&pool, &queue, kind, Some(1)).await?));
        }
    }

    let producer = tokio::spawn(load::produce(
        pool.clone(),
        queue.clone(),
        plan.rate,
        plan.load,
    ));
    let mut injected = Vec::new();
    let mut rotation = 0;
    let mut next_fault = Instant::now() + plan.fault_every;
    let load_end = Instant::now() + plan.load;
    let mut peak_ring = 0;
    while Instant::now() < load_end {
        tokio::time::sleep(SUPERVISE).await;
        workers.supervise()?;
        if plan.ring_bound
            && let Ok(rows) = ledger::ring_rows(&pool).await
        {
            peak_ring = peak_ring.max(rows);
        }
        if !plan.faults.is_empty() && Instant::now() >= next_fault {
            let fault = plan.faults[injected.len() % plan.faults.len()];
            let outcome =
                faults::inject(fault, &mut servers, &mut workers, bin, &url, &mut rotation).await?;
            if let Injected::Skipped(why) = &outcome {
                tracing::warn!(fault = fault.name(), why, "fault skipped");
            }
            injected.push((fault, outcome));
            next_fault = Instant::now() + plan.fault_every;
        }
    }
    let produced = producer
        .await
        .map_err(|e| ChaosError::Task(format!("the producer task failed: {e}")))?;

    let settled = settle(&pool, &mut workers, plan.settle).await?;
    let ring = if plan.ring_bound {
        Some(ring_check(&pool, &mut workers, plan, produced.acked.len(), peak_ring).await?)
    } else {
        None
    };
    let failover = if plan.failover {
        Some(failover_check(&pool, &mut workers, &servers).await?)
    } else {
        None
    };
    let stuck_shutdowns = {
        let unexpected = workers.unexpected_exits;
        let stuck = tokio::task::spawn_blocking(move || workers.stop(STOP_GRACE))
            .await
            .map_err(|e| ChaosError::Task(format!("stopping the workers failed: {e}")))?;
        (stuck, unexpected)
    };

    let snapshot = ledger::read(&pool, QUEUE).await?;
    let logs: Vec<PathBuf> = (0..plan.workers)
        .map(|i| Workers::exec_log(dir, i))
        .collect();
    let executions = ledger::executions(&logs)?;
    pool.close().await;
    drop(db);

    let facts_of = |id: i64| -> Vec<&str> {
        snapshot
            .facts
            .iter()
            .filter(|(j, _)| *j == id)
            .map(|(_, s)| s.as_str())
            .collect()
    };
    let live_of = |id: i64| {
        snapshot
            .live
            .iter()
            .find(|(j, _)| *j == id)
            .map(|(_, s)| s.clone())
    };
    let orphan = orphan.map(|id| OrphanCheck {
        state: live_of(id),
        facts: facts_of(id).len(),
        executions: executions.iter().filter(|(j, _)| *j == id).count(),
    });
    let poison = (!poison.is_empty()).then(|| PoisonCheck {
        jobs: poison
            .iter()
            .map(|&(kind, id)| PoisonJob {
                kind,
                state: facts_of(id)
                    .first()
                    .map(|s| (*s).to_owned())
                    .or_else(|| live_of(id))
                    .unwrap_or_else(|| "nowhere".into()),
                closures: snapshot
                    .closures
                    .iter()
                    .filter(|(j, _)| *j == id)
                    .map(|(_, o)| o.clone())
                    .collect(),
            })
            .collect(),
    });
    let rescued = snapshot
        .closures
        .iter()
        .filter(|(_, o)| o == "rescued")
        .count();

    let observed = Observed {
        acked: produced.acked,
        ambiguous: produced.ambiguous,
        ledger: snapshot
            .jobs
            .into_iter()
            .filter(|j| j.kind == LOAD_KIND)
            .collect(),
        facts: snapshot.facts,
        live: snapshot.live,
        executions,
    };
    Ok(Report {
        scenario,
        tally: tally::tally(&observed),
        faults: injected,
        elapsed: started.elapsed(),
        settled,
        producer_errors: produced.errors,
        abandoned: produced.abandoned.len(),
        unexpected_exits: stuck_shutdowns.1,
        stuck_shutdowns: stuck_shutdowns.0,
        stats_completed: snapshot.stats_completed,
        rescued,
        orphan,
        poison,
        ring,
        failover,
        exits_allowed: !plan.failover,
    })
}

async fn enqueue(
    pool: &PgPool,
    queue: &QueueName,
    kind: &str,
    max_attempts: Option<i32>,
) -> Result<i64, ChaosError> {
    load::enqueue_one(pool, queue, kind, max_attempts)
        .await
        .map_err(|e| ChaosError::Awa {
            args: format!("enqueue of a {kind} job"),
            why: e.to_string(),
        })
}

/// Waits until the load queue has no live job on two checks in a row, or
/// `limit` passes. Workers stay supervised meanwhile.
async fn settle(pool: &PgPool, workers: &mut Workers, limit: Duration) -> Result<bool, ChaosError> {
    let deadline = Instant::now() + limit;
    let mut quiet = 0;
    while Instant::now() < deadline {
        tokio::time::sleep(SUPERVISE).await;
        workers.supervise()?;
        match ledger::live_in(pool, QUEUE).await {
            Ok(0) => quiet += 1,
            Ok(_) => quiet = 0,
            Err(e) => {
                tracing::debug!(error = %e, "settle check failed; checking again");
                quiet = 0;
            }
        }
        if quiet >= 2 {
            return Ok(true);
        }
    }
    Ok(false)
}

/// After the last failover, maintenance must run on the new primary: a
/// ring rotation stamped by its clock after the promotion (the leader
/// rotates every `--rotate-interval`), waited for up to half a minute.
async fn failover_check(
    pool: &PgPool,
    workers: &mut Workers,
    servers: &Servers,
) -> Result<FailoverCheck, ChaosError> {
    let Some(&last) = servers.promoted_at.last() else {
        return Ok(FailoverCheck {
            failovers: 0,
            rotations_after: 0,
        });
    };
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut rotations = 0;
    while Instant::now() < deadline {
        workers.supervise()?;
        if let Ok(n) = ledger::rotations_since(pool, last).await {
            rotations = n;
            if n > 0 {
                break;
            }
        }
        tokio::time::sleep(SUPERVISE).await;
    }
    Ok(FailoverCheck {
        failovers: servers.promoted_at.len(),
        rotations_after: rotations,
    })
}

/// With the load done, the queue ring must shrink back to a small fraction
/// of what went through it within a full turn of the ring plus margin,
/// orphan or not.
async fn ring_check(
    pool: &PgPool,
    workers: &mut Workers,
    plan: &Plan,
    jobs: usize,
    peak: i64,
) -> Result<RingCheck, ChaosError> {
    let limit = plan.rotate_interval * (QUEUE_SLOTS + 4) + Duration::from_secs(30);
    let bound = (jobs as i64 / 20).max(100);
    let deadline = Instant::now() + limit;
    let mut rows = i64::MAX;
    while Instant::now() < deadline {
        workers.supervise()?;
        if let Ok(now) = ledger::ring_rows(pool).await {
            rows = now;
            if rows <= bound {
                break;
            }
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let diagnosis = if rows > bound {
        ledger::ring_diagnosis(pool).await.ok()
    } else {
        None
    };
    Ok(RingCheck {
        peak: peak.max(rows),
        at_end: rows,
        bound,
        waited: limit,
        diagnosis,
    })
}
