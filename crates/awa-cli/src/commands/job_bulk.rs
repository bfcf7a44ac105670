//! `awa job retry ...` and `awa job cancel --queue ...`: acting on one
//! failed job, or on every job a selection names.

use crate::cli::{Cli, JobCancelArgs, JobRetryArgs};
use crate::{db, error::CliError, input, output};
use awa_core::{JobSelection, JobState, QueueName, SchemaName, SelectionFor};
use sqlx::PgConnection;

/// `awa job retry ID`: put one failed or cancelled job back as fresh work.
pub async fn retry_one(cli: &Cli, id: i64) -> Result<(), CliError> {
    let id = input::job_id(id)?;
    let url = db::require_url(&cli.database_url)?;
    let mut conn = db::connect_migrated(url).await?;
    let reads = db::routing(cli, &mut conn).await?.reads();
    let Some(done) = awa_history::retry_in(&mut conn, &reads, id).await? else {
        // Say why: unknown, dead-lettered (another command), or not over.
        let found = awa_history::job_in(&mut conn, &reads, id).await?;
        return Err(CliError::NotFound(match found.map(|j| j.state) {
            None => format!(
                "no failed or cancelled job with id {id} (unknown, or its failure is past the \
                 failure retention)"
            ),
            Some(JobState::DeadLettered) => {
                format!("job {id} is dead-lettered: retry it with `awa dlq retry {id}`")
            }
            Some(state) => format!(
                "job {id} is {state}, not failed or cancelled: only a finished failure can be retried"
            ),
        }));
    };
    if let Some(kept) = done.kept.first() {
        return Err(CliError::RetryKeyHeld {
            id: id.0,
            key: kept.unique_key.clone(),
            held_by: kept.held_by.0,
        });
    }
    output::emit(cli.json, &done, || {
        format!("job {id} is back as fresh work (its attempts start again; the history is kept)")
    });
    Ok(())
}

/// `awa job retry --queue Q --state failed|cancelled [...] [--dry-run]`.
pub async fn retry(cli: &Cli, args: &JobRetryArgs) -> Result<(), CliError> {
    let queue = args.queue.as_deref().expect("clap: id or --queue");
    let filters = [&args.state, &args.kind, &args.args_contains];
    let (sel, mut conn, reads) = select(cli, queue, filters, SelectionFor::Retry).await?;
    let done = awa_history::retry_matching(&mut conn, &reads, &sel, args.dry_run).await?;
    let state = sel.state.map_or("", |s| s.as_str());
    output::emit(cli.json, &done, || {
        if done.dry_run {
            return format!(
                "would retry {} {state} jobs of queue {} (dry run: nothing changed)",
                done.matched,
                output::clean(queue)
            );
        }
        let mut out = format!(
            "retried {} {state} jobs of queue {}",
            done.retried.len(),
            output::clean(queue)
        );
        if !done.kept.is_empty() {
            out.push_str(&format!(
                "; {} kept: a newer unfinished job holds each one's unique key (see --json)",
                done.kept.len()
            ));
        }
        out
    });
    Ok(())
}

/// `awa job cancel --queue Q [--state S] [...] [--dry-run]`.
pub async fn cancel(cli: &Cli, args: &JobCancelArgs) -> Result<(), CliError> {
    let queue = args.queue.as_deref().expect("clap: id or --queue");
    let filters = [&args.state, &args.kind, &args.args_contains];
    let (sel, mut conn, reads) = select(cli, queue, filters, SelectionFor::Cancel).await?;
    let done = awa_exec::cancel_matching(&mut conn, &reads, &sel, args.dry_run).await?;
    output::emit(cli.json, &done, || {
        if done.dry_run {
            format!(
                "would cancel {} unfinished jobs of queue {} (dry run: nothing changed)",
                done.matched,
                output::clean(queue)
            )
        } else {
            format!(
                "cancelled {} jobs of queue {}",
                done.cancelled.len(),
                output::clean(queue)
            )
        }
    });
    Ok(())
}

/// What both bulk commands do first: the selection their filters name
/// (`--state`, `--kind`, `--args-contains`), checked for the action before
/// anything connects, then a connection to a migrated database and the
/// substrates the routing reads.
async fn select(
    cli: &Cli,
    queue: &str,
    [state, kind, args_contains]: [&Option<String>; 3],
    action: SelectionFor,
) -> Result<(JobSelection, PgConnection, Vec<SchemaName>), CliError> {
    let sel = selection(
        queue,
        state.as_deref(),
        kind.as_deref(),
        args_contains.as_deref(),
    )?;
    sel.validate(action)?;
    let url = db::require_url(&cli.database_url)?;
    let mut conn = db::connect_migrated(url).await?;
    let reads = db::routing(cli, &mut conn).await?.reads();
    Ok((sel, conn, reads))
}

/// The selection of a bulk action, checked before connecting.
fn selection(
    queue: &str,
    state: Option<&str>,
    kind: Option<&str>,
    args_contains: Option<&str>,
) -> Result<JobSelection, CliError> {
    Ok(JobSelection {
        queue: QueueName::new(queue.to_string())?,
        state: state
            .map(str::parse::<JobState>)
            .transpose()
            .map_err(CliError::Usage)?,
        kind: kind.map(str::to_string),
        args_contains: args_contains
            .map(|text| input::json("--args-contains", text))
            .transpose()?,
    })
}
