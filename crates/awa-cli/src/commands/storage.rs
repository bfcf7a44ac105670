//! `awa storage ...`

use crate::cli::{
    Cli, DropSubstrateArgs, GrantArgs, PrepareArgs, StorageCommand, StorageConfigureArgs,
    StorageStatusArgs, TransitionPrepareArgs,
};
use crate::input;
use crate::{db, error::CliError, output};
use awa_control::substrate::{MAX_HISTORY_RETENTION, SubstrateSettings};
use awa_control::transition::{self, Step};
use awa_core::{SchemaName, SlotCounts, SubstrateShape};
use awa_maint::substrate::{self, PrepareOutcome};

pub async fn run(cli: &Cli, cmd: &StorageCommand) -> Result<(), CliError> {
    match cmd {
        StorageCommand::PrepareQueueStorageSchema(args) => prepare(cli, args).await,
        StorageCommand::Status(args) => status(cli, args).await,
        StorageCommand::GrantRuntimeRole(args) => grant(cli, args).await,
        StorageCommand::Configure(args) => configure(cli, args).await,
        StorageCommand::Prepare(args) => transition_prepare(cli, args).await,
        StorageCommand::EnterMixedTransition => step(cli, Step::EnterMixed).await,
        StorageCommand::Finalize => step(cli, Step::Finalize).await,
        StorageCommand::Abort => step(cli, Step::Abort).await,
        StorageCommand::DropSubstrate(args) => drop_substrate(cli, args).await,
    }
}

/// The `--schema` of a storage command, `awa` when absent.
fn schema_or_default(cli: &Cli) -> Result<SchemaName, CliError> {
    Ok(db::pinned(cli)?.unwrap_or_else(SchemaName::default_schema))
}

async fn transition_prepare(cli: &Cli, args: &TransitionPrepareArgs) -> Result<(), CliError> {
    let target = SchemaName::new(args.target_schema.clone())?;
    let url = db::require_url(&cli.database_url)?;
    let mut conn = db::connect_migrated(url).await?;
    db::check_pinned(cli, &mut conn).await?;
    let outcome = transition::prepare(&mut conn, &target).await?;
    report_step(cli, &outcome);
    Ok(())
}

async fn step(cli: &Cli, step: Step) -> Result<(), CliError> {
    let url = db::require_url(&cli.database_url)?;
    let mut conn = db::connect_migrated(url).await?;
    db::check_pinned(cli, &mut conn).await?;
    let outcome = match step {
        Step::EnterMixed => transition::enter_mixed(&mut conn).await?,
        Step::Finalize => transition::finalize(&mut conn).await?,
        Step::Abort => transition::abort(&mut conn).await?,
        Step::Prepare => unreachable!("prepare takes a target"),
    };
    report_step(cli, &outcome);
    Ok(())
}

fn report_step(cli: &Cli, outcome: &transition::StepOutcome) {
    output::emit(cli.json, outcome, || {
        let target = outcome.target_schema.as_deref().unwrap_or("-");
        let active = &outcome.active_schema;
        match outcome.step {
            Step::Prepare => format!(
                "prepared the move from {active} to {target}: nothing moves yet; runtimes register \
                 {target} within a second. Next: awa storage enter-mixed-transition"
            ),
            Step::EnterMixed => format!(
                "mixed: new work goes to {target}; workers claim from {active} and {target}, and \
                 {active} only drains. Next, once `awa storage status` shows no backlog in \
                 {active}: awa storage finalize"
            ),
            Step::Finalize => format!(
                "finalized: {active} is the active substrate; the old one is kept read-only for \
                 its history (drop it with awa --schema NAME storage drop-substrate --yes)"
            ),
            Step::Abort => format!(
                "aborted: new work goes to {active} again; anything already in the target keeps \
                 running there until it drains"
            ),
        }
    });
}

async fn drop_substrate(cli: &Cli, args: &DropSubstrateArgs) -> Result<(), CliError> {
    let Some(schema) = db::pinned(cli)? else {
        return Err(CliError::Usage(
            "name the substrate to drop with --schema NAME".into(),
        ));
    };
    if schema.is_default() {
        return Err(CliError::Usage(
            "the default substrate awa holds the control tables and cannot be dropped".into(),
        ));
    }
    if !args.yes {
        return Err(CliError::Usage(format!(
            "dropping {schema} deletes its retained history; pass --yes to confirm"
        )));
    }
    let url = db::require_url(&cli.database_url)?;
    let mut conn = db::connect_migrated(url).await?;
    db::require_substrate(&mut conn, &schema).await?;
    substrate::drop_unused(&mut conn, &schema).await?;
    let value = serde_json::json!({ "schema": schema, "dropped": true });
    output::emit(cli.json, &value, || format!("substrate {schema} dropped"));
    Ok(())
}

async fn configure(cli: &Cli, args: &StorageConfigureArgs) -> Result<(), CliError> {
    // Validate everything before connecting.
    let schema = schema_or_default(cli)?;
    let history_retention = match args.history_retention.as_deref() {
        None => None,
        Some("auto") => Some(None),
        Some(text) => {
            let d = input::duration("--history-retention", text)?;
            if d > MAX_HISTORY_RETENTION {
                return Err(CliError::Usage(format!(
                    "--history-retention {text:?} is longer than the maximum of 3650days"
                )));
            }
            Some(Some(d))
        }
    };
    let failure_retention = args
        .failure_retention
        .as_deref()
        .map(|text| input::bounded_duration(awa_core::bounds::FAILURE_RETENTION, text))
        .transpose()?;
    let settings = SubstrateSettings {
        history_retention,
        max_job_bytes: args.max_job_bytes,
        failure_retention,
    };
    if settings.history_retention.is_none()
        && settings.max_job_bytes.is_none()
        && settings.failure_retention.is_none()
    {
        return Err(CliError::Usage(
            "nothing to change: pass --history-retention, --max-job-bytes and/or \
             --failure-retention"
                .into(),
        ));
    }
    settings.validate()?;
    let url = db::require_url(&cli.database_url)?;
    let mut conn = db::connect_migrated(url).await?;
    db::require_substrate(&mut conn, &schema).await?;
    let applied = settings.apply(&mut conn, &schema).await?;
    let value = serde_json::json!({
        "schema": schema,
        "history_retention_secs": applied.history_retention_secs,
        "max_job_bytes": applied.max_job_bytes,
        "failure_retention_secs": applied.failure_retention_secs,
    });
    output::emit(cli.json, &value, || {
        let retention = match applied.history_retention_secs {
            Some(secs) => format!(
                "terminal history is kept at least {} after its slot is sealed",
                humantime::format_duration(std::time::Duration::from_secs_f64(secs))
            ),
            None => "history retention is automatic ((queue slots - 2) x rotate interval)".into(),
        };
        format!(
            "substrate {schema}: {retention}; failed and cancelled jobs are kept {}; jobs up to {} bytes",
            humantime::format_duration(std::time::Duration::from_secs_f64(
                applied.failure_retention_secs
            )),
            applied.max_job_bytes
        )
    });
    Ok(())
}

async fn grant(cli: &Cli, args: &GrantArgs) -> Result<(), CliError> {
    let schema = schema_or_default(cli)?;
    if args.role.is_empty() || args.role.len() > 63 {
        return Err(CliError::Usage(
            "--role must name an existing role (1 to 63 bytes)".into(),
        ));
    }
    let url = db::require_url(&cli.database_url)?;
    let mut conn = db::connect_migrated(url).await?;
    db::require_substrate(&mut conn, &schema).await?;
    substrate::grant_runtime_role(&mut conn, &args.role, &schema).await?;
    let value = serde_json::json!({ "role": args.role, "schema": schema, "granted": true });
    output::emit(cli.json, &value, || {
        format!(
            "granted runtime privileges on substrate {schema} to {}. For prune to truncate, an administrator must also run: GRANT pg_read_all_stats TO {};",
            args.role, args.role
        )
    });
    Ok(())
}

async fn prepare(cli: &Cli, args: &PrepareArgs) -> Result<(), CliError> {
    // Validate everything before connecting: bad input never reaches SQL.
    let Some(schema) = db::pinned(cli)? else {
        return Err(CliError::Usage(
            "name the schema to prepare with --schema NAME".into(),
        ));
    };
    if args.reset && schema.is_default() {
        return Err(awa_maint::MaintError::DefaultSchemaReset.into());
    }
    let slots = SlotCounts::new(
        args.queue_slot_count,
        args.lease_slot_count,
        args.claim_slot_count,
    )?;
    let shape = SubstrateShape { schema, slots };
    let url = db::require_url(&cli.database_url)?;
    let mut conn = db::connect(url).await?;
    let outcome = substrate::prepare(&mut conn, &shape, args.reset).await?;
    let value =
        serde_json::json!({ "schema": shape.schema, "slots": shape.slots, "outcome": outcome });
    output::emit(cli.json, &value, || {
        let verb = match outcome {
            PrepareOutcome::Installed => "prepared",
            PrepareOutcome::Unchanged => "already prepared (unchanged)",
            PrepareOutcome::Reset => "reset and prepared",
        };
        format!(
            "substrate {} {verb}: {} queue, {} lease, {} claim slots. It is not active; \
             routing work to it is a separate transition.",
            shape.schema, shape.slots.queue, shape.slots.lease, shape.slots.claim
        )
    });
    Ok(())
}

async fn status(cli: &Cli, args: &StorageStatusArgs) -> Result<(), CliError> {
    let threshold = input::duration("--pinned-alert-after", &args.pinned_alert_after)?;
    let url = db::require_url(&cli.database_url)?;
    let mut conn = db::connect(url).await?;
    let status = awa_control::status::storage_status(&mut conn).await?;
    if let Some(found) = status.schema_version
        && found > awa_maint::LATEST_VERSION
    {
        return Err(awa_maint::MaintError::SchemaTooNew {
            found,
            known: awa_maint::LATEST_VERSION,
        }
        .into());
    }
    // Status covers every substrate; a pin must still name one.
    db::check_pinned(cli, &mut conn).await?;
    let alert = status
        .maintenance
        .pinned_snapshot
        .as_ref()
        .and_then(|p| p.alert(threshold));
    let value = serde_json::json!({ "status": &status, "pinned_alert": &alert });
    // The JSON keeps its fields at the top level, plus `pinned_alert`.
    let mut value = value["status"].clone();
    value["pinned_alert"] = serde_json::to_value(&alert).unwrap_or_default();
    output::emit(cli.json, &value, || {
        let mut out = String::new();
        if let Some(a) = &alert {
            out.push_str(&format!("ALERT: {}\n", output::clean(&a.message)));
        }
        match status.schema_version {
            None => out.push_str("schema version: none (run `awa migrate`)\n"),
            Some(v) => out.push_str(&format!(
                "schema version: {v} (this binary knows up to {})\n",
                awa_maint::LATEST_VERSION
            )),
        }
        if let Some(t) = &status.transition {
            out.push_str(&format!(
                "transition: {} (active {}, target {}, epoch {})\n",
                t.state,
                t.active_schema,
                t.target_schema.as_deref().unwrap_or("-"),
                t.epoch
            ));
            let writes = match (t.state.as_str(), &t.target_schema) {
                ("mixed", Some(target)) => target.as_str(),
                _ => t.active_schema.as_str(),
            };
            out.push_str(&format!("routing: new work goes to {writes}"));
            if !t.draining.is_empty() {
                out.push_str(&format!("; still draining: {}", t.draining.join(", ")));
            }
            out.push('\n');
        }
        out.push_str("substrates:\n");
        for s in &status.substrates {
            out.push_str(&format!(
                "  {} ({}): {} queue / {} lease / {} claim slots\n",
                s.schema, s.routing, s.slots.queue, s.slots.lease, s.slots.claim
            ));
            let backlog: Vec<String> = s
                .backlog
                .iter()
                .map(|(state, n)| format!("{state} {n}"))
                .collect();
            out.push_str(&format!(
                "    backlog: {}\n",
                if backlog.is_empty() {
                    "none".to_string()
                } else {
                    backlog.join(", ")
                }
            ));
            for r in &s.runtimes {
                out.push_str(&format!(
                    "    runtime {} ({} on {} pid {}): {}\n",
                    r.instance_id, r.role, r.host, r.pid, r.mode
                ));
            }
            out.push_str(&format!(
                "    history retention: {}; failures kept {} (about {} now); parked attempts: {}\n",
                match s.history_retention_secs {
                    Some(secs) =>
                        humantime::format_duration(std::time::Duration::from_secs_f64(secs))
                            .to_string(),
                    None => "auto ((queue slots - 2) x rotate interval)".to_string(),
                },
                humantime::format_duration(std::time::Duration::from_secs_f64(
                    s.failure_retention_secs
                )),
                s.failures_kept,
                s.parked_attempts
            ));
            for r in &s.rings {
                let rows: Vec<String> = s
                    .slot_rows
                    .iter()
                    .filter(|x| x.ring == r.ring && x.live_rows > 0)
                    .map(|x| format!("{}:{}", x.slot, x.live_rows))
                    .collect();
                out.push_str(&format!(
                    "    ring {:<6} slot {:>3}  generation {:<6} rows/slot [{}]\n",
                    r.ring,
                    r.slot,
                    r.generation,
                    rows.join(" ")
                ));
                for o in s.last_outcomes.iter().filter(|o| o.ring == r.ring) {
                    out.push_str(&format!(
                        "      last {}: {} {}\n",
                        o.task,
                        o.outcome,
                        o.detail.as_deref().unwrap_or("")
                    ));
                }
            }
        }
        match &status.maintenance.leader {
            Some(l) if l.holding => out.push_str(&format!(
                "maintenance.leader: {} on {} pid {} since {}\n",
                l.instance_id, l.host, l.pid, l.since
            )),
            _ => out.push_str("maintenance.leader: none\n"),
        }
        if let Some(p) = &status.maintenance.pinned_snapshot {
            out.push_str(&format!(
                "pinned snapshot: backend pid {} ({}) open {:.0}s; prune waits for it\n",
                p.pid,
                p.state.as_deref().unwrap_or("?"),
                p.age_secs
            ));
        }
        out.trim_end().to_string()
    });
    Ok(())
}
