//! How the rate scenarios (`steady`, `procs`) choose their runs: every
//! system at each rate that always runs, then faster rates, each for the
//! systems whose last run kept up, until none did. And what their reports
//! share: the run at a rate, and the headline, the highest rate kept up
//! with p95 under a bound.

use super::Ctx;
use super::system::System;
use crate::BoxError;

/// One run at one offered rate.
pub trait RateRun {
    /// Its offered rate, whether the system kept up with it (steady's
    /// "sustained") and its pickup latency's p95 (ms).
    fn rated(&self) -> (u64, bool, f64);
}

/// The run at `rate`, if there was one.
pub fn at<R: RateRun>(runs: &[R], rate: u64) -> Option<&R> {
    runs.iter().find(|r| r.rated().0 == rate)
}

/// The runs of every system of `ctx` (ours first), each at `rates`, then at
/// `steps` while its last run kept up. With `--quick` the baseline runs only
/// at the last of `rates`.
pub async fn climb<R: RateRun>(
    ctx: &Ctx,
    rates: &[u64],
    steps: &[u64],
    mut run: impl AsyncFnMut(System, u64) -> Result<R, BoxError>,
) -> Result<Vec<Vec<R>>, BoxError> {
    let systems = ctx.systems();
    let mut runs: Vec<Vec<R>> = systems.iter().map(|_| Vec::new()).collect();
    for &rate in rates {
        let these = if Some(&rate) == rates.last() {
            ctx.systems()
        } else {
            ctx.systems_unless_quick()
        };
        for (i, &system) in systems.iter().enumerate() {
            if these.contains(&system) {
                runs[i].push(run(system, rate).await?);
            }
        }
    }
    for &rate in steps {
        let mut any = false;
        for (i, &system) in systems.iter().enumerate() {
            if runs[i].last().is_some_and(|r| r.rated().1) {
                any = true;
                runs[i].push(run(system, rate).await?);
            }
        }
        if !any {
            break;
        }
    }
    Ok(runs)
}

/// The highest offered rate kept up with p95 below `p95_ms`.
pub fn best_rate<R: RateRun>(runs: &[R], p95_ms: f64) -> Option<u64> {
    runs.iter()
        .map(R::rated)
        .filter(|&(_, kept_up, p95)| kept_up && p95 < p95_ms)
        .map(|(rate, _, _)| rate)
        .max()
}
