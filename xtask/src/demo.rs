//! `cargo xtask demo`: enqueue a lot of no-op jobs, run them with in-process
//! workers, and check that every one completed exactly once.

use crate::BoxError;
use crate::fleet::{self, Fleet, FleetConfig};
use crate::latency::LatencyRecorder;
use awa_core::{NewJob, QueueName};
use awa_harness::{PgServer, ServerKind};
use awa_history::{HistoryPlane, PgHistoryPlane};
use awa_ready::{PgReadyPlane, ReadyPlane};
use indicatif::{ProgressBar, ProgressStyle};
use std::process::ExitCode;
use std::time::{Duration, Instant};

const QUEUE: &str = "demo";
const BATCH: usize = 5_000;
const WORKERS: usize = 2;
const CONCURRENCY: usize = 64;
/// Give up when no job completes for this long.
const STALL: Duration = Duration::from_secs(60);

pub async fn run(jobs: usize, serve: bool) -> Result<ExitCode, BoxError> {
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

    let lat = latency.percentiles();
    let enqueued = ids.len() as i64;
    println!();
    println!("jobs enqueued        {enqueued}");
    println!(
        "jobs completed       {} in {:.2} s: {:.0} jobs/s (first enqueue to last completion)",
        totals.completed,
        elapsed.as_secs_f64(),
        totals.completed as f64 / elapsed.as_secs_f64()
    );
    println!(
        "pickup latency       p50 {:.1} ms, p95 {:.1} ms, p99 {:.1} ms, max {:.1} ms \
         (ready_at -> handler start; includes waiting behind the backlog)",
        lat.p50, lat.p95, lat.p99, lat.max
    );
    println!(
        "distinct completed   {distinct} in awa.terminal_jobs; queue_stats completed +{}",
        completed_after - completed_before
    );
    if totals.rejected > 0 {
        println!("rejected finishes    {}", totals.rejected);
    }
    let ok = !stalled
        && distinct == enqueued
        && completed_after - completed_before == enqueued
        && lat.count == enqueued as u64;
    if ok {
        println!("completed == enqueued: yes, every job ran exactly once");
        if serve {
            serve_demo(&url).await?;
        }
        Ok(ExitCode::SUCCESS)
    } else {
        if stalled {
            println!("no job completed for {}s; gave up", STALL.as_secs());
        }
        println!(
            "completed == enqueued: NO (enqueued {enqueued}, distinct completed {distinct}, \
             queue_stats +{}, handler runs {})",
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

/// `--serve`: the admin API, dashboard and /metrics of `awa serve` on the
/// demo database (in process, so a throwaway cluster stays up with it)
/// until Ctrl-C. AWA_ADMIN_TOKEN enables actions, as for `awa serve`.
async fn serve_demo(url: &str) -> Result<(), BoxError> {
    let pool = fleet::pool(url, 8).await?;
    let mut config = awa_admin::AdminConfig::new(fleet::schema());
    config.token = match std::env::var("AWA_ADMIN_TOKEN") {
        Ok(t) if !t.is_empty() => Some(awa_admin::Token::new(&t)?),
        _ => None,
    };
    let metrics = awa_admin::metrics::Metrics::install()?;
    let listener = awa_admin::bind("127.0.0.1:8088".parse()?).await?;
    println!(
        "serving the demo data at http://{}/ ({}); Ctrl-C stops",
        listener.local_addr()?,
        if config.token.is_some() {
            "actions need AWA_ADMIN_TOKEN"
        } else {
            "read-only: set AWA_ADMIN_TOKEN for actions"
        }
    );
    let state = awa_admin::AppState::new(pool, config, Some(metrics));
    awa_admin::serve(listener, state, async {
        let _ = tokio::signal::ctrl_c().await;
    })
    .await?;
    Ok(())
}
