//! What every scenario gets: the server, the run's options, progress and
//! notes, and a fresh database per run.

use super::system::System;
use super::{baseline, plain};
use crate::BoxError;
use awa_harness::{PgServer, ServerKind, TestDb, quote_ident};
use indicatif::{ProgressBar, ProgressStyle};
use sqlx::{Connection, PgConnection};
use std::sync::Mutex;

/// Every plain table of the database (ring partitions included; a
/// partitioned parent takes no storage parameters), autovacuum off.
const AUTOVACUUM_OFF: &str = "DO $$
DECLARE t regclass;
BEGIN
    FOR t IN SELECT c.oid::regclass FROM pg_class c
               JOIN pg_namespace n ON n.oid = c.relnamespace
              WHERE c.relkind = 'r'
                AND n.nspname NOT IN ('pg_catalog', 'information_schema')
                AND n.nspname NOT LIKE 'pg\\_%'
    LOOP
        EXECUTE format('ALTER TABLE %s SET (autovacuum_enabled = false, toast.autovacuum_enabled = false)', t);
    END LOOP;
END
$$";

/// What every scenario needs.
#[derive(Debug)]
pub struct Ctx {
    pub server: PgServer,
    pub quick: bool,
    pub json: bool,
    /// For CPU accounting, when the server runs on this machine.
    pub postmaster_pid: Option<i64>,
    /// Scenario `baseline` is on: how the baseline completes jobs.
    pub baseline: Option<baseline::Completion>,
    /// `--drain-concurrency`, else the drain's default.
    pub drain_concurrency: Option<usize>,
    /// `--drain-workers`, else one.
    pub drain_workers: Option<usize>,
    /// `--drain-job-ms`: how long each drained job's handler waits.
    pub drain_job_time: std::time::Duration,
    /// `--procs-connections`, else the procs producer's default.
    pub procs_connections: Option<usize>,
    /// `--explain` and the server has pg_stat_statements loaded: runs that
    /// report their statements (scenarios `procs` and `cost`) read it, and
    /// scenario `claim-cost` takes its server time per call from it.
    pub statements: bool,
    /// The server's `autovacuum` is on (PostgreSQL's default; the private
    /// cluster keeps it).
    pub autovacuum: bool,
    pub(super) template_key: String,
    pub(super) notes: Mutex<Vec<String>>,
}

/// The database one scenario (or phase) runs in.
#[derive(Debug)]
pub struct ScenarioDb {
    url: String,
    name: String,
    /// The schema the cost figures cover (`awa`, or the baseline's).
    schema: &'static str,
    // Dropping it drops the database.
    _db: Option<TestDb>,
}

impl ScenarioDb {
    pub fn url(&self) -> &str {
        &self.url
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn schema(&self) -> &'static str {
        self.schema
    }
}

impl Ctx {
    /// Progress and remarks: stdout for tables, stderr next to JSON.
    pub fn say(&self, msg: impl AsRef<str>) {
        if self.json {
            eprintln!("{}", msg.as_ref());
        } else {
            println!("{}", msg.as_ref());
        }
    }

    /// A remark that also goes into the report.
    pub fn note(&self, msg: impl Into<String>) {
        let msg = msg.into();
        self.say(format!("note: {msg}"));
        self.notes.lock().expect("notes lock").push(msg);
    }

    pub fn bar(&self, len: u64, msg: impl Into<String>) -> ProgressBar {
        let style = ProgressStyle::with_template(
            "{spinner} {msg:<24} [{bar:32}] {pos}/{len} ({per_sec}, {elapsed})",
        )
        .expect("progress template")
        .progress_chars("=> ");
        let bar = ProgressBar::new(len).with_style(style);
        bar.set_message(msg.into());
        bar
    }

    /// The systems each run of a scenario covers, ours first.
    pub fn systems(&self) -> Vec<System> {
        let mut all = vec![System::Awa];
        all.extend(self.baseline.map(System::Baseline));
        all
    }

    /// Like [`Ctx::systems`], but with `--quick` only ours: for the runs
    /// the smoke test need not repeat for the baseline (it exercises the
    /// baseline once per scenario, briefly).
    pub fn systems_unless_quick(&self) -> Vec<System> {
        if self.quick {
            vec![System::Awa]
        } else {
            self.systems()
        }
    }

    /// A fresh database for `system` (migrated for ours, the baseline's
    /// table for the baseline), with function statistics on and a
    /// checkpoint just taken (not with `--quick`), so every run starts
    /// alike.
    pub async fn fresh_db(&self, system: System) -> Result<ScenarioDb, BoxError> {
        let made = match system {
            System::Awa => {
                TestDb::new_on(&self.server, &self.template_key, |url| async move {
                    awa_maint::migrate(&url)
                        .await
                        .map(drop)
                        .map_err(|e| Box::new(e) as BoxError)
                })
                .await
            }
            System::Baseline(_) => {
                TestDb::new_on(&self.server, &baseline::template_key(), |url| async move {
                    baseline::install(&url).await
                })
                .await
            }
            System::Plain => {
                TestDb::new_on(&self.server, &plain::template_key(), |url| async move {
                    plain::install(&url).await
                })
                .await
            }
        };
        let db = match made {
            Ok(db) => ScenarioDb {
                url: db.url().to_string(),
                name: db.name().to_string(),
                schema: system.schema(),
                _db: Some(db),
            },
            Err(err) if self.server.kind() == ServerKind::External => {
                self.note(format!(
                    "cannot create a database per scenario ({err}); reusing the DATABASE_URL \
                     database, so figures of later scenarios include earlier leftovers"
                ));
                let url = self.server.url().to_string();
                match system {
                    System::Awa => drop(awa_maint::migrate(&url).await?),
                    System::Baseline(_) => baseline::install(&url).await?,
                    System::Plain => plain::install(&url).await?,
                }
                let mut conn = PgConnection::connect(&url).await?;
                let name: String = sqlx::query_scalar("SELECT current_database()::text")
                    .fetch_one(&mut conn)
                    .await?;
                let _ = conn.close().await;
                ScenarioDb {
                    url,
                    name,
                    schema: system.schema(),
                    _db: None,
                }
            }
            Err(err) => return Err(err.into()),
        };
        let mut conn = PgConnection::connect(self.server.url()).await?;
        let alter = format!(
            "ALTER DATABASE {} SET track_functions = 'pl'",
            quote_ident(&db.name)
        );
        if let Err(err) = sqlx::query(sqlx::AssertSqlSafe(alter))
            .execute(&mut conn)
            .await
        {
            self.note_once(format!(
                "track_functions could not be set ({err}); no per-function figures"
            ));
        }
        if self.quick {
            // A checkpoint per run takes seconds on a busy machine, and a
            // smoke run's figures are not for comparing.
            self.note_once(
                "--quick: no CHECKPOINT before each run, so WAL figures include more \
                 full-page images than a full run's"
                    .to_string(),
            );
        } else if let Err(err) = sqlx::query("CHECKPOINT").execute(&mut conn).await {
            self.note_once(format!(
                "CHECKPOINT before each scenario failed ({err}); WAL figures depend on \
                 when the server last checkpointed"
            ));
        }
        let _ = conn.close().await;
        Ok(db)
    }

    /// `VACUUM ANALYZE` of the whole scenario database: what autovacuum
    /// does to tables after a large enqueue (an insert-driven vacuum and
    /// an analyze), done at once so the timed phase after it reads
    /// analyzed tables whenever the launcher would have got round to them.
    /// Ours and the baseline alike. Returns how long it took.
    pub async fn vacuum_analyze(&self, db: &ScenarioDb) -> Result<f64, BoxError> {
        self.maintain(db, "VACUUM ANALYZE").await
    }

    /// `ANALYZE` only (the dead-tuple phase: a VACUUM would remove what it
    /// counts). Returns how long it took.
    pub async fn analyze(&self, db: &ScenarioDb) -> Result<f64, BoxError> {
        self.maintain(db, "ANALYZE").await
    }

    async fn maintain(&self, db: &ScenarioDb, statement: &'static str) -> Result<f64, BoxError> {
        let started = std::time::Instant::now();
        let mut conn = PgConnection::connect(db.url()).await?;
        sqlx::raw_sql(statement).execute(&mut conn).await?;
        let _ = conn.close().await;
        Ok(started.elapsed().as_secs_f64())
    }

    /// Turns autovacuum off for every table of the scenario database
    /// (`autovacuum_enabled = false` and its TOAST twin, which `TRUNCATE`
    /// keeps), so its dead-tuple counts show what the job path leaves
    /// behind, as the cluster-wide `autovacuum=off` of earlier runs did.
    pub async fn autovacuum_off(&self, db: &ScenarioDb) -> Result<(), BoxError> {
        let mut conn = PgConnection::connect(db.url()).await?;
        sqlx::raw_sql(AUTOVACUUM_OFF).execute(&mut conn).await?;
        let _ = conn.close().await;
        Ok(())
    }

    pub(super) fn note_once(&self, msg: String) {
        if !self.notes.lock().expect("notes lock").contains(&msg) {
            self.note(msg);
        }
    }

    pub(super) fn take_notes(&self) -> Vec<String> {
        std::mem::take(&mut *self.notes.lock().expect("notes lock"))
    }
}
