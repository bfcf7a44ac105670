//! `awa migrate`

use crate::cli::{Cli, MigrateArgs};
use crate::{db, error::CliError, output, progress::Progress};
use awa_maint::migrate as m;

pub async fn run(cli: &Cli, args: &MigrateArgs) -> Result<(), CliError> {
    if args.sql {
        let script = match (args.from, args.to) {
            (None, None) => m::full_sql(),
            (from, to) => m::steps_sql(from.unwrap_or(0), to.unwrap_or(m::LATEST_VERSION))
                .map_err(CliError::Maint)?,
        };
        output::print_raw(&script);
        return Ok(());
    }
    if let Some(dir) = &args.extract_to {
        let files = m::extract_to(dir).map_err(CliError::Maint)?;
        let names: Vec<String> = files.iter().map(|p| p.display().to_string()).collect();
        output::emit(cli.json, &serde_json::json!({ "files": names }), || {
            format!(
                "wrote {} migration file(s):\n  {}",
                names.len(),
                names.join("\n  ")
            )
        });
        return Ok(());
    }
    let url = db::require_url(&cli.database_url)?;
    // Fail fast, with our own message, when the server is not there.
    drop(db::connect(url).await?);
    let spinner = Progress::spinner(cli.json, "applying migrations");
    let report = match args.to {
        Some(to) => m::migrate_to(url, to).await,
        None => m::migrate(url).await,
    };
    drop(spinner);
    let report = report?;
    output::emit(cli.json, &report, || {
        match (report.from, report.applied.is_empty()) {
            (_, true) => format!("schema is up to date at version {}", report.to),
            (None, false) => format!("migrated a fresh database to version {}", report.to),
            (Some(from), false) => format!("migrated from version {from} to {}", report.to),
        }
    });
    Ok(())
}
