//! Scenario `soak` (`--long`): 1,000,000 jobs through the steady setup at
//! a fixed rate, sampling dead tuples and the size of schema awa every few
//! seconds, to show whether either keeps growing.

use super::Ctx;
use super::steady::{self, SteadyOptions, SteadyRun};
use super::system::System;
use crate::BoxError;
use std::time::Duration;

const JOBS: u64 = 1_000_000;
const QUICK_JOBS: u64 = 20_000;
pub const RATE: u64 = 5_000;
const EVERY: Duration = Duration::from_secs(5);

#[derive(Debug, Clone, serde::Serialize)]
pub struct SoakReport {
    pub rate: u64,
    pub jobs: u64,
    pub run: SteadyRun,
}

pub async fn run(ctx: &Ctx) -> Result<SoakReport, BoxError> {
    let jobs = if ctx.quick { QUICK_JOBS } else { JOBS };
    ctx.say(format!(
        "\n== soak: {jobs} jobs offered at {RATE}/s, dead tuples and size sampled every {}s",
        EVERY.as_secs()
    ));
    let mut opts = SteadyOptions::new(ctx, RATE);
    opts.label = format!("soak {RATE}/s");
    opts.jobs = Some(jobs);
    opts.stats_every = Some(if ctx.quick {
        Duration::from_secs(1)
    } else {
        EVERY
    });
    opts.drain_timeout = Duration::from_secs(120);
    let run = steady::run_rate(ctx, System::Awa, opts).await?;
    if let (Some(first), Some(last)) = (run.samples.first(), run.samples.last()) {
        ctx.say(format!(
            "   dead tuples {} -> {}, schema awa {} -> {} bytes over {:.0} s",
            first.dead_tuples, last.dead_tuples, first.awa_bytes, last.awa_bytes, last.t_s
        ));
    }
    Ok(SoakReport {
        rate: RATE,
        jobs,
        run,
    })
}
