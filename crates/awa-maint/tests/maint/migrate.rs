//! Migrations and the substrate installer against real PostgreSQL,
//! including the bad input they must refuse without changing anything.

use awa_core::{SchemaName, SlotCounts, SubstrateShape};
use awa_maint::{MaintError, migrate, substrate};
use sqlx::{Connection, PgConnection};

async fn fresh() -> awa_harness::TestDb {
    awa_harness::TestDb::empty().await.expect("empty database")
}

/// Everything an operator could observe about the layout: schemas,
/// relations, versions. Compared before and after refused operations.
async fn layout(conn: &mut PgConnection) -> Vec<String> {
    sqlx::query_scalar(
        "SELECT n.nspname || '.' || c.relname || ':' || c.relkind::text
           FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
          WHERE n.nspname NOT IN ('pg_catalog', 'information_schema', 'pg_toast')
          UNION ALL
         SELECT 'version:' || coalesce((SELECT max(version)::text FROM awa.schema_version), '-')
          ORDER BY 1",
    )
    .fetch_all(conn)
    .await
    .unwrap()
}

#[tokio::test]
async fn many_concurrent_migrators_apply_each_migration_once() {
    let db = fresh().await;
    let mut tasks = Vec::new();
    for _ in 0..8 {
        let url = db.url().to_string();
        tasks.push(tokio::spawn(async move { migrate(&url).await }));
    }
    let mut applied = 0;
    for t in tasks {
        applied += t.await.unwrap().unwrap().applied.len();
    }
    assert_eq!(applied, 1, "exactly one migrator applied version 1");
    let again = migrate(db.url()).await.unwrap();
    assert!(again.applied.is_empty(), "re-running is a no-op");
    assert_eq!(again.from, Some(awa_maint::LATEST_VERSION));
}

#[tokio::test]
async fn a_newer_database_is_refused_and_left_alone() {
    let db = awa_maint::migrated_test_db().await.unwrap();
    let mut conn = PgConnection::connect(db.url()).await.unwrap();
    sqlx::query("INSERT INTO awa.schema_version VALUES (999, 'from the future', 'x')")
        .execute(&mut conn)
        .await
        .unwrap();
    let before = layout(&mut conn).await;
    let err = migrate(db.url()).await.unwrap_err();
    assert!(
        matches!(
            err,
            MaintError::SchemaTooNew {
                found: 999,
                known: awa_maint::LATEST_VERSION
            }
        ),
        "{err}"
    );
    assert!(err.to_string().contains("upgrade this binary"));
    let shape = SubstrateShape {
        schema: SchemaName::new("later").unwrap(),
        slots: SlotCounts::DEFAULT,
    };
    let err = substrate::prepare(&mut conn, &shape, false)
        .await
        .unwrap_err();
    assert!(matches!(err, MaintError::SchemaTooNew { .. }));
    assert_eq!(layout(&mut conn).await, before);
}

#[tokio::test]
async fn extracted_and_printed_migrations_match_what_migrate_does() {
    let dir = tempfile::tempdir().unwrap();
    let files = awa_maint::migrate::extract_to(dir.path()).unwrap();
    // One file per numbered step, in order (V1__..., V2__..., ...).
    assert_eq!(files.len(), awa_maint::LATEST_VERSION as usize);
    for (i, file) in files.iter().enumerate() {
        let name = file.file_name().unwrap().to_str().unwrap();
        assert!(name.starts_with(&format!("V{}__", i + 1)), "{name}");
    }

    // The printed script, run by an external tool, leaves the database
    // where `migrate` would: migrate then finds nothing to do.
    let db = fresh().await;
    let mut conn = PgConnection::connect(db.url()).await.unwrap();
    sqlx::raw_sql(sqlx::AssertSqlSafe(awa_maint::migrate::full_sql()))
        .execute(&mut conn)
        .await
        .unwrap();
    let report = migrate(db.url()).await.unwrap();
    assert!(report.applied.is_empty());
}

async fn install(
    conn: &mut PgConnection,
    schema: &str,
    q: i32,
    l: i32,
    c: i32,
) -> Result<String, sqlx::Error> {
    sqlx::query_scalar("SELECT awa.install_queue_storage_substrate($1, $2, $3, $4)")
        .bind(schema)
        .bind(q)
        .bind(l)
        .bind(c)
        .fetch_one(conn)
        .await
}

fn sqlstate(err: &sqlx::Error) -> String {
    err.as_database_error()
        .and_then(|e| e.code())
        .map(|c| c.to_string())
        .unwrap_or_default()
}

#[tokio::test]
async fn the_installer_refuses_bad_input_and_changes_nothing() {
    let db = awa_maint::migrated_test_db().await.unwrap();
    let mut conn = PgConnection::connect(db.url()).await.unwrap();
    let before = layout(&mut conn).await;

    for hostile in [
        "x\"; drop schema awa cascade; --",
        "Robert'); DROP TABLE awa.queue_meta;--",
        "",
        "pg_evil",
        "public",
        &"a".repeat(64),
    ] {
        let err = install(&mut conn, hostile, 16, 8, 8).await.unwrap_err();
        assert_eq!(sqlstate(&err), "42602", "{hostile:?}: {err}");
    }
    for bad in [0, 1, 100_000] {
        let err = install(&mut conn, "sized", bad, 8, 8).await.unwrap_err();
        assert_eq!(sqlstate(&err), "22023", "{bad}: {err}");
        let err = install(&mut conn, "sized", 16, bad, 8).await.unwrap_err();
        assert_eq!(sqlstate(&err), "22023");
    }
    let err = install(&mut conn, "awa", 32, 8, 8).await.unwrap_err();
    assert_eq!(sqlstate(&err), "22023");
    assert!(err.to_string().contains("fixed shape"), "{err}");
    assert_eq!(
        layout(&mut conn).await,
        before,
        "refusals leave the database as it was"
    );

    // The default is idempotent; a custom schema installs once, then
    // re-running is unchanged and a different shape is refused.
    assert_eq!(
        install(&mut conn, "awa", 16, 8, 8).await.unwrap(),
        "unchanged"
    );
    assert_eq!(
        install(&mut conn, "my_jobs", 32, 16, 8).await.unwrap(),
        "installed"
    );
    let after_install = layout(&mut conn).await;
    assert_eq!(
        install(&mut conn, "my_jobs", 32, 16, 8).await.unwrap(),
        "unchanged"
    );
    let err = install(&mut conn, "my_jobs", 8, 16, 8).await.unwrap_err();
    assert!(err.to_string().contains("cannot be resized"), "{err}");
    assert_eq!(layout(&mut conn).await, after_install);
    let slots: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
          WHERE n.nspname = 'my_jobs' AND c.relname ~ '^ready_entries_[0-9]+$'",
    )
    .fetch_one(&mut conn)
    .await
    .unwrap();
    assert_eq!(slots, 32);

    // A foreign schema is never adopted.
    sqlx::raw_sql(
        "CREATE SCHEMA IF NOT EXISTS sales; CREATE TABLE IF NOT EXISTS sales.orders (id int)",
    )
    .execute(&mut conn)
    .await
    .unwrap();
    let err = install(&mut conn, "sales", 16, 8, 8).await.unwrap_err();
    assert_eq!(sqlstate(&err), "42P06", "{err}");
}

#[tokio::test]
async fn concurrent_installs_of_one_schema_serialize() {
    let db = awa_maint::migrated_test_db().await.unwrap();
    let mut tasks = Vec::new();
    for _ in 0..8 {
        let url = db.url().to_string();
        tasks.push(tokio::spawn(async move {
            let mut conn = PgConnection::connect(&url).await.unwrap();
            install(&mut conn, "shared_jobs", 16, 8, 8).await.unwrap()
        }));
    }
    let mut outcomes = Vec::new();
    for t in tasks {
        outcomes.push(t.await.unwrap());
    }
    assert_eq!(outcomes.iter().filter(|o| *o == "installed").count(), 1);
    assert_eq!(outcomes.iter().filter(|o| *o == "unchanged").count(), 7);
}

#[tokio::test]
async fn reset_is_refused_for_awa_and_in_use_schemas() {
    let db = awa_maint::migrated_test_db().await.unwrap();
    let mut conn = PgConnection::connect(db.url()).await.unwrap();
    let awa = SubstrateShape {
        schema: SchemaName::default_schema(),
        slots: SlotCounts::DEFAULT,
    };
    let err = substrate::prepare(&mut conn, &awa, true).await.unwrap_err();
    assert!(matches!(err, MaintError::DefaultSchemaReset));
    assert!(err.to_string().contains("Restore from a backup"));

    let custom = SubstrateShape {
        schema: SchemaName::new("side").unwrap(),
        slots: SlotCounts::new(8, 4, 4).unwrap(),
    };
    assert_eq!(
        substrate::prepare(&mut conn, &custom, false).await.unwrap(),
        substrate::PrepareOutcome::Installed
    );
    let bigger = SubstrateShape {
        slots: SlotCounts::new(32, 8, 8).unwrap(),
        ..custom.clone()
    };
    assert_eq!(
        substrate::prepare(&mut conn, &bigger, true).await.unwrap(),
        substrate::PrepareOutcome::Reset
    );
    sqlx::query(
        "UPDATE awa.storage_transition_state SET state = 'prepared', target_schema = 'side'",
    )
    .execute(&mut conn)
    .await
    .unwrap();
    let before = layout(&mut conn).await;
    let err = substrate::prepare(&mut conn, &custom, true)
        .await
        .unwrap_err();
    assert!(matches!(err, MaintError::SchemaInUse(_)), "{err}");
    assert_eq!(layout(&mut conn).await, before);
}
