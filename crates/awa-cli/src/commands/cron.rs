//! `awa cron ...`: schedules are validated before anything connects.
//! Schedules are database-wide (the leader fires them through the
//! routing); `--schema` / `AWA_SCHEMA`, when given, must still name a
//! prepared substrate, checked before anything is written.

use crate::cli::{Cli, CronAddArgs, CronCommand, MissedPolicy};
use crate::{db, error::CliError, input, output};
use awa_control::cron::{self, Missed, Schedule, Stored};
use chrono::Utc;

pub async fn run(cli: &Cli, cmd: &CronCommand) -> Result<(), CliError> {
    match cmd {
        CronCommand::List => list(cli).await,
        CronCommand::Add(args) => add(cli, args).await,
        CronCommand::Remove(a) => by_name(cli, &a.name, Act::Remove).await,
        CronCommand::Pause(a) => by_name(cli, &a.name, Act::Pause).await,
        CronCommand::Resume(a) => by_name(cli, &a.name, Act::Resume).await,
        CronCommand::RunNow(a) => run_now(cli, &a.name).await,
    }
}

#[derive(serde::Serialize)]
struct Listed<'a> {
    #[serde(flatten)]
    stored: &'a Stored,
    next_fire: Option<chrono::DateTime<Utc>>,
}

async fn list(cli: &Cli) -> Result<(), CliError> {
    let url = db::require_url(&cli.database_url)?;
    let mut conn = db::connect_migrated(url).await?;
    db::check_pinned(cli, &mut conn).await?;
    let all = cron::list(&mut conn, false).await?;
    let now = Utc::now();
    let listed: Vec<Listed<'_>> = all
        .iter()
        .map(|s| Listed {
            stored: s,
            next_fire: s.next_fire(now),
        })
        .collect();
    output::emit(cli.json, &listed, || {
        if listed.is_empty() {
            return "no schedules".into();
        }
        let time = |t: Option<chrono::DateTime<Utc>>| {
            t.map_or("-".into(), |t| t.format("%Y-%m-%d %H:%M:%S").to_string())
        };
        let rows: Vec<Vec<String>> = listed
            .iter()
            .map(|l| {
                let s = &l.stored.schedule;
                vec![
                    output::cell(&s.name, 32),
                    output::cell(&s.cron, 24),
                    output::cell(&s.timezone, 20),
                    output::cell(&s.queue, 20),
                    output::cell(&s.kind, 20),
                    if l.stored.enabled { "yes" } else { "paused" }.into(),
                    time(l.next_fire),
                    time(l.stored.last_tick),
                    l.stored.last_job_id.map_or("-".into(), |id| id.to_string()),
                ]
            })
            .collect();
        let mut out = output::table(
            &[
                "NAME",
                "CRON",
                "ZONE",
                "QUEUE",
                "KIND",
                "ENABLED",
                "NEXT FIRE (UTC)",
                "LAST TICK (UTC)",
                "LAST JOB",
            ],
            &rows,
        );
        // Why a schedule cannot fire, in full (the leader skips it and
        // fires the others until it fires again or is changed).
        for l in &listed {
            if let Some(error) = &l.stored.error {
                out.push_str(&format!(
                    "\n{} cannot fire (since {}): {}",
                    output::clean(&l.stored.schedule.name),
                    time(l.stored.error_since),
                    output::clean(error)
                ));
            }
        }
        out
    });
    Ok(())
}

fn schedule(args: &CronAddArgs) -> Result<Schedule, CliError> {
    let priority = input::in_range("priority", args.priority, 1, 4, "1 runs first, 4 last")? as i16;
    let max_attempts = args
        .max_attempts
        .map(|n| awa_core::bounds::MAX_ATTEMPTS.check(n).map(|n| n as i32))
        .transpose()?;
    let missed = match args.missed {
        MissedPolicy::Skip => Missed::Skip,
        MissedPolicy::CatchUp => Missed::CatchUp {
            limit: input::in_range(
                "catch-up limit",
                args.catch_up_limit,
                1,
                i64::from(cron::MAX_CATCH_UP),
                "how many missed ticks to fire after downtime",
            )? as u32,
        },
    };
    let s = Schedule {
        name: args.name.clone(),
        cron: args.cron.clone(),
        timezone: args.timezone.clone(),
        queue: args.queue.clone(),
        kind: args.kind.clone(),
        args: input::json("--args", &args.args)?,
        priority,
        max_attempts,
        metadata: args
            .metadata
            .as_deref()
            .map(|m| input::json("--metadata", m))
            .transpose()?,
        missed,
    };
    s.validate()?;
    Ok(s)
}

async fn add(cli: &Cli, args: &CronAddArgs) -> Result<(), CliError> {
    let s = schedule(args)?;
    let url = db::require_url(&cli.database_url)?;
    let mut conn = db::connect_migrated(url).await?;
    db::check_pinned(cli, &mut conn).await?;
    let done = if args.replace {
        cron::upsert(&mut conn, &s).await?
    } else if cron::create(&mut conn, &s).await? {
        cron::Upserted::Created
    } else {
        return Err(CliError::Refused(format!(
            "a schedule named {:?} already exists; nothing was written. Pass --replace to change it, \
             or `awa cron remove {}` first",
            s.name, s.name
        )));
    };
    let stored = cron::list(&mut conn, false)
        .await?
        .into_iter()
        .find(|x| x.schedule.name == s.name);
    let next = stored.as_ref().and_then(|x| x.next_fire(Utc::now()));
    #[derive(serde::Serialize)]
    struct Added<'a> {
        name: &'a str,
        outcome: cron::Upserted,
        next_fire: Option<chrono::DateTime<Utc>>,
    }
    let added = Added {
        name: &s.name,
        outcome: done,
        next_fire: next,
    };
    output::emit(cli.json, &added, || {
        let what = match done {
            cron::Upserted::Created => "created",
            cron::Upserted::Updated => "updated",
            cron::Upserted::Unchanged => "unchanged",
        };
        let next = next.map_or("never".into(), |t| t.to_rfc3339());
        format!(
            "schedule {} {what}; next fire {next} (fired by the maintenance leader)",
            s.name
        )
    });
    Ok(())
}

#[derive(Debug, Clone, Copy)]
enum Act {
    Remove,
    Pause,
    Resume,
}

async fn by_name(cli: &Cli, name: &str, act: Act) -> Result<(), CliError> {
    let url = db::require_url(&cli.database_url)?;
    let mut conn = db::connect_migrated(url).await?;
    db::check_pinned(cli, &mut conn).await?;
    let found = match act {
        Act::Remove => cron::remove(&mut conn, name).await?,
        Act::Pause => cron::set_enabled(&mut conn, name, false).await?,
        Act::Resume => cron::set_enabled(&mut conn, name, true).await?,
    };
    if !found {
        return Err(CliError::NotFound(format!(
            "no schedule named {name:?}; `awa cron list` shows them"
        )));
    }
    let verb = match act {
        Act::Remove => "removed",
        Act::Pause => "paused",
        Act::Resume => "resumed",
    };
    output::emit(
        cli.json,
        &serde_json::json!({"name": name, "outcome": verb}),
        || format!("schedule {name} {verb}"),
    );
    Ok(())
}

async fn run_now(cli: &Cli, name: &str) -> Result<(), CliError> {
    let url = db::require_url(&cli.database_url)?;
    let pool = db::pool_migrated(url, 2).await?;
    db::check_pinned(cli, &mut *pool.acquire().await?).await?;
    let job =
        awa_maint::cron::run_now(&pool, &awa_core::SchemaName::default_schema(), name).await?;
    pool.close().await;
    let Some(job) = job else {
        return Err(CliError::NotFound(format!(
            "no schedule named {name:?}; `awa cron list` shows them"
        )));
    };
    output::emit(
        cli.json,
        &serde_json::json!({"name": name, "job_id": job}),
        || format!("schedule {name}: enqueued job {job}"),
    );
    Ok(())
}
