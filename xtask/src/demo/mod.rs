//! `cargo xtask demo`: enqueue a lot of no-op jobs, run them with in-process
//! workers, and check that every one completed exactly once; then measure
//! the pickup latency of an idle queue. With `--serve`, keep a small
//! realistic system running (`live.rs`) and serve the dashboard on it.

mod live;

use crate::BoxError;
use awa_bench::fleet::{self, Fleet, FleetConfig};
use awa_bench::latency::{LatencyRecorder, Percentiles};
use awa_core::{NewJob, QueueName};
use awa_harness::{PgServer, ServerKind};
use awa_history::{HistoryPlane, PgHistoryPlane};
use awa_ready::{PgReadyPlane, ReadyPlane};
use indicatif::{ProgressBar, ProgressStyle};
use std::net::SocketAddr;
use std::process::ExitCode;
use std::time::{Duration, Instant};

const QUEUE: &str = "demo";
/// Jobs enqueued one at a time into the idle queue after the backlog.
const IDLE_JOBS: usize = 100;
const BATCH: usize = 5_000;
const WORKERS: usize = 2;
const CONCURRENCY: usize = 64;
/// Give up when no job completes for this long.
const STALL: Duration = Duration::from_secs(60);

/// Where `--serve` listens unless `--listen` says otherwise.
pub const DEFAULT_LISTEN: &str = "127.0.0.1:8088";

pub async fn run(jobs: usize, serve: Option<SocketAddr>) -> Result<ExitCode, BoxError> {
    // Listen first: a busy address is an error now, not after the run.
    let listener = match serve {
        Some(addr) => Some(listen(addr).await?),
        None => None,
    };
    let server = PgServer::shared().await?;
    let url = server.url().to_string();
    if server.kind() != ServerKind::External {
        println!(
            "throwaway PostgreSQL at {} (removed when this command exits)",
            awa_core::redact::redact_conninfo(&url)
        );
    }
    awa_maint::migrate(&url).await?;
    let queue = QueueName::new(QUEUE)?;
    let pool = fleet::pool(&url, 24).await?;
    let history = PgHistoryPlane::new(fleet::schema());
    // DATABASE_URL may have seen earlier demos: compare against what was
    // there before.
    let completed_before = completed_in_stats(&history, &pool, &queue).await?;

    let latency = LatencyRecorder::new();
    let config = FleetConfig {
        queue: queue.clone(),
        workers: WORKERS,
        concurrency: CONCURRENCY,
        leader: true,
        end_to_end: None,
        job_time: std::time::Duration::ZERO,
    };
    println!(
        "enqueueing {jobs} jobs into queue {QUEUE:?} (batches of {BATCH}); \
         {WORKERS} workers x {CONCURRENCY} concurrent no-op handlers, plus a maintenance leader"
    );
    let fleet = Fleet::start(&pool, &config, latency.clone());

    let bar = ProgressBar::new(jobs as u64).with_style(
        ProgressStyle::with_template(
            "{spinner} completed [{bar:40}] {pos}/{len} ({per_sec}, eta {eta})",
        )?
        .progress_chars("=> "),
    );
    let started = Instant::now();
    let mut producer = Some(tokio::spawn(enqueue_all(pool.clone(), queue.clone(), jobs)));
    let mut ids: Vec<i64> = Vec::new();

    let mut last = (0, Instant::now());
    let mut stalled = false;
    loop {
        if producer.as_ref().is_some_and(|p| p.is_finished()) {
            let result = producer.take().expect("checked above").await;
            match result.map_err(BoxError::from).and_then(|r| r) {
                Ok(got) => ids = got,
                Err(err) => {
                    bar.finish_and_clear();
                    let _ = fleet.stop().await;
                    return Err(format!("enqueueing failed: {err}").into());
                }
            }
        }
        let done = fleet.completed();
        bar.set_position(done);
        if producer.is_none() && done >= ids.len() as u64 {
            break;
        }
        if done != last.0 {
            last = (done, Instant::now());
        } else if last.1.elapsed() > STALL {
            stalled = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let elapsed = started.elapsed();
    bar.finish_and_clear();
    if let Some(p) = producer {
        p.abort();
    }
    let lat = latency.percentiles();
    // The same workers, now idle: one job at a time, each waited for, so
    // every pickup is a wake-up on an empty queue (LISTEN/NOTIFY).
    let idle = if stalled {
        None
    } else {
        Some(idle_pickup(&pool, &queue, &fleet, &latency).await?)
    };
    let totals = fleet.stop().await?;

    let distinct: i64 = sqlx::query_scalar(
        "SELECT count(DISTINCT t.id) FROM awa.terminal_jobs t \
           JOIN unnest($1::bigint[]) AS ours(id) ON ours.id = t.id \
          WHERE t.state = 'completed'",
    )
    .bind(&ids)
    .fetch_one(&pool)
    .await?;
    let completed_after = completed_in_stats(&history, &pool, &queue).await?;
    pool.close().await;

    let enqueued = ids.len() as i64;
    let idle_ran = idle.map_or(0, |p| p.count as i64);
    println!();
    println!("jobs enqueued        {enqueued}");
    // The backlog's completions only: the idle jobs came after `elapsed`.
    let backlog_done = totals.completed.saturating_sub(idle_ran as u64);
    println!(
        "jobs completed       {backlog_done} in {:.2} s: {:.0} jobs/s (first enqueue to last completion)",
        elapsed.as_secs_f64(),
        backlog_done as f64 / elapsed.as_secs_f64()
    );
    println!(
        "pickup latency       behind the backlog: p50 {:.1} ms, p95 {:.1} ms, p99 {:.1} ms, \
         max {:.1} ms (ready_at -> handler start, waiting behind up to {enqueued} jobs)",
        lat.p50, lat.p95, lat.p99, lat.max
    );
    if let Some(idle) = idle {
        println!(
            "                     idle: p50 {:.1} ms, p95 {:.1} ms, p99 {:.1} ms, max {:.1} ms \
             ({} jobs one at a time into the idle queue: the wake-up a lone job waits for)",
            idle.p50, idle.p95, idle.p99, idle.max, idle.count
        );
    }
    println!(
        "distinct completed   {distinct} of the backlog in awa.terminal_jobs; queue_stats \
         completed +{} (the {idle_ran} idle jobs included)",
        completed_after - completed_before
    );
    if totals.rejected > 0 {
        println!("rejected finishes    {}", totals.rejected);
    }
    let ok = !stalled
        && distinct == enqueued
        && completed_after - completed_before == enqueued + idle_ran
        && lat.count == enqueued as u64
        && idle_ran == IDLE_JOBS as i64;
    if ok {
        println!("completed == enqueued: yes, every job ran exactly once");
        if let Some(listener) = listener {
            serve_demo(&url, listener).await?;
        }
        Ok(ExitCode::SUCCESS)
    } else {
        if stalled {
            println!("no job completed for {}s; gave up", STALL.as_secs());
        }
        println!(
            "completed == enqueued: NO (enqueued {enqueued} + {IDLE_JOBS} idle, distinct \
             completed {distinct}, queue_stats +{}, handler runs {} + {idle_ran} idle)",
            completed_after - completed_before,
            lat.count
        );
        Ok(ExitCode::FAILURE)
    }
}

async fn enqueue_all(
    pool: sqlx::PgPool,
    queue: QueueName,
    jobs: usize,
) -> Result<Vec<i64>, BoxError> {
    let plane = PgReadyPlane::new(fleet::schema());
    let mut conn = pool.acquire().await?;
    let mut ids = Vec::with_capacity(jobs);
    let mut n = 0;
    while n < jobs {
        let batch: Vec<NewJob> = (n..(n + BATCH).min(jobs))
            .map(|i| NewJob::new(queue.clone(), "noop", serde_json::json!({ "n": i })))
            .collect();
        n += batch.len();
        for e in plane.enqueue(&mut conn, &batch).await? {
            ids.push(e.job_id.0);
        }
    }
    Ok(ids)
}

async fn completed_in_stats(
    history: &PgHistoryPlane,
    pool: &sqlx::PgPool,
    queue: &QueueName,
) -> Result<i64, BoxError> {
    let mut conn = pool.acquire().await?;
    let stats = history.queue_stats(&mut conn, Some(queue)).await?;
    Ok(stats
        .get(queue.as_str())
        .and_then(|s| s.get("completed"))
        .copied()
        .unwrap_or(0))
}

/// Enqueue [`IDLE_JOBS`] jobs one at a time, each after the previous one
/// completed and a short rest, and return the pickup latency of those jobs
/// alone (the recorder keeps the backlog's samples before them).
async fn idle_pickup(
    pool: &sqlx::PgPool,
    queue: &QueueName,
    fleet: &Fleet,
    latency: &LatencyRecorder,
) -> Result<Percentiles, BoxError> {
    let plane = PgReadyPlane::new(fleet::schema());
    let first = latency.recorded();
    for i in 0..IDLE_JOBS {
        // Let the workers go back to waiting for a notification.
        tokio::time::sleep(Duration::from_millis(20)).await;
        let before = fleet.completed();
        let mut conn = pool.acquire().await?;
        plane
            .enqueue(
                &mut conn,
                &[NewJob::new(
                    queue.clone(),
                    "noop",
                    serde_json::json!({ "idle": i }),
                )],
            )
            .await?;
        drop(conn);
        let deadline = Instant::now() + STALL;
        while fleet.completed() == before {
            if Instant::now() > deadline {
                return Err(
                    format!("idle job {i} did not complete within {}s", STALL.as_secs()).into(),
                );
            }
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    }
    Ok(latency.percentiles_since(first))
}

async fn listen(addr: SocketAddr) -> Result<tokio::net::TcpListener, BoxError> {
    awa_admin::bind(addr).await.map_err(|e| {
        format!(
            "cannot listen on {addr} for --serve: {e}; is another server using it? \
             pick another address with --listen ADDR (port 0 picks a free one)"
        )
        .into()
    })
}

/// `--serve`: a small realistic system (`live.rs`) keeps running on the
/// demo database while the admin API, dashboard and /metrics of `awa serve`
/// are served on it (in process, so a throwaway cluster stays up with it),
/// until Ctrl-C. AWA_ADMIN_TOKEN enables actions, as for `awa serve`.
async fn serve_demo(url: &str, listener: tokio::net::TcpListener) -> Result<(), BoxError> {
    let pool = fleet::pool(url, 16).await?;
    let live = live::start(&pool).await?;
    let mut config = awa_admin::AdminConfig::new(fleet::schema());
    config.token = match std::env::var("AWA_ADMIN_TOKEN") {
        Ok(t) if !t.is_empty() => Some(awa_admin::Token::new(&t)?),
        _ => None,
    };
    let metrics = awa_admin::metrics::Metrics::install()?;
    println!(
        "serving the demo data at http://{}/ ({}); queues email, images, webhooks, payments, \
         reports and exports keep working (failures, retries, dead letters, cron); Ctrl-C stops",
        listener.local_addr()?,
        if config.token.is_some() {
            "actions need AWA_ADMIN_TOKEN"
        } else {
            "read-only: set AWA_ADMIN_TOKEN for actions"
        }
    );
    let state = awa_admin::AppState::new(pool.clone(), config, Some(metrics));
    let served = awa_admin::serve(listener, state, async {
        let _ = tokio::signal::ctrl_c().await;
    })
    .await;
    live.stop().await?;
    pool.close().await;
    served?;
    Ok(())
}
