//! `--handler chaos:FILE`, for chaos tests (`cargo xtask chaos`): records
//! every execution, sleeps as the job asks, completes, except for the
//! poison kinds (issue 8, item 6), which hand back a result the database
//! cannot store: `poison-nul-error` (an error text with a NUL byte),
//! `poison-huge-snooze` (a snooze of u64::MAX / 4 s) and
//! `poison-huge-retry-after` (a retry 10^13 s away).

use awa_exec::worker::{HandlerResult, JobContext, JobError, Outcome};
use std::io::Write as _;
use std::path::PathBuf;
use std::time::Duration;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Chaos {
    /// One line per execution is appended here: `job_id run_lease attempt kind`.
    pub log: PathBuf,
}

impl Chaos {
    pub async fn handle(&self, ctx: &JobContext, max_sleep_ms: u64) -> HandlerResult {
        let job = &ctx.job;
        let line = format!(
            "{} {} {} {}\n",
            job.token.job_id.0, job.token.run_lease.0, job.attempt, job.kind
        );
        // One append per execution, before any work: a kill -9 after this
        // line still counts as an execution. Lines this short are written
        // by one write(2) on an O_APPEND file, so processes sharing the
        // file cannot interleave them.
        let log = self.log.clone();
        let written = tokio::task::spawn_blocking(move || {
            std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(&log)
                .and_then(|mut f| f.write_all(line.as_bytes()))
        })
        .await;
        match written {
            Ok(Ok(())) => {}
            Ok(Err(e)) => {
                return Err(JobError::Retry(format!(
                    "chaos handler cannot append to {}: {e}",
                    self.log.display()
                )));
            }
            Err(e) => return Err(JobError::Retry(format!("chaos handler: {e}"))),
        }
        let ms = job
            .args
            .get("ms")
            .and_then(serde_json::Value::as_u64)
            .unwrap_or(0)
            .min(max_sleep_ms);
        if ms > 0 {
            tokio::time::sleep(Duration::from_millis(ms)).await;
        }
        match job.kind.as_str() {
            "poison-nul-error" => Err(JobError::Retry("poison: a NUL \0 in the error".into())),
            "poison-huge-snooze" => Ok(Outcome::Snooze(Duration::from_secs(u64::MAX / 4))),
            "poison-huge-retry-after" => Err(JobError::RetryAfter(
                Duration::from_secs(10_000_000_000_000),
                "poison: a retry 10^13 s away".into(),
            )),
            _ => Ok(Outcome::Complete),
        }
    }
}
