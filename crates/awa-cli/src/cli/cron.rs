//! `awa cron ...`

use clap::{Args, Subcommand, ValueEnum};

#[derive(Debug, Subcommand)]
pub enum CronCommand {
    /// Every schedule with its next fire, last fire and that fire's job.
    List,
    /// Create a schedule (with --replace, or change the one of that name).
    Add(CronAddArgs),
    /// Delete a schedule (jobs it already enqueued stay).
    Remove(CronNameArgs),
    /// Stop firing a schedule until it is resumed.
    Pause(CronNameArgs),
    /// Fire a paused schedule again, from now (the ticks of the pause are
    /// not fired).
    Resume(CronNameArgs),
    /// Enqueue a schedule's job now, outside its ticks.
    RunNow(CronNameArgs),
}

#[derive(Debug, Args)]
pub struct CronNameArgs {
    /// The schedule's name.
    pub name: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum MissedPolicy {
    /// After downtime, fire only the latest missed tick.
    Skip,
    /// After downtime, fire the latest --catch-up-limit missed ticks.
    CatchUp,
}

#[derive(Debug, Args)]
pub struct CronAddArgs {
    /// Unique name: letters, digits and _ . : - (at most 128).
    pub name: String,
    /// 5 fields (minute hour day month weekday), 6 (seconds first), or an
    /// alias: @hourly, @daily, @weekly, @monthly, @yearly. Quote it.
    #[arg(long = "cron")]
    pub cron: String,
    /// IANA time zone the expression is read in (e.g. Europe/Berlin).
    #[arg(long, default_value = "UTC")]
    pub timezone: String,
    #[arg(long)]
    pub queue: String,
    #[arg(long)]
    pub kind: String,
    /// Job args as JSON (default {}).
    #[arg(long, default_value = "{}")]
    pub args: String,
    /// 1 runs first, 4 last (3 by default).
    #[arg(long, default_value_t = awa_core::Priority::DEFAULT.get().into(), allow_negative_numbers = true)]
    pub priority: i64,
    #[arg(long, allow_negative_numbers = true)]
    pub max_attempts: Option<i64>,
    /// Job metadata as a JSON object; each fire adds "awa_cron" to it.
    #[arg(long)]
    pub metadata: Option<String>,
    #[arg(long, value_enum, default_value_t = MissedPolicy::Skip)]
    pub missed: MissedPolicy,
    /// With --missed catch-up: most missed ticks fired (1 to 1000).
    #[arg(long, default_value_t = 10, allow_negative_numbers = true)]
    pub catch_up_limit: i64,
    /// Change the schedule if the name is taken (without it, a taken name
    /// is refused and nothing is written).
    #[arg(long)]
    pub replace: bool,
}
