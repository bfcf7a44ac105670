//! `awa dlq ...`

use crate::cli::{Cli, DlqCommand, DlqListArgs, DlqSelectArgs};
use crate::{db, error::CliError, input, output, progress::Progress};
use awa_core::{JobId, QueueName};
use awa_dlq::{DlqPlane, KeyHeld, PgDlqPlane, Selection};

pub async fn run(cli: &Cli, cmd: &DlqCommand) -> Result<(), CliError> {
    match cmd {
        DlqCommand::List(args) => list(cli, args).await,
        DlqCommand::Retry(args) => act(cli, args, Action::Retry).await,
        DlqCommand::Purge(args) => act(cli, args, Action::Purge).await,
    }
}

async fn list(cli: &Cli, args: &DlqListArgs) -> Result<(), CliError> {
    let queue = args.queue.clone().map(QueueName::new).transpose()?;
    let limit = awa_core::bounds::CountBound {
        hint: "narrow the list with --queue",
        ..awa_core::bounds::LIST_LIMIT
    }
    .check(args.limit)?;
    let url = db::require_url(&cli.database_url)?;
    let mut conn = db::connect_migrated(url).await?;
    // Every substrate the routing reads (a draining one may still hold
    // some, until the leader moves them), newest first.
    let mut entries = Vec::new();
    for schema in db::routing(cli, &mut conn).await?.reads() {
        entries.extend(
            PgDlqPlane::new(schema)
                .list(&mut conn, queue.as_ref(), limit)
                .await?,
        );
    }
    entries.sort_by_key(|e| std::cmp::Reverse(e.dead_at.clone()));
    entries.truncate(limit as usize);
    output::emit(cli.json, &entries, || {
        if entries.is_empty() {
            return "the dead-letter queue is empty".into();
        }
        let rows: Vec<Vec<String>> = entries
            .iter()
            .map(|e| {
                vec![
                    e.job_id.to_string(),
                    output::cell(&e.queue, 24),
                    output::cell(&e.kind, 24),
                    format!("{}/{}", e.attempt, e.max_attempts),
                    e.dead_at.format("%Y-%m-%d %H:%M:%S").to_string(),
                    e.last_error
                        .as_deref()
                        .map_or(String::new(), |x| output::cell(x, 50)),
                ]
            })
            .collect();
        output::table(
            &[
                "ID",
                "QUEUE",
                "KIND",
                "ATTEMPT",
                "DEAD AT (UTC)",
                "LAST ERROR",
            ],
            &rows,
        )
    });
    Ok(())
}

#[derive(Debug, Clone, Copy)]
enum Action {
    Retry,
    Purge,
}

fn selection(args: &DlqSelectArgs) -> Result<Selection, CliError> {
    // clap's group guarantees exactly one of --id / --all.
    match args.id {
        Some(id) => Ok(Selection::One(input::job_id(id)?)),
        None => Ok(Selection::All {
            queue: args.queue.clone().map(QueueName::new).transpose()?,
        }),
    }
}

async fn act(cli: &Cli, args: &DlqSelectArgs, action: Action) -> Result<(), CliError> {
    let which = selection(args)?;
    let url = db::require_url(&cli.database_url)?;
    let mut conn = db::connect_migrated(url).await?;
    let routing = db::routing(cli, &mut conn).await?;
    let schema = routing.write().clone();
    let (mut ids, mut kept): (Vec<JobId>, Vec<KeyHeld>) = (Vec::new(), Vec::new());
    let _spinner = matches!(which, Selection::All { .. }).then(|| {
        Progress::spinner(
            cli.json,
            match action {
                Action::Retry => "retrying dead-lettered jobs",
                Action::Purge => "purging dead-lettered jobs",
            },
        )
    });
    // Every substrate the routing reads; a retried job goes back to the
    // ready ring of the substrate that held it (which workers read).
    for s in routing.reads() {
        let plane = PgDlqPlane::new(s);
        match action {
            Action::Retry => {
                let r = plane.retry(&mut conn, &which).await?;
                ids.extend(r.retried);
                kept.extend(r.kept);
            }
            Action::Purge => ids.extend(plane.purge(&mut conn, &which).await?),
        }
    }
    let why_kept = |k: &KeyHeld| {
        format!(
            "job {} stays dead-lettered: its unique key {:?} is held by unfinished job {}; \
             retry it once that job has finished, or purge it",
            k.job_id, k.unique_key, k.held_by
        )
    };
    if let (Selection::One(_), Some(k)) = (&which, kept.first()) {
        return Err(CliError::Refused(why_kept(k)));
    }
    if let Selection::One(id) = which
        && ids.is_empty()
    {
        return Err(CliError::NotFound(format!(
            "no dead-lettered job with id {id} in schema {schema}"
        )));
    }
    let (key, one, many) = match action {
        Action::Retry => (
            "retried",
            "moved back to its queue",
            "moved back to their queues",
        ),
        Action::Purge => ("purged", "deleted", "deleted"),
    };
    let value = match action {
        Action::Retry => serde_json::json!({ key: ids, "kept": kept }),
        Action::Purge => serde_json::json!({ key: ids }),
    };
    output::emit(cli.json, &value, || {
        let list: Vec<String> = ids.iter().map(JobId::to_string).collect();
        let mut text = match ids.len() {
            0 if kept.is_empty() => "no dead-lettered jobs matched".into(),
            0 => "no dead-lettered jobs retried".into(),
            1 => format!("job {} {one}", list[0]),
            n => format!("{n} jobs {many}: {}", list.join(", ")),
        };
        for k in &kept {
            text.push('\n');
            text.push_str(&why_kept(k));
        }
        text
    });
    Ok(())
}
