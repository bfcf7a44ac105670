//! `awa job ...`

use crate::cli::{Cli, EnqueueArgs, JobCommand, JobListArgs};
use crate::{db, error::CliError, input, output, progress::Progress};
use awa_core::{JobState, NewJob, Priority, QueueName, Unique, bounds};
use awa_exec::{AttemptProgress, PgExecPlane};
use awa_history::{HistoryPlane, JobFilter, JobView, PgHistoryPlane};
use awa_ready::{Enqueued, PgReadyPlane, ReadyPlane};
use sqlx::Connection;

/// Jobs per enqueue round trip: large enough to amortise the trip, small
/// enough that one statement's arrays stay a few megabytes.
const BATCH: usize = 5000;
const BATCH_BYTES: usize = 8 << 20;

pub async fn run(cli: &Cli, cmd: &JobCommand) -> Result<(), CliError> {
    match cmd {
        JobCommand::Enqueue(args) => enqueue(cli, args).await,
        JobCommand::Dump(arg) => dump(cli, arg.id).await,
        JobCommand::Cancel(args) => match args.id {
            Some(id) => cancel(cli, id).await,
            None => super::job_bulk::cancel(cli, args).await,
        },
        JobCommand::List(args) => list(cli, args).await,
        JobCommand::Retry(args) => match args.id {
            Some(id) => super::job_bulk::retry_one(cli, id).await,
            None => super::job_bulk::retry(cli, args).await,
        },
    }
}

fn new_job(args: &EnqueueArgs) -> Result<NewJob, CliError> {
    let queue = QueueName::new(args.queue.clone())?;
    let mut job = NewJob::new(
        queue,
        args.kind.clone(),
        input::job_args(args.args.as_deref(), args.args_file.as_deref())?,
    );
    job.priority = Priority::new(args.priority)?;
    job.run_at = args
        .run_at
        .as_deref()
        .map(|t| input::time_or_offset("--run-at", t, chrono::Utc::now()))
        .transpose()?
        .map(|t| awa_core::time::WRITABLE.check("--run-at", t))
        .transpose()?;
    job.max_attempts = args
        .max_attempts
        .map(|m| {
            bounds::CountBound {
                hint: "a job runs at least once; leave it out for the queue default",
                ..bounds::MAX_ATTEMPTS
            }
            .check(m)
            .map(|m| m as i32)
        })
        .transpose()?;
    job.unique_key = args.unique_key.clone();
    job.unique = unique_spec(args)?;
    job.metadata = args
        .metadata
        .as_deref()
        .map(|m| input::json("--metadata", m))
        .transpose()?;
    if let Some(text) = &args.timeout {
        let timeout = input::bounded_duration(
            bounds::DurationBound {
                what: "--timeout",
                ..bounds::JOB_TIMEOUT
            },
            text,
        )?;
        awa_core::timeout::set(&mut job.metadata, timeout).map_err(|_| {
            CliError::Usage(
                "--timeout needs --metadata to be a JSON object (the timeout is stored in it)"
                    .into(),
            )
        })?;
    }
    if let Some(traceparent) = &args.traceparent {
        let member = awa_core::trace::member(traceparent, args.tracestate.as_deref())?;
        match job.metadata.get_or_insert_with(|| serde_json::json!({})) {
            // A context given in --metadata is the caller's choice: kept.
            serde_json::Value::Object(map) => {
                map.entry(awa_core::trace::METADATA_KEY).or_insert(member);
            }
            _ => {
                return Err(CliError::Usage(
                    "--traceparent needs --metadata to be a JSON object (or left out)".into(),
                ));
            }
        }
    }
    job.validate()?;
    Ok(job)
}

/// The key spec of `--unique-by`, `--unique-period` and
/// `--unique-states`, or None when none of them is given.
fn unique_spec(args: &EnqueueArgs) -> Result<Option<Unique>, CliError> {
    if args.unique_by.is_empty() && args.unique_period.is_none() && args.unique_states.is_none() {
        return Ok(None);
    }
    let mut spec = Unique::by_kind();
    for part in &args.unique_by {
        match part.trim() {
            "kind" => {}
            "queue" => spec.by_queue = true,
            "args" => spec.by_args = true,
            p => match p.strip_prefix("args.") {
                Some(field) if !field.is_empty() => spec.fields.push(field.to_string()),
                _ => {
                    return Err(CliError::Usage(format!(
                        "--unique-by {part:?} is not a key part; use kind, queue, args or \
                         args.FIELD (a top-level field of the args), e.g. --unique-by args.tenant"
                    )));
                }
            },
        }
    }
    if let Some(text) = &args.unique_period {
        spec.period = Some(input::bounded_duration(
            bounds::DurationBound {
                what: "--unique-period",
                ..bounds::UNIQUE_PERIOD
            },
            text,
        )?);
    }
    if let Some(states) = &args.unique_states {
        let mut kept = Vec::new();
        for name in states.iter().map(|s| s.trim()) {
            if name == "none" || name.is_empty() {
                continue;
            }
            kept.push(
                name.parse::<JobState>()
                    .map_err(|err| CliError::Usage(format!("--unique-states: {err}")))?,
            );
        }
        spec.states = Some(kept);
    }
    Ok(Some(spec))
}

async fn enqueue(cli: &Cli, args: &EnqueueArgs) -> Result<(), CliError> {
    let job = new_job(args)?;
    let count = bounds::ENQUEUE_COUNT.check(args.count)? as usize;
    let url = db::require_url(&cli.database_url)?;
    let mut conn = db::connect_migrated(url).await?;
    // The database holds every producer to its substrate's max_job_bytes
    // (which may differ from the default), so the CLI defers to it.
    let plane = match db::pinned(cli)? {
        Some(schema) => {
            db::require_substrate(&mut conn, &schema).await?;
            PgReadyPlane::new(schema)
        }
        // Routed in SQL by every statement; the write substrate as read
        // now saves the forwarding.
        None => PgReadyPlane::routed(db::routing(cli, &mut conn).await?.write().clone()),
    }
    .with_max_job_bytes(usize::MAX);
    // Copies per round trip: BATCH, fewer for large jobs (about 8 MiB).
    let per_batch = BATCH.min((BATCH_BYTES / job.json_bytes().max(1)).max(1));

    // One transaction for every batch: a failure part-way leaves nothing.
    let mut tx = conn.begin().await?;
    let mut results: Vec<Enqueued> = Vec::with_capacity(count);
    // A bar only when it takes more than one round trip.
    let bar =
        (count > per_batch).then(|| Progress::bar(cli.json, "enqueueing", count as u64, "jobs"));
    while results.len() < count {
        let batch = vec![job.clone(); (count - results.len()).min(per_batch)];
        results.extend(plane.enqueue(&mut tx, &batch).await?);
        if let Some(bar) = &bar {
            bar.inc(batch.len() as u64);
        }
    }
    if let Some(bar) = &bar {
        bar.set_message("committing");
    }
    tx.commit().await?;
    drop(bar);

    let ids: Vec<i64> = results.iter().map(|r| r.job_id.0).collect();
    let inserted: Vec<i64> = results
        .iter()
        .filter(|r| r.inserted)
        .map(|r| r.job_id.0)
        .collect();
    let mut existing: Vec<i64> = results
        .iter()
        .filter(|r| !r.inserted)
        .map(|r| r.job_id.0)
        .collect();
    existing.sort_unstable();
    existing.dedup();
    // Copies of this very enqueue share their key with the first copy; a
    // holder from before is a refusal with its own exit code.
    if let Some(&held_by) = existing.iter().find(|id| !inserted.contains(id)) {
        return Err(match &job.unique {
            Some(spec) => CliError::UniqueHeld {
                what: match &job.unique_key {
                    Some(key) => format!("{} with key {:?}", spec.describe(), output::clean(key)),
                    None => spec.describe(),
                },
                held_by,
            },
            None => CliError::UniqueKeyHeld {
                key: job.unique_key.clone().unwrap_or_default(),
                held_by,
            },
        });
    }
    let scheduled = results.iter().filter(|r| r.inserted && r.scheduled).count();
    let value = serde_json::json!({
        "ids": ids,
        "inserted": inserted.len(),
        "scheduled": scheduled,
        "existing": existing,
    });
    output::emit(cli.json, &value, || {
        enqueue_text(&job, &inserted, scheduled, &existing, count)
    });
    Ok(())
}

fn enqueue_text(
    job: &NewJob,
    inserted: &[i64],
    scheduled: usize,
    existing: &[i64],
    count: usize,
) -> String {
    let mut out = match inserted {
        [] => String::from("nothing enqueued"),
        [id] => format!("enqueued job {id} on queue {}", job.queue),
        [first, .., last] => format!(
            "enqueued {} jobs on queue {} (ids {first}..{last})",
            inserted.len(),
            job.queue
        ),
    };
    if scheduled > 0
        && let Some(at) = job.run_at
    {
        out.push_str(&format!(", scheduled for {}", at.to_rfc3339()));
    }
    if !existing.is_empty() {
        let key = job
            .unique_key
            .as_deref()
            .map(output::clean)
            .unwrap_or_default();
        let shared = match &job.unique {
            Some(spec) => format!("are duplicates by {}", spec.describe()),
            None => format!("share its unique key {key:?}"),
        };
        out.push_str(&format!(
            "; the other {} of {count} copies {shared}",
            count - inserted.len(),
        ));
    }
    out
}

async fn dump(cli: &Cli, id: i64) -> Result<(), CliError> {
    let id = input::job_id(id)?;
    let url = db::require_url(&cli.database_url)?;
    let mut conn = db::connect_migrated(url).await?;
    let routing = db::routing(cli, &mut conn).await?;
    let found = awa_history::job_in(&mut conn, &routing.reads(), id).await?;
    let schema = routing.write().clone();
    let history = PgHistoryPlane::new(schema.clone());
    let Some(job) = found else {
        // Gone from every plane: say whether reclamation took it.
        let horizon = history.horizon(&mut conn).await?;
        return Err(CliError::NotFound(match horizon {
            Some(h) if id <= h.pruned_through => format!(
                "job {id} is no longer in schema {schema}: terminal history of jobs up to id {} \
                 has been pruned (the latest at {}); `awa queue stats` still counts it",
                h.pruned_through,
                h.pruned_at.format("%Y-%m-%d %H:%M:%S UTC")
            ),
            _ => format!("no job with id {id} in schema {schema}"),
        }));
    };
    // What its attempts reported with their heartbeats, from the substrate
    // that runs it (none once it has finished), as `GET /api/jobs/{id}`
    // shows it.
    let mut progress = None;
    for schema in routing.reads() {
        progress = PgExecPlane::new(schema)
            .attempt_progress(&mut conn, id)
            .await?;
        if progress.is_some() {
            break;
        }
    }
    output::warn(&job.warnings);
    let dump = Dump { job, progress };
    output::emit(cli.json, &dump, || dump_text(&dump));
    Ok(())
}

/// `job dump --json`: the job's fields, then `progress` (null when no
/// attempt reported any).
#[derive(serde::Serialize)]
struct Dump {
    #[serde(flatten)]
    job: JobView,
    progress: Option<AttemptProgress>,
}

fn dump_text(dump: &Dump) -> String {
    let job = &dump.job;
    let json = |v: &serde_json::Value| v.to_string();
    let progress = dump.progress.as_ref();
    let mut lines: Vec<String> = [
        ("id", job.id.to_string()),
        ("queue", output::clean(&job.queue)),
        ("kind", output::clean(&job.kind)),
        ("state", job.state.to_string()),
        ("priority", job.priority.to_string()),
        (
            "attempt",
            format!("{} of {}", job.attempt, job.max_attempts),
        ),
        ("run_lease", job.run_lease.to_string()),
        ("created_at", job.created_at.to_rfc3339()),
        ("at", job.at.to_rfc3339()),
        (
            "last_error",
            job.last_error.as_deref().map_or("-".into(), output::clean),
        ),
        ("args", json(&job.args)),
        ("metadata", job.metadata.as_ref().map_or("-".into(), json)),
        (
            "progress",
            progress.map_or("-".into(), |p| {
                let percent = p.percent.map_or("-".into(), |n| format!("{n}%"));
                let message = p.message.as_deref().map_or("-".into(), output::clean);
                format!(
                    "{percent} {message} (run lease {}, reported {})",
                    p.run_lease,
                    p.updated_at.to_rfc3339()
                )
            }),
        ),
        (
            "checkpoint",
            progress
                .and_then(|p| p.checkpoint.as_ref())
                .map_or("-".into(), json),
        ),
    ]
    .iter()
    .map(|(k, v)| format!("{k}: {v}"))
    .collect();
    if let Some(h) = &job.holder {
        lines.push(format!("holder: {}", holder_text(h)));
        if let Some(at) = &h.attempt_heartbeat_at {
            lines.push(format!("attempt heartbeat: {}", at.to_rfc3339()));
        }
    }
    let attempts = job.attempts.as_deref().unwrap_or_default();
    if attempts.is_empty() {
        lines.push("attempts: none yet".into());
    } else {
        lines.push("attempts:".into());
        lines.extend(attempts.iter().map(attempt_text));
    }
    lines.join("\n")
}

/// `instance (host pid N), seen 2s ago`, or that the registry forgot it.
pub(crate) fn holder_text(h: &awa_history::Holder) -> String {
    match (&h.host, h.pid, h.heartbeat_age_secs) {
        (Some(host), Some(pid), Some(age)) => format!(
            "{} ({} pid {pid}), last heartbeat {age:.1}s ago",
            h.instance_id,
            output::clean(host)
        ),
        _ => format!(
            "{} (no longer registered: it stopped reporting; rescue will take the job)",
            h.instance_id
        ),
    }
}

/// One line of the attempt timeline: number, outcome, when, how long,
/// where, and the error.
fn attempt_text(a: &awa_history::AttemptRecord) -> String {
    let time = |t: Option<&awa_core::DbTime>| {
        t.map_or("?".to_string(), |t| t.format("%Y-%m-%d %H:%M:%S%.3f UTC"))
    };
    let span = match (&a.started_at, &a.ended_at) {
        (Some(s), Some(e)) => match (s.time(), e.time()) {
            (Some(st), Some(et)) => format!(
                "{} -> {} ({:.3}s)",
                time(Some(s)),
                e.format("%H:%M:%S%.3f"),
                (et - st).num_milliseconds() as f64 / 1000.0
            ),
            _ => format!("{} -> {}", time(Some(s)), time(Some(e))),
        },
        (Some(s), None) => format!("{} -> (running)", time(Some(s))),
        (None, e) => format!("ended {}", time(e.as_ref())),
    };
    let runtime = a
        .runtime
        .as_ref()
        .map_or(String::new(), |r| match (&r.host, r.pid, r.id) {
            (Some(host), Some(pid), _) => format!(" on {} pid {pid}", output::clean(host)),
            (_, _, Some(id)) => format!(" on runtime {id}"),
            _ => String::new(),
        });
    let error = a
        .error
        .as_deref()
        .map_or(String::new(), |e| format!(": {}", output::clean(e)));
    format!("  #{} {}  {span}{runtime}{error}", a.attempt, a.outcome)
}

async fn cancel(cli: &Cli, id: i64) -> Result<(), CliError> {
    let id = input::job_id(id)?;
    let url = db::require_url(&cli.database_url)?;
    let mut conn = db::connect_migrated(url).await?;
    let routing = db::routing(cli, &mut conn).await?;
    let schema = routing.write().clone();
    let Some(from) = awa_exec::cancel_in(&mut conn, &routing.reads(), id).await? else {
        return Err(CliError::NotFound(format!(
            "no unfinished job with id {id} in schema {schema} (unknown, or already completed, failed, cancelled or dead-lettered)"
        )));
    };
    let value = serde_json::json!({ "id": id, "cancelled_from": from });
    output::emit(cli.json, &value, || {
        format!("cancelled job {id} (it was {})", output::clean(&from))
    });
    Ok(())
}

async fn list(cli: &Cli, args: &JobListArgs) -> Result<(), CliError> {
    let queue = args.queue.clone().map(QueueName::new).transpose()?;
    let state = args
        .state
        .as_deref()
        .map(str::parse::<JobState>)
        .transpose()
        .map_err(CliError::Usage)?;
    if let Some(kind) = &args.kind {
        NewJob::check_kind(kind)?;
    }
    let args_contains = args
        .args_contains
        .as_deref()
        .map(|text| input::json("--args-contains", text))
        .transpose()?;
    if let Some(value) = &args_contains {
        awa_core::check_containment(value)?;
    }
    let limit = bounds::LIST_LIMIT.check(args.limit)?;
    let filter = JobFilter {
        queue,
        state,
        kind: args.kind.clone(),
        args_contains,
        before: None,
    };
    let url = db::require_url(&cli.database_url)?;
    let mut conn = db::connect_migrated(url).await?;
    // Newest first over every substrate the routing reads (ids are
    // database-wide).
    let mut jobs = Vec::new();
    for schema in db::routing(cli, &mut conn).await?.reads() {
        jobs.extend(
            PgHistoryPlane::new(schema)
                .list_page(&mut conn, &filter, limit)
                .await?,
        );
    }
    jobs.sort_by_key(|j| std::cmp::Reverse(j.id));
    jobs.truncate(limit as usize);
    for j in &jobs {
        output::warn(&j.warnings);
    }
    output::emit(cli.json, &jobs, || {
        if jobs.is_empty() {
            return "no jobs".into();
        }
        let rows: Vec<Vec<String>> = jobs
            .iter()
            .map(|j| {
                vec![
                    j.id.to_string(),
                    output::cell(&j.queue, 24),
                    output::cell(&j.kind, 24),
                    j.state.to_string(),
                    format!("{}/{}", j.attempt, j.max_attempts),
                    j.priority.to_string(),
                    j.at.format("%Y-%m-%d %H:%M:%S").to_string(),
                    j.holder.as_ref().map_or(String::new(), holder_cell),
                    j.last_error
                        .as_deref()
                        .map_or(String::new(), |e| output::cell(e, 40)),
                ]
            })
            .collect();
        output::table(
            &[
                "ID",
                "QUEUE",
                "KIND",
                "STATE",
                "ATTEMPT",
                "PRI",
                "AT (UTC)",
                "HOLDER (HEARTBEAT AGE)",
                "LAST ERROR",
            ],
            &rows,
        )
    });
    Ok(())
}

/// `host:pid (1.2s)`, or the instance id when the registry forgot it.
fn holder_cell(h: &awa_history::Holder) -> String {
    match (&h.host, h.pid, h.heartbeat_age_secs) {
        (Some(host), Some(pid), Some(age)) => {
            format!("{}:{pid} ({age:.1}s)", output::cell(host, 24))
        }
        _ => format!("{} (gone)", h.instance_id),
    }
}
