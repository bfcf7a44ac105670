//! `cargo xtask migration draft DESCRIPTION [--write]`: the next numbered
//! step, as far as it can be derived, checked against a fresh install.
//!
//! Brings one database up through the existing steps and installs the
//! current sources fresh in another (both with the comparison's custom
//! substrate and runtime role), composes the step
//! (`awa_maint::migrate::draft`: the hand-written files in
//! `crates/awa-maint/migrations/pending/` first, then changed functions,
//! templates and the refresh of every substrate), applies it to the first
//! database and compares the two catalogs. Whatever still differs is
//! printed: write it into a pending file (or the step) by hand and run
//! again. With `--write` the step is written as the next numbered file.

use crate::BoxError;
use awa_harness::{PgServer, TestDb};
use awa_maint::migrate::{self, LATEST_VERSION};
use sqlx::{Connection, PgConnection};
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Debug, clap::Args)]
pub struct MigrationArgs {
    #[command(subcommand)]
    command: MigrationCommand,
}

#[derive(Debug, clap::Subcommand)]
enum MigrationCommand {
    /// Derive the next step from the sources and check it.
    Draft {
        /// What the step does, in a few lowercase words (the file name).
        description: String,
        /// Write it as `crates/awa-maint/migrations/NNNN_<description>.sql`
        /// (else print it).
        #[arg(long)]
        write: bool,
    },
}

fn migrations_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../crates/awa-maint/migrations")
}

/// The hand-written parts, by file name.
fn pending() -> Result<Vec<(String, String)>, BoxError> {
    let dir = migrations_dir().join("pending");
    let mut files = Vec::new();
    if dir.is_dir() {
        for entry in std::fs::read_dir(&dir)? {
            let path = entry?.path();
            if path.extension().is_some_and(|e| e == "sql") {
                let name = path
                    .file_name()
                    .unwrap_or_default()
                    .to_string_lossy()
                    .into_owned();
                files.push((name, std::fs::read_to_string(&path)?));
            }
        }
    }
    files.sort();
    Ok(files)
}

pub async fn run(args: MigrationArgs) -> Result<ExitCode, BoxError> {
    let MigrationCommand::Draft { description, write } = args.command;
    if description.is_empty()
        || !description
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == ' ')
    {
        return Err("the description is a few lowercase words (letters, digits, spaces)".into());
    }
    let server = PgServer::shared().await?;
    let upgraded = TestDb::empty_on(&server).await?;
    migrate::migrate_to(upgraded.url(), LATEST_VERSION).await?;
    let fresh = TestDb::empty_on(&server).await?;
    migrate::migrate(fresh.url()).await?;
    let mut up = PgConnection::connect(upgraded.url()).await?;
    let mut fr = PgConnection::connect(fresh.url()).await?;
    migrate::draft::probe(&mut up).await?;
    migrate::draft::probe(&mut fr).await?;

    let hand_written = pending()?;
    let body = migrate::draft::draft(&mut up, &mut fr, &hand_written).await?;
    let version = LATEST_VERSION + 1;
    let text = format!(
        "-- Awa migration {version}: {description}\n--\n\
         -- Drafted by `cargo xtask migration draft` (hand-written parts first, then\n\
         -- what the sources define), then reviewed. Frozen once on main: never edit\n\
         -- it, add a new step. Runs once, in one transaction, as the migrator.\n\n{body}"
    );

    // Apply it as a step would run, then compare.
    let applied = {
        let mut tx = up.begin().await?;
        let result = sqlx::raw_sql(sqlx::AssertSqlSafe(text.clone()))
            .execute(&mut *tx)
            .await;
        if result.is_ok() {
            tx.commit().await?;
        }
        result
    };
    let mut ok = true;
    match applied {
        Err(err) => {
            ok = false;
            eprintln!(
                "the draft does not apply to a database at version {LATEST_VERSION}: {}",
                awa_core::db_error::Described(&err)
            );
        }
        Ok(_) => {
            let a = migrate::schema_snapshot(&mut up).await?;
            let b = migrate::schema_snapshot(&mut fr).await?;
            let only_a: Vec<_> = a.iter().filter(|l| !b.contains(l)).collect();
            let only_b: Vec<_> = b.iter().filter(|l| !a.contains(l)).collect();
            if !only_a.is_empty() || !only_b.is_empty() {
                ok = false;
                eprintln!(
                    "after the draft, the upgraded database still differs from a fresh install; \
                     write these by hand in crates/awa-maint/migrations/pending/*.sql:"
                );
                for l in only_a {
                    eprintln!("  upgraded only: {l}");
                }
                for l in only_b {
                    eprintln!("  fresh only:    {l}");
                }
            }
        }
    }

    if write {
        let name = format!("{version:04}_{}.sql", description.replace(' ', "_"));
        let path = migrations_dir().join(&name);
        std::fs::write(&path, &text)?;
        println!("wrote {}", path.display());
        println!(
            "next: add ({version}, \"{description}\", include_str!(\"../../migrations/{name}\")) to \
             STEPS in crates/awa-maint/src/migrate/steps.rs, its checksum to RELEASED in \
             crates/awa-maint/tests/maint/upgrade.rs, and delete the pending files it folded in"
        );
    } else {
        print!("{text}");
    }
    Ok(if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}
